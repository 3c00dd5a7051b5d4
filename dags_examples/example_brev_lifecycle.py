"""Instance lifecycle on NVIDIA Brev: create (setup) → wait until usable (deferrable) → work → delete (teardown).

The teardown runs even when the work fails, and the create task deletes its own instance if it fails after
creating it (a failed setup gets no teardown). Runs unchanged against the bundled simulator
(``make demo`` / the test-suite) and against real Brev with a ``brev_default`` connection.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.sensors.brev import BrevReadySensor
from airflow_provider_brev.utils.cost import cost_report

with DAG(
    dag_id="example_brev_lifecycle",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["brev", "example"],
    params={"gpu": "L40S:1"},
) as dag:
    # [START howto_brev_lifecycle]
    create = BrevCreateInstanceOperator(
        task_id="create_instance",
        gpu="{{ params.gpu }}",
        wait_for_ready=False,  # readiness is its own (deferrable) task below
    )

    wait_until_ready = BrevReadySensor(
        task_id="wait_until_ready",
        instance_name=create.output,
        deferrable=True,
    )

    @task
    def nvidia_smi(instance_name: str) -> str:
        """The instance's GPU model, e.g. "NVIDIA L40S" (the full nvidia-smi output is in the task log)."""
        from airflow_provider_brev.hooks.brev import BrevHook

        query = "nvidia-smi --query-gpu=name --format=csv,noheader"
        result = BrevHook().run_command(instance_name, query, timeout=600)
        if result.exit_code != 0:
            raise RuntimeError(f"nvidia-smi exited with {result.exit_code}")
        return result.last_line

    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output)

    create >> wait_until_ready >> nvidia_smi(create.output) >> delete.as_teardown(setups=create)
    delete >> cost_report()  # the instance's bill, split: the sensor's wait is boot; plain tasks are "uncovered"
    # [END howto_brev_lifecycle]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
