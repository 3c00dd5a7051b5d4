"""OpenLineage: the S3 datasets of an exec step and a TAO step, as the OpenLineage provider extracts them from the
running and the finished tasks of a real ``dag.test()`` run (simulator + moto S3). The transfers' datasets:
tests/unit/core/instances/test_sweep.py.

The OpenLineage provider's listener calls its ``ExtractorManager`` on the running task when a task starts and
ends; the recorder below is a listener of its own that does the same (without emitting events, which needs a
transport), so what is asserted is what OpenLineage would send.
"""

from __future__ import annotations

import json

import pytest
from airflow.listeners import hookimpl
from helpers import run_state, task_states

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

pytest.importorskip("airflow.providers.openlineage.extractors", reason="the OpenLineage provider is not installed")

NGC_KEY = "ngc-key-" + "0l1n" * 8


class LineageRecorder:
    """A task-instance listener: what the OpenLineage provider extracts from each task at its start and end."""

    def __init__(self) -> None:
        self.started: dict[str, object] = {}
        self.completed: dict[str, object] = {}

    def _extract(self, task_instance, state):
        from airflow.providers.openlineage.extractors.manager import ExtractorManager

        dag_run = task_instance.get_template_context()["dag_run"]
        return ExtractorManager().extract_metadata(dag_run, task_instance.task, state, task_instance)

    @hookimpl
    def on_task_instance_running(self, previous_state, task_instance):
        from airflow.utils.state import TaskInstanceState

        self.started[task_instance.task_id] = self._extract(task_instance, TaskInstanceState.RUNNING)

    @hookimpl
    def on_task_instance_success(self, previous_state, task_instance):
        from airflow.utils.state import TaskInstanceState

        self.completed[task_instance.task_id] = self._extract(task_instance, TaskInstanceState.SUCCESS)


@pytest.fixture
def lineage():
    from airflow.sdk.listener import get_listener_manager

    recorder = LineageRecorder()
    manager = get_listener_manager()
    manager.add_listener(recorder)
    try:
        yield recorder
    finally:
        manager.pm.unregister(recorder)


def datasets(extracted) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    return [(d.namespace, d.name) for d in extracted.inputs], [(d.namespace, d.name) for d in extracted.outputs]


def test_exec_and_tao_steps_report_their_s3_datasets(run_dag, brev_sim, aws_connection, monkeypatch, lineage):
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    aws_connection.put("inputs/a.txt", b"alpha\n")
    upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, "datasets/vcn/", samples=8)
    dag_run = run_dag("brev_lineage", conf={"bucket": aws_connection.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)

    bucket = f"s3://{aws_connection.bucket}"
    run_prefix = next(k for k in aws_connection.keys("runs/") if k.endswith("/out/list.txt")).rsplit("/out/", 1)[0]
    assert datasets(lineage.completed["run"]) == ([(bucket, "inputs")], [(bucket, f"{run_prefix}/out")])
    assert datasets(lineage.completed["train"]) == (
        [(bucket, "datasets/vcn"), (bucket, "datasets/vcn/train.csv")],  # inputs, then the pre-launch check's
        [(bucket, f"{run_prefix}/train")],
    )
    for task_id in ("run", "train"):  # the same datasets when the task started
        assert datasets(lineage.started[task_id]) == datasets(lineage.completed[task_id])
    assert datasets(lineage.completed["create"]) == ([], [])  # moves no S3 data
