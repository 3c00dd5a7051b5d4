"""One-shot GPU job on an ephemeral Brev instance: created, used and deleted by a single task.

The seed's "ephemeral instance per job": no setup/teardown pair needed -- the operator deletes the instance in a
``finally`` on success, failure and timeout, and the janitor covers a worker that dies mid-task.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevExecOperator
from airflow_provider_brev.utils.cost import cost_report

with DAG(
    dag_id="example_brev_ephemeral_exec",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["brev", "example"],
) as dag:
    # [START howto_brev_ephemeral_exec]
    smoke_test = BrevExecOperator(
        task_id="gpu_smoke_test",
        gpu="L40S:1",
        command="nvidia-smi && python3 -c 'print(sum(range(10**6)))'",
        timeout=3600,
        deferrable=True,
    )
    smoke_test >> cost_report()  # the run's bill: boot, work, and the rest, in the task log and XCom
    # [END howto_brev_ephemeral_exec]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
