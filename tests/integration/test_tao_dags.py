"""Issue: TAO training and gap analysis as tasks, and the flagship retraining DAG (simulator + moto S3)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from helpers import cli_calls, deferrals, run_state, task_states

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

NGC_KEY = "ngc-key-" + "9f3a" * 8
DATASET_PREFIX = "datasets/vcn-aoi/"
DS_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services"
PYT_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


@pytest.fixture
def tao_env(aws_connection, brev_sim, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, DATASET_PREFIX)
    return aws_connection


def wait_for_no_instances(sim, timeout=20.0):
    deadline = time.monotonic() + timeout
    while sim.instances():
        assert time.monotonic() < deadline, sim.instances()
        time.sleep(0.05)


def flagship(run_dag, aws, **conf):
    """A cold flagship run whose teardown deletes its instance (these tests are about the TAO steps; its warm default
    is tests/integration/test_warm_flagship.py's)."""
    conf = {"bucket": aws.bucket, "dataset_prefix": DATASET_PREFIX, "reuse_key": None, "release": "delete", **conf}
    return run_dag("tao_visual_changenet_retrain", conf=conf)


def test_flagship_dag_end_to_end(run_dag, brev_sim, tao_env, task_logs):
    dag_run = flagship(run_dag, tao_env)
    states = task_states(dag_run)
    assert run_state(dag_run) == "success", states
    assert states["promote"] == "success"
    keys = tao_env.keys("runs/")
    assert any(k.endswith("/train/status.json") for k in keys), keys
    assert any("/train/model_epoch_" in k for k in keys), keys
    assert len(cli_calls(brev_sim, "create")) == 1
    wait_for_no_instances(brev_sim)
    evaluate = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "evaluate").xcom_pull(
        task_ids="evaluate"
    )
    assert "test_acc" in evaluate["kpis"]
    assert "progress: 100%" in task_logs.text  # epochs were reported as a percentage
    # secrets: NGC key and AWS keys never on a brev command line (incl. what exec hands to ssh) nor in logs
    for call in brev_sim.calls():
        dumped = json.dumps(call)
        assert NGC_KEY not in dumped
        assert all(secret not in dumped for secret in tao_env.secrets)
    assert NGC_KEY not in task_logs.text
    docker_calls = brev_sim.docker_calls()
    assert brev_sim.docker_calls(subcommand="login") and brev_sim.docker_calls(subcommand="run")  # what to check
    for docker_call in docker_calls:
        assert not docker_call.get("password_on_argv")
        assert not docker_call.get("inline_env_values")
    # each image the steps declare is pulled once on the instance (train's image ahead, while gap analysis runs)
    pulls = Counter(call["argv"][-1] for call in brev_sim.docker_calls(subcommand="pull"))
    assert pulls == {DS_IMAGE: 1, PYT_IMAGE: 1}, pulls
    # evaluate found train's checkpoints present: it downloaded none of train's uploaded objects
    train_keys = [k for k in keys if "/train/" in k]
    dataset_sync, checkpoints_sync = evaluate["sync"]["inputs"]
    assert (checkpoints_sync["transferred"], checkpoints_sync["skipped"]) == (0, len(train_keys)), checkpoints_sync
    assert dataset_sync["transferred"] == 0, dataset_sync
    _no_docker_notice_and_one_aws_read_per_execution(brev_sim, task_logs)


TAO_STEPS = ("gap_analysis", "train", "evaluate")


def _no_docker_notice_and_one_aws_read_per_execution(brev_sim, task_logs) -> None:
    """The TAO steps log no docker notice and read the AWS connection once per execution (of the flagship run)."""
    logins = brev_sim.docker_calls(subcommand="login")
    assert len(logins) == len(TAO_STEPS)  # every step logged in to nvcr.io: docker printed its notice each time
    assert "stored unencrypted" not in task_logs.text
    assert "credential helper" not in task_logs.text
    assert "credential-store" not in task_logs.text
    # preflight reads S3 once; a deferrable step runs once before it defers and once more after each resume
    executions = 1 + sum(1 + len(deferrals(task_logs, step)) for step in TAO_STEPS)
    assert all(deferrals(task_logs, step) for step in TAO_STEPS)
    retrieved = [line for line in task_logs.lines if "credentials retrieved" in line]
    assert len(retrieved) == executions, retrieved


def test_an_oom_fails_train_without_retry_and_the_flagship_leaves_nothing(run_dag, brev_sim, tao_env, task_logs):
    brev_sim.set_tao(oom="train")
    dag_run = flagship(run_dag, tao_env)
    states = task_states(dag_run)
    assert run_state(dag_run) == "failed"
    assert states["train"] == "failed"
    train = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "train")
    assert train.try_number == 1  # retries=1 in default_args, but a program fault is not retried
    assert "out of memory" in task_logs.text
    assert states["delete_instance"] == "success"
    wait_for_no_instances(brev_sim)


def test_silent_pass_is_a_failure(run_dag, brev_sim, tao_env, task_logs):
    brev_sim.set_tao(silent_pass="train")
    dag_run = flagship(run_dag, tao_env)
    assert task_states(dag_run)["train"] == "failed"
    assert "no new checkpoint" in task_logs.text
    wait_for_no_instances(brev_sim)


def test_unreachable_kpi_fails_without_retry(run_dag, brev_sim, tao_env, task_logs):
    brev_sim.set_tao(unreachable_kpi=True)
    dag_run = flagship(run_dag, tao_env)
    gap = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "gap_analysis")
    assert gap.state == "failed"
    assert gap.try_number == 1
    assert "unreachable_kpi" in task_logs.text
    wait_for_no_instances(brev_sim)


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing_dataset", "S3 inputs are missing"),
        ("missing_ngc", "no NGC API key is configured"),
    ],
)
def test_preflight_failures_stop_before_create(
    run_dag, brev_sim, aws_connection, monkeypatch, task_logs, setup, expected
):
    if setup == "missing_ngc":
        monkeypatch.delenv("AIRFLOW_CONN_NGC_DEFAULT", raising=False)
        monkeypatch.delenv("NGC_API_KEY", raising=False)
        upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, DATASET_PREFIX)
    else:
        monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    dag_run = flagship(run_dag, aws_connection)
    assert task_states(dag_run)["preflight"] == "failed"
    assert expected in task_logs.text
    assert cli_calls(brev_sim, "create") == []
