"""What a step's syncs did, in the task memory (airflow_provider_brev/staging/step_data.py ``SyncReports``), told and
read by a real task (tests/integration/dags/task_memory_cases.py)."""

from __future__ import annotations

from helpers import succeeded, xcom_of


def test_the_sync_reports_are_told_as_given_and_read_back_in_their_shape(run_dag):
    dag_run = succeeded(run_dag("memory_sync_reports"))
    found = xcom_of(dag_run, "step")
    assert found["empty"] == {"inputs": [], "outputs": [], "output_syncs": 0}
    assert found["read"] == {"inputs": [{"files": 2}], "outputs": [], "output_syncs": 1}
    told = {"inputs": [{"files": 2}], "output_syncs": 1, "unknown": "dropped on read"}
    assert xcom_of(dag_run, "step", "brev_step_data") == told
