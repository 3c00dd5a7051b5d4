"""The flagship is warm by default: triggered twice with nothing but its bucket and dataset (the DAG's own
``reuse_key``, ``release="stop"`` and ``max_idle_hours``), the second run starts the first run's instance, pulls no
image byte and downloads no unchanged object, and between and after the runs nothing bills GPU time -- only the
disk of the one stopped instance, which the test then deletes. Real ``dag.test()`` runs against the simulator and
moto S3."""

from __future__ import annotations

import json
import re
import time

import pytest
from helpers import (
    cli_calls,
    delete_kept_instance,
    run_kept,
    run_state,
    task_states,
    the_page_reads_the_bill,
    until_status,
)

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset
from airflow_provider_brev.testing.evidence import downloads, pulled_bytes

FLAGSHIP = "tao_visual_changenet_retrain"
DATASET_PREFIX = "datasets/vcn-aoi/"
NGC_KEY = "ngc-key-" + "7c2e" * 8
STEPS = ("gap_analysis", "train", "evaluate")
IMAGE_BYTES = 3 * 10**9


def xcom(dag_run, task_id: str, key: str = "return_value"):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=key)


def billed(sim) -> dict[str, tuple[float, float]]:
    """Per instance id: the seconds billed at the machine's price and those billed for the stopped disk alone."""
    return {row["id"]: (row["running_seconds"], row["stopped_seconds"]) for row in sim.billing()}


@pytest.fixture
def dataset(aws_connection, monkeypatch) -> int:
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    return upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, DATASET_PREFIX)


def test_the_flagship_triggered_twice_starts_the_first_runs_instance(
    run_dag, brev_sim, aws_connection, dataset, task_logs
):
    sim = brev_sim
    sim.set_docker(image_bytes=IMAGE_BYTES)  # each image is this big (downloaded at once: no pull rate set)
    conf = {"bucket": aws_connection.bucket, "dataset_prefix": DATASET_PREFIX}  # the DAG's defaults otherwise
    first = run_kept(run_dag, FLAGSHIP, conf)
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create_instance")
    instance_id = sim.instance(name)["id"]
    assert xcom(first, "delete_instance")["stopped"] is True
    # the break-even decided, with both numbers: 3 h of the disk against the GPU time of the cold start
    assert f"Release of {name} (id {instance_id}, reuse key 'tao-vcn-retrain'): stopping: the disk stopped for " in (
        task_logs.text
    )
    [(disk, gpu)] = re.findall(r"stopped for 3\.00 h costs \$([\d.]+), less than the \$([\d.]+) of GPU", task_logs.text)
    assert 0 < float(disk) < float(gpu)
    until_status(sim, name, "STOPPED")
    assert pulled_bytes(sim, 0.0) == 2 * IMAGE_BYTES  # the cold run pulled both images, once each

    second_started = time.time()
    second = run_kept(run_dag, FLAGSHIP, conf)
    assert run_state(second) == "success", task_states(second)
    assert xcom(second, "create_instance") == name
    assert sim.instance(name)["id"] == instance_id
    assert [call["argv"][-1] for call in cli_calls(sim, "start")] == [instance_id]
    assert len(cli_calls(sim, "create")) == 1 and cli_calls(sim, "delete") == []
    assert f"Reuse key 'tao-vcn-retrain': starting stopped instance {name}" in task_logs.text
    assert pulled_bytes(sim, second_started) == 0  # both images were on the kept disk
    for step in STEPS:
        assert downloads(xcom(second, step))[0] == (0, dataset), step
    assert xcom(second, "delete_instance")["stopped"] is True
    # the Brev page reads the warm run's bill: its resume, the stopped disk's time, what no task covered
    report = the_page_reads_the_bill(second)
    assert report["seconds"]["resume"] > 0 and report["seconds"]["stopped"] > 0, report["table"]
    assert any(row["task_id"] == "(uncovered)" for row in report["tasks"]), report["table"]

    # nothing bills GPU time any more: the one instance is stopped, and only its disk time grows
    until_status(sim, name, "STOPPED")
    assert [(i["id"], i["status"]) for i in sim.instances()] == [(instance_id, "STOPPED")]
    before = billed(sim)
    sim.advance(600)
    after = billed(sim)
    assert after[instance_id][0] == before[instance_id][0]
    assert after[instance_id][1] == pytest.approx(before[instance_id][1] + 600, abs=1.0)

    delete_kept_instance(sim, name)  # the test's cleanup (the janitor's, once max_idle_hours passed)
    assert sim.instances() == []
