"""DAGs of the system tests (tests/system/): a tiny lifecycle and an exec job, on the cheapest matching type.

The same DAGs run against the bundled simulator (inside ``make test``) and against real Brev
(``make system-test``); the test passes the instance name (owner-prefixed, so the janitor can sweep it) and the
instance type it chose through ``run_conf``. Nothing here depends on which of the two it talks to: the defaults
(1 s readiness polls, 20-minute readiness budget) suit a GPU cold start and are quick against the simulator.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.sensors.brev import BrevReadySensor

START = datetime(2026, 1, 1)
#: what the system test chooses (``run_conf``); empty values fail the create task before any ``brev`` call
PARAMS = {"instance_name": "", "instance_types": ""}

with DAG(dag_id="brev_system_lifecycle", schedule=None, start_date=START, catchup=False, params=dict(PARAMS)):
    create = BrevCreateInstanceOperator(
        task_id="create_instance",
        instance_name="{{ params.instance_name }}",
        instance_types="{{ params.instance_types }}",
        wait_for_ready=False,  # readiness is its own (deferrable) task below
    )
    ready = BrevReadySensor(task_id="wait_until_ready", instance_name=create.output, deferrable=True)

    @task
    def gpu_name(instance_name: str) -> str:
        from airflow_provider_brev.hooks.brev import BrevHook

        result = BrevHook().run_command(instance_name, "nvidia-smi --query-gpu=name --format=csv,noheader", timeout=600)
        if result.exit_code != 0:
            raise RuntimeError(f"nvidia-smi exited with {result.exit_code}")
        return result.last_line.strip()

    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output, wait_for_deletion=True)
    create >> ready >> gpu_name(create.output) >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_system_exec",
    schedule=None,
    start_date=START,
    catchup=False,
    params={**PARAMS, "marker": "system-exec-done"},
):
    create = BrevCreateInstanceOperator(
        task_id="create_instance",
        instance_name="{{ params.instance_name }}",
        instance_types="{{ params.instance_types }}",
    )
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command='echo "$GREETING"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; '
        'echo "{{ params.marker }}"',
        env={"GREETING": "hello from a detached job"},
        deferrable=True,
        poll_interval=2.0,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output, wait_for_deletion=True)
    create >> run >> delete.as_teardown(setups=create)
