"""The Brev janitor: every hour, delete the expired instances this provider created.

The last cleanup layer. Teardowns, the create operator's own cleanup and ``on_kill`` cannot run when a worker
is SIGKILLed or lost or a triggerer crashes; the instance then outlives its DAG run. Every name the create
operator derives carries the owner prefix and an expiry (``max_lifetime``, default 24 h), so this sweep deletes
it once expired. Instances without the prefix in that exact format (your own notebooks) are never touched.
Set ``dry_run=True`` first to see in the log what it would delete.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator

with DAG(
    dag_id="brev_janitor",
    schedule="@hourly",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["brev", "example", "cleanup"],
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
) as dag:
    # [START howto_brev_janitor]
    sweep = BrevSweepInstancesOperator(
        task_id="sweep_expired_instances",
        # name_prefix defaults to the connection extra ``name_prefix`` (else ``afbrev``)
        grace_period=timedelta(minutes=15),
        execution_timeout=timedelta(minutes=30),
    )
    # [END howto_brev_janitor]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
