"""DAGs exercised by tests/integration/test_lifecycle_dags.py against the Brev simulator.

Knobs come from ``params`` (overridable with ``dag.test(run_conf=...)``) so one file covers many cases.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.sensors.brev import BrevReadySensor

START = datetime(2026, 1, 1)

with DAG(
    dag_id="brev_case_failing_work",
    schedule=None,
    start_date=START,
    params={"exit_code": 5},
):
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)

    @task
    def work(instance_name: str, params=None) -> None:
        from airflow_provider_brev.hooks.brev import BrevHook

        result = BrevHook().run_command(instance_name, f"echo working; exit {params['exit_code']}")
        if result.exit_code:
            raise RuntimeError(f"work failed with exit code {result.exit_code}")

    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    work(create.output) >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_case_create_waits",
    schedule=None,
    start_date=START,
    params={"ready_timeout": 60},
):
    create = BrevCreateInstanceOperator(
        task_id="create",
        gpu="L40S:1",
        ready_timeout="{{ params.ready_timeout }}",  # type: ignore[arg-type]
        poll_interval=0.2,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_case_create_deferrable", schedule=None, start_date=START):
    create = BrevCreateInstanceOperator(
        task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2, deferrable=True
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_case_create_only", schedule=None, start_date=START):
    BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)


with DAG(dag_id="brev_case_create_retry", schedule=None, start_date=START):
    # First try: readiness times out (the simulator refuses ssh for a while) and, with delete_on_failure
    # off, the instance stays; the retry must adopt it rather than create a second one.
    BrevCreateInstanceOperator(
        task_id="create",
        gpu="L40S:1",
        ready_timeout=3,
        poll_interval=0.2,
        delete_on_failure=False,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


for mode in ("poke", "reschedule", "deferrable"):
    with DAG(dag_id=f"brev_case_sensor_{mode}", schedule=None, start_date=START):
        create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", wait_for_ready=False)
        ready = BrevReadySensor(
            task_id="ready",
            instance_name=create.output,
            mode="reschedule" if mode == "reschedule" else "poke",
            deferrable=mode == "deferrable",
            poke_interval=0.2 if mode != "reschedule" else 1,
            timeout=60,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> ready >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_case_bad_input",
    schedule=None,
    start_date=START,
    params={"instance_name": "", "gpu": "", "instance_types": "", "conn_id": "brev_default"},
):
    BrevCreateInstanceOperator(
        task_id="create",
        instance_name="{{ params.instance_name }}",
        gpu="{{ params.gpu }}",
        instance_types="{{ params.instance_types }}",
        brev_conn_id="{{ params.conn_id }}",
        retries=2,
    )
