"""Lepton steps end to end: real ``dag.test()`` runs of tests/integration/dags/lepton_cases.py against the fake Lepton workspace
(the real ``leptonai`` SDK over HTTP) and moto S3, with no logical date."""

from __future__ import annotations

import json
import re

import pytest
from helpers import task_states

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")


def xcom(dag_run, task_id="job", key="return_value"):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=key)


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
    cost = xcom(dag_run, key="brev_cost")  # a failed job's time is billed too
    assert (cost["instance_name"], cost["estimate"]) == (submission["metadata"]["id"], True)
    assert f"Lepton job {cost['instance_name']} ended (Failed, exit code 3)" in task_logs.text


def test_a_ttl_shorter_than_following_needs_is_refused_before_any_request(run_dag, lepton_fake, task_logs):
    dag_run = run_dag("lepton_ttl_too_short")
    assert task_states(dag_run) == {"job": "failed"}
    assert "LeptonTTLTooShortError" in task_logs.text
    assert "ttl_seconds_after_finished=0 is shorter than the 71 s" in task_logs.text  # 5 + 3 x 2 + 60
    assert "set ttl_seconds_after_finished to at least 71" in task_logs.text
    assert lepton_fake.requests == [] and lepton_fake.submissions() == []  # not a single API call


def test_the_connection_of_a_lepton_step_is_templated_and_mappable(run_dag, lepton_fake, tmp_path, monkeypatch):
    from airflow_provider_brev.core.lepton.names import job_name
    from airflow_provider_brev.testing.fake_lepton import FakeLepton

    other = FakeLepton(tmp_path / "other", workspace_id="ws-other").start()
    try:
        monkeypatch.setenv("AIRFLOW_CONN_LEPTON_OTHER", other.connection_json())
        dag_run = run_dag("lepton_connections", conf={"conn": "lepton_other"})
        states = {(ti.task_id, ti.map_index): ti.state for ti in dag_run.get_task_instances()}
        assert set(states.values()) == {"success"} and len(states) == 3, states
        ids = {"dag_id": "lepton_connections", "run_id": dag_run.run_id, "try_number": 1}

        def submitted(fake):
            return sorted(s["metadata"]["id"] for s in fake.submissions())

        assert submitted(other) == sorted(
            [job_name(task_id="templated", map_index=-1, **ids), job_name(task_id="mapped", map_index=1, **ids)]
        )
        assert submitted(lepton_fake) == [job_name(task_id="mapped", map_index=0, **ids)]
        assert not other.workspace.secrets and not lepton_fake.workspace.secrets
    finally:
        other.close()


def test_a_lepton_step_takes_no_brev_connection():
    """Neither the operator nor its trigger inherits Brev's connection, hook or trigger base."""
    from airflow_provider_brev.operators.lepton import LeptonJobOperator
    from airflow_provider_brev.triggers.brev import BrevBaseTrigger
    from airflow_provider_brev.triggers.lepton import LeptonJobTrigger

    step = LeptonJobOperator(task_id="s", resource_shape="cpu.small", image="i:1", command="x")
    assert not hasattr(step, "brev_conn_id") and not hasattr(step, "hook")
    assert "brev_conn_id" not in step.template_fields and "lepton_conn_id" in step.template_fields
    assert not issubclass(LeptonJobTrigger, BrevBaseTrigger)
    _path, kwargs = LeptonJobTrigger(job="j", lepton_conn_id="lep", since_ns=1).serialize()
    assert kwargs["lepton_conn_id"] == "lep" and "brev_conn_id" not in kwargs
    with pytest.raises(TypeError, match="brev_conn_id"):
        LeptonJobOperator(
            task_id="t", brev_conn_id="brev_default", resource_shape="cpu.small", image="i:1", command="x"
        )


@pytest.mark.parametrize("dag_id", ["lepton_logs_and_cost", "lepton_logs_and_cost_deferred"])
def test_a_lepton_step_logs_and_reports_its_cost_like_a_brev_step(run_dag, lepton_fake, task_logs, monkeypatch, dag_id):
    connection = {**json.loads(lepton_fake.connection_json()), "extra": {"shape_prices": {"gpu.1xh100-sxm": 7.5}}}
    monkeypatch.setenv("AIRFLOW_CONN_LEPTON_DEFAULT", json.dumps(connection))
    dag_run = run_dag(dag_id)
    assert task_states(dag_run) == {"priced": "success", "from_connection": "success"}, task_logs.text
    text = task_logs.text
    # A progress bar is shown as a terminal ends it, as a Brev job's is.
    assert "] step 3/3 100%" in text and "step 1/3" not in text
    costs = {task_id: xcom(dag_run, task_id, key="brev_cost") for task_id in ("priced", "from_connection")}
    for task_id, cost in costs.items():
        job = xcom(dag_run, task_id)["job"]
        assert cost["instance_name"] == job and cost["estimate"] is True, cost
        # One line on how the job ended, and one on what it cost, saying it is an estimate. The line gives the
        # times the follower saw; a job its first poll already found ended (a short job, a busy triggerer) has none.
        [ended] = [line for line in text.splitlines() if f"Lepton job {job} ended (Completed, exit code 0)" in line]
        assert " after " not in ended or re.search(r" after \d+\.\d s (starting|running)", ended), ended
        assert cost["total_dollars"] == round(cost["price_per_hour"] * cost["total_seconds"] / 3600, 6)
    priced = costs["priced"]
    assert (priced["instance_type"], priced["price_per_hour"], priced["price_source"]) == ("cpu.small", 0.5, "step")
    assert priced["seconds"]["work"] >= 1.0  # the job ran (sleep 1) at least that long; queued time is not billed
    assert (
        "on cpu.small at $0.50/h (" in text and "an estimate: Lepton reports no price, the rate is the step's" in text
    )
    gpu = costs["from_connection"]
    assert (gpu["instance_type"], gpu["price_per_hour"], gpu["price_source"]) == ("gpu.1xh100-sxm", 7.5, "connection")
    assert "the rate is the lepton connection's shape_prices" in text


def test_a_bad_price_table_in_the_connection_is_refused_before_any_request(
    run_dag, lepton_fake, task_logs, monkeypatch
):
    connection = {**json.loads(lepton_fake.connection_json()), "extra": {"shape_prices": {"cpu.small": "cheap"}}}
    monkeypatch.setenv("AIRFLOW_CONN_LEPTON_DEFAULT", json.dumps(connection))
    dag_run = run_dag("lepton_fails")
    assert task_states(dag_run) == {"job": "failed"}
    assert "the extra shape_prices of the lepton connection 'lepton_default'['cpu.small'] must be" in task_logs.text
    assert lepton_fake.requests == []
