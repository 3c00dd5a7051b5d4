"""The examples' S3 buckets: every bucket an example defaults to is in the local S3 of ``make airflow`` and
``make demo`` (``EXAMPLE_BUCKETS``/``seed_local_s3`` of scripts/demo.py), and a bucket that does not exist stops the
mixed-stages example in its preflight, before any ``brev create``, with a typed error naming it (simulator + moto)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import cli_calls, run_state, task_states, wait_for_no_instances

from airflow_provider_brev.utils.templates import run_slug

ROOT = Path(__file__).resolve().parents[2]
MIXED = "example_brev_mixed_stages"


@pytest.fixture(scope="module")
def demo() -> Any:
    """scripts/demo.py, what ``make demo`` and ``make airflow`` (scripts/airflow_local.py) seed their S3 with."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import demo

        return demo
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_every_bucket_an_example_defaults_to_is_created_by_the_local_s3(dagbag, demo):
    example_files = {path.name for path in (ROOT / "dags_examples").glob("*.py")}
    defaults = {
        dag.dag_id: dag.params["bucket"]
        for dag in dagbag.dags.values()
        if Path(dag.fileloc).name in example_files and "bucket" in dag.params
    }
    assert {MIXED, "tao_visual_changenet_retrain", "example_mixed_brev_lepton"} <= set(defaults)
    assert {dag_id: bucket for dag_id, bucket in defaults.items() if bucket not in demo.EXAMPLE_BUCKETS} == {}


def test_the_mixed_stages_example_runs_with_its_default_bucket_in_the_seeded_local_s3(
    run_dag, brev_sim, brev_s3, brev_s3_server, demo
):
    """What a user of ``make airflow`` does: trigger the example without changing its params (``brev_s3`` points
    ``aws_default`` at the server; its own bucket stays unused)."""
    demo.seed_local_s3(brev_s3_server.client())
    dag_run = run_dag(MIXED)
    assert run_state(dag_run) == "success", task_states(dag_run)
    written = brev_s3_server.client().list_objects_v2(Bucket="brev-examples")["Contents"]
    assert [obj["Key"] for obj in written] == [f"mixed/{run_slug(dag_run.run_id)}/prepared/samples.txt"]
    wait_for_no_instances(brev_sim)


def test_a_missing_bucket_fails_the_mixed_stages_preflight_before_any_instance(
    run_dag, brev_sim, aws_connection, task_logs
):
    absent = "no-such-bucket-" + aws_connection.bucket.removeprefix("brev-test-")
    dag_run = run_dag(MIXED, conf={"bucket": absent})
    states = task_states(dag_run)
    assert run_state(dag_run) == "failed"
    assert states["preflight"] == "failed"
    assert {states[task] for task in ("create_cpu", "create_gpu", "prepare_data", "train")} == {"upstream_failed"}
    assert cli_calls(brev_sim, "create") == []  # no instance was created...
    assert brev_sim.instances() == [] and brev_sim.billing() == []  # ...nor billed
    text = task_logs.text
    prefix = f"s3://{absent}/mixed/{run_slug(dag_run.run_id)}/prepared/"
    assert "BrevS3LocationError" in text
    assert (
        f"Cannot reach {prefix} (s3_outputs) with the AWS connection 'aws_default': the bucket does not exist: "
        "create it, or correct the bucket name (NoSuchBucket). Nothing was created."
    ) in text
