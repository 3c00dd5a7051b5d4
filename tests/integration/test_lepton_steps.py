"""Lepton steps end to end: real ``dag.test()`` runs of tests/dags/lepton_cases.py against the fake Lepton workspace
(the real ``leptonai`` SDK over HTTP) and moto S3, with no logical date."""

from __future__ import annotations

import json

import pytest
from helpers import task_states

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")


def xcom(dag_run, task_id="job"):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id)


@pytest.mark.parametrize("dag_id", ["lepton_command", "lepton_command_deferred"])
def test_a_command_job_runs_with_its_s3_data_and_leaks_no_secret(
    run_dag, lepton_fake, aws_connection, task_logs, dag_id
):
    aws_connection.put("lepton/in/hello.txt", b"hello from s3\n")
    dag_run = run_dag(dag_id, conf={"bucket": aws_connection.bucket})
    assert task_states(dag_run) == {"job": "success"}, task_logs.text
    result = xcom(dag_run)
    assert result["exit_code"] == 0 and result["last_line"] == "finished"
    assert result["sync"]["downloaded"] == 1 and result["sync"]["uploaded"] == 2
    out = f"lepton/out/{dag_run.run_id}/"
    assert aws_connection.get(out + "count.txt").strip() == b"14"
    assert "hello from s3" in task_logs.text  # the job's log in the task log
    assert "secret is ***" in task_logs.text
    [submission] = lepton_fake.submissions()  # one job, named per try
    assert submission["metadata"]["id"] == result["job"]
    spec_text = json.dumps(submission)
    everything = spec_text + task_logs.text + json.dumps(result) + json.dumps(lepton_fake.requests)
    for secret in (
        "s3cr3t-value-123",
        lepton_fake.token,
        *aws_connection.secrets,
        "x-amz-signature",
        "x-amz-credential",
    ):
        assert secret.lower() not in everything.lower(), secret
    assert not lepton_fake.workspace.secrets  # the plan's secret is deleted once the job ended
    assert lepton_fake.job(result["job"]).state == "Completed"  # kept until its TTL: a retry may collect it


def test_a_job_queued_past_its_limit_is_stopped_and_fails_typed(run_dag, lepton_fake, task_logs):
    lepton_fake.workspace.capacity["gpu.8xh100-sxm"] = 0
    dag_run = run_dag("lepton_queue_limit")
    assert task_states(dag_run) == {"job": "failed"}
    assert "LeptonResourcesUnavailableError" in task_logs.text and "queue_timeout" in task_logs.text
    [submission] = lepton_fake.submissions()
    assert lepton_fake.job(submission["metadata"]["id"]) is None  # stopped, then deleted
    assert not lepton_fake.workspace.secrets


def test_a_failed_job_fails_the_task_with_its_exit_code_and_is_deleted(run_dag, lepton_fake, task_logs):
    dag_run = run_dag("lepton_fails")
    assert task_states(dag_run) == {"job": "failed"}
    assert "failed with exit code 3: about to fail" in task_logs.text
    [submission] = lepton_fake.submissions()
    assert lepton_fake.job(submission["metadata"]["id"]) is None


def test_a_ttl_shorter_than_following_needs_is_refused_before_any_request(run_dag, lepton_fake, task_logs):
    dag_run = run_dag("lepton_ttl_too_short")
    assert task_states(dag_run) == {"job": "failed"}
    assert "LeptonTTLTooShortError" in task_logs.text
    assert "ttl_seconds_after_finished=0 is shorter than the 71 s" in task_logs.text  # 5 + 3 x 2 + 60
    assert "set ttl_seconds_after_finished to at least 71" in task_logs.text
    assert lepton_fake.requests == [] and lepton_fake.submissions() == []  # not a single API call
