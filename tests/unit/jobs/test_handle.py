"""The job handle in the task memory (airflow_provider_brev/jobs/handle.py), kept by a real task across a real retry
(tests/integration/dags/task_memory_cases.py): a retry on Airflow 3.3+ finds the job of its first try, and a collected job is
forgotten."""

from __future__ import annotations

from helpers import task_states, xcom_of

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS
from airflow_provider_brev.jobs.handle import STATE_STORE_JOB_KEY, XCOM_JOB
from airflow_provider_brev.operators.brev import XCOM_JOB as CREATE_MODULE_KEY
from airflow_provider_brev.operators.exec import XCOM_JOB as EXEC_MODULE_KEY

HANDLE = {"instance_name": "box", "instance_id": "id-1", "job": {"job_id": "bj-1"}, "try_number": 1}


def test_the_key_keeps_its_public_name_and_homes():
    assert XCOM_JOB == STATE_STORE_JOB_KEY == CREATE_MODULE_KEY == EXEC_MODULE_KEY == "brev_job"


def test_a_retry_reads_the_handle_its_first_try_kept_and_forgets_it_once_collected(run_dag, task_logs):
    dag_run = run_dag("memory_job_handle")
    assert task_states(dag_run) == {"step": "success"}
    assert f"first try fails after keeping its handle (before: None, now: {HANDLE})" in task_logs.as_read
    found = xcom_of(dag_run, "step")
    kept = HANDLE if AIRFLOW_V_3_3_PLUS else None  # XCom is cleared when a task retries, the state store is not
    assert found["read"] == found["stored"] == kept
    assert found["newer"] == {**HANDLE, "try_number": 2}  # this try's (XCom) before the earlier try's
    assert found["stored_after_collect"] is None
    assert xcom_of(dag_run, "step", "brev_job") == {**HANDLE, "try_number": 2}  # a forget tells nothing
