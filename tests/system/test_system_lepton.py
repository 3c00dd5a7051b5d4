"""A tiny job as a real DAG run on DGX Cloud Lepton: against the fake workspace inside ``make test``; against a real
workspace (billed) with ``LEPTON_SYSTEM_TEST=real`` and a ``lepton_default`` connection
(``AIRFLOW_CONN_LEPTON_DEFAULT``: workspace id in the login, token in the password), skipped without one. It prints
the estimated cost before submitting anything and always stops and deletes the job afterwards."""

from __future__ import annotations

import contextlib
import copy
import os

import pytest
from helpers import run_state, task_states

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")

REAL = os.environ.get("LEPTON_SYSTEM_TEST", "") == "real"
#: dollars per hour of the shape (Lepton's SDK does not publish prices): the estimate printed before the run
PRICE_PER_HOUR = float(os.environ.get("LEPTON_SYSTEM_PRICE_PER_HOUR", "0.50"))
EXPECTED_MINUTES = 10


@pytest.fixture
def lepton_target(request, monkeypatch):
    if not REAL:
        return request.getfixturevalue("lepton_fake")
    if not os.environ.get("AIRFLOW_CONN_LEPTON_DEFAULT"):
        pytest.skip("REAL LEPTON SYSTEM TEST NOT RUN: set AIRFLOW_CONN_LEPTON_DEFAULT (workspace id, token)")
    return None


def stop_and_delete(dag_id: str, task_id: str, run_id: str) -> list[str]:
    """Stop and delete the jobs of the task's first tries (whatever the run did); returns those that existed."""
    from airflow_provider_brev.core.lepton.names import job_name
    from airflow_provider_brev.hooks.lepton import LeptonHook

    hook, found = LeptonHook(os.environ.get("LEPTON_SYSTEM_CONN_ID", "lepton_default")), []
    for try_number in (1, 2, 3):
        name = job_name(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number=try_number)
        with contextlib.suppress(Exception):
            if hook.get_job(name) is not None:
                found.append(name)
                hook.stop_job(name)
                hook.delete_job(name)
    return found


def test_a_lepton_job_runs_streams_its_log_and_is_cleaned_up(lepton_target, dagbag, announce, task_logs):
    from airflow.models import DagRun

    shape = os.environ.get("LEPTON_SYSTEM_SHAPE", "cpu.small")
    label = "real Lepton" if REAL else "the fake Lepton workspace"
    announce(
        f"Lepton system test on {label}: shape {shape} at ${PRICE_PER_HOUR:.2f}/h (LEPTON_SYSTEM_PRICE_PER_HOUR), "
        f"expected {EXPECTED_MINUTES} min, estimated cost ${PRICE_PER_HOUR * EXPECTED_MINUTES / 60:.2f}"
    )
    dag = copy.deepcopy(dagbag.get_dag("lepton_system_job"))
    dag_run = None
    try:
        dag_run = dag.test(run_conf={"marker": "lepton-marker-7"}, logical_date=None)
        assert run_state(dag_run) == "success", task_states(dag_run)
        ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
        result = ti.xcom_pull(task_ids="run")
        assert result["exit_code"] == 0 and result["last_line"] == "lepton-marker-7"
        assert "hello from a Lepton job" in task_logs.text
    finally:
        runs = [dag_run] if dag_run is not None else DagRun.find(dag_id="lepton_system_job")
        for run in runs[-1:]:
            stop_and_delete("lepton_system_job", "run", run.run_id)
    if lepton_target is not None:
        assert all(job.state in ("Completed", "Stopped", "Failed") for job in lepton_target.jobs().values())
