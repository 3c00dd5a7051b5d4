"""The janitor's report in the task memory (airflow_provider_brev/instances/sweep.py ``SweepReport``), told by a real
task (tests/integration/dags/task_memory_cases.py) under the key users read (``report``)."""

from __future__ import annotations

from helpers import succeeded, xcom_of

from airflow_provider_brev.instances.sweep import empty_report


def test_the_report_goes_to_xcom_report(run_dag):
    dag_run = succeeded(run_dag("memory_sweep_report"))
    assert xcom_of(dag_run, "janitor", "report") == {**empty_report(False), "deleted": ["afbrev-x"]}
