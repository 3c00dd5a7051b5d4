"""Used by ``make deployment-test``: a long, detached, non-deferrable ``BrevExecOperator`` that the test SIGKILLs
on a Celery worker mid-job, twice (try 1: the task process; try 2: its supervisor and the task process).

Every retry must re-attach to the remote job that is still running (no second launch): the command appends one
line to ``counter`` in the instance sandbox when it starts, then waits for the gate file the test creates.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)

with DAG(
    dag_id="deploy_brev_worker_kill",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["brev", "deployment-test"],
    params={"gate": "/nonexistent/gate"},
) as dag:
    create = BrevCreateInstanceOperator(task_id="create_instance", gpu="L40S:1", ready_timeout=300, poll_interval=0.5)
    long_job = BrevExecOperator(
        task_id="long_job",
        instance_name=create.output,
        command="echo started >> counter; while [ ! -e {{ params.gate }} ]; do sleep 0.2; done; echo job-done",
        detach=True,
        deferrable=False,  # followed by the worker's task process: that is what gets SIGKILLed
        poll_interval=0.5,
        timeout=900,
        retries=2,
        retry_delay=timedelta(seconds=1),
    )
    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output)
    create >> long_job >> delete.as_teardown(setups=create)
