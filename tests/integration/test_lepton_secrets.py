"""A Lepton step's printed secrets: every line of a multi-line ``secret_env`` value is redacted wherever the job's
output goes -- the task log, XCom, the trigger's events and the job's own log file in its workspace -- by the rule
Brev steps use (core/secrets.py). Real ``dag.test()`` runs against the fake Lepton workspace."""

from __future__ import annotations

import base64
import json
import os

import pytest
from helpers import task_states

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")


@pytest.fixture
def trigger_events(monkeypatch):
    """The payload of every trigger event ``dag.test()`` hands a resumed task (the triggers run as they are)."""
    from airflow.sdk.definitions import dag as dag_module

    events: list[dict] = []
    run_inline = dag_module._run_inline_trigger

    def recording(trigger, ti):
        event = run_inline(trigger, ti)
        if event is not None:
            events.append(event.payload)
        return event

    monkeypatch.setattr(dag_module, "_run_inline_trigger", recording)
    return events


@pytest.mark.parametrize("dag_id", ["lepton_secret_multiline", "lepton_secret_multiline_deferred"])
def test_no_line_of_a_multi_line_secret_leaves_the_job(run_dag, lepton_fake, task_logs, trigger_events, dag_id):
    key_lines = [base64.b64encode(os.urandom(48)).decode() for _ in range(2)]
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(key_lines) + "\n-----END PRIVATE KEY-----"  # 4 lines
    dag_run = run_dag(dag_id, conf={"pem": pem})
    assert task_states(dag_run) == {"job": "success"}, task_logs.text
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "job")
    result = ti.xcom_pull(task_ids="job")
    assert result["last_line"] == "***"  # the key's second line, redacted
    assert "plain output stays" in result["log_tail"] and "-----END" not in json.dumps(result)
    xcoms = {key: ti.xcom_pull(task_ids="job", key=key) for key in ("return_value", "brev_job", "brev_cost")}
    assert "plain output stays" in task_logs.text
    deferred = dag_id.endswith("deferred")
    assert bool(trigger_events) == deferred
    if deferred:  # the event carries the log's end (so the negatives below are not vacuous)
        assert "plain output stays" in json.dumps(trigger_events)
    [submission] = lepton_fake.submissions()
    job_log = lepton_fake.root / "replicas" / f"{submission['metadata']['id']}-0" / "work" / ".airflow-lepton"
    job_log_text = (job_log / "job.log").read_text()
    assert "plain output stays" in job_log_text
    for line in [*key_lines, "-----BEGIN PRIVATE KEY-----"]:
        assert line not in task_logs.text
        assert line not in json.dumps(xcoms, default=str)
        assert line not in json.dumps(trigger_events)
        assert line not in job_log_text
