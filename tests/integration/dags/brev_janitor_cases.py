"""DAGs exercised by tests/integration/test_janitor.py against the Brev simulator."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator

START = datetime(2026, 1, 1)

with DAG(
    dag_id="brev_case_janitor",
    schedule=None,
    start_date=START,
    params={"name_prefix": ""},
):
    BrevSweepInstancesOperator(
        task_id="sweep",
        name_prefix="{{ params.name_prefix }}",  # empty: the connection's prefix
        wait_for_deletion=True,
        deletion_timeout=30,
        poll_interval=0.1,
        cli_retry_limit=2,
        cli_retry_delay=0.01,
    )


with DAG(dag_id="brev_case_janitor_dry_run", schedule=None, start_date=START):
    BrevSweepInstancesOperator(task_id="sweep", dry_run=True)
