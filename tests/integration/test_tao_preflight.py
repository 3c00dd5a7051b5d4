"""Each pre-launch failure stops the run before any `brev create`, naming the missing piece."""

from __future__ import annotations

import json
import time

import pytest
from helpers import cli_calls, task_states


@pytest.fixture
def ngc(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": "ngc-key-1234567"}))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_HF_DEFAULT", raising=False)


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"backbone": "hf_model://nvidia/C-RADIOv2-B"}, "references Hugging Face but no token"),
        ({"input_paths": ["/home/me/dataset"]}, "are not on the Brev instance"),
    ],
)
def test_preflight_failure_stops_before_create(run_dag, brev_sim, ngc, task_logs, conf, expected):
    conf = {"backbone": "/results/backbone.safetensors", "input_paths": [], "instance_paths": [], **conf}
    dag_run = run_dag("brev_tao_preflight", conf=conf)
    assert task_states(dag_run)["preflight"] == "failed"
    assert expected in task_logs.text
    assert cli_calls(brev_sim, "create") == []


def test_preflight_passes_with_hf_token_and_declared_paths(run_dag, brev_sim, ngc, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 20)
    conf = {"backbone": "hf_model://nvidia/C-RADIOv2-B", "input_paths": ["/data/x"], "instance_paths": ["/data/x"]}
    dag_run = run_dag("brev_tao_preflight", conf=conf)
    assert task_states(dag_run)["preflight"] == "success"


def test_declared_instance_path_is_verified_before_gpu_work(run_dag, brev_sim, ngc, task_logs):
    dag_run = run_dag("brev_tao_ephemeral_train")
    assert task_states(dag_run)["train"] == "failed"
    assert "do not exist on" in task_logs.text
    assert brev_sim.docker_calls(subcommand="run") == []  # no GPU work started
    deadline = time.monotonic() + 20
    while brev_sim.instances():
        assert time.monotonic() < deadline, brev_sim.instances()
        time.sleep(0.05)


def test_preflight_s3_outputs_pass_for_an_existing_bucket_without_the_prefix(brev_sim, aws_connection):
    from airflow_provider_brev.operators.tao import BrevPreflightOperator

    op = BrevPreflightOperator(
        task_id="p", s3_outputs=[aws_connection.uri("runs/new/"), aws_connection.uri("runs/new/")], check_brev=False
    )
    report = op.execute({})
    assert report["s3_outputs"] == [aws_connection.uri("runs/new/")]  # checked once, nothing written
    assert aws_connection.keys() == []
    assert brev_sim.calls() == []


def test_preflight_s3_outputs_name_a_missing_bucket_and_what_to_do(brev_sim, aws_connection):
    from airflow_provider_brev.exceptions import BrevS3LocationError
    from airflow_provider_brev.operators.tao import BrevPreflightOperator

    absent = "no-such-bucket-" + aws_connection.bucket.removeprefix("brev-test-")
    op = BrevPreflightOperator(task_id="p", s3_outputs=[f"s3://{absent}/out/"], check_brev=False)
    with pytest.raises(BrevS3LocationError) as err:
        op.execute({})
    assert str(err.value) == (
        f"Cannot reach s3://{absent}/out/ (s3_outputs) with the AWS connection 'aws_default': the bucket does not "
        "exist: create it, or correct the bucket name (NoSuchBucket). Nothing was created."
    )
    assert cli_calls(brev_sim, "create") == []


def test_preflight_s3_outputs_refuse_what_is_not_an_s3_uri_before_asking_s3(brev_sim, aws_connection):
    from airflow_provider_brev.exceptions import BrevInvalidInputError
    from airflow_provider_brev.operators.tao import BrevPreflightOperator

    op = BrevPreflightOperator(task_id="p", s3_outputs=["/local/results"], aws_conn_id="no_such_connection")
    with pytest.raises(BrevInvalidInputError, match="s3_outputs"):
        op.execute({})
    assert brev_sim.calls() == []
