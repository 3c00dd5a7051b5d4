"""DAGs exercised by tests/integration/test_retry_safety.py: a retry never pays twice for work already done.

``run`` appends to ``counter`` on the instance each time its command really runs; ``post_execute`` fails try 1
*after* the job succeeded (what the scheduler's deferral race, apache/airflow#72716, does to a try whose job
succeeded), so try 2 must collect that job instead of running the command again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)

START = datetime(2026, 1, 1)


def fail_try_1(context: Any, result: Any) -> None:
    """Fail the task on its first try, after its job finished successfully."""
    if context["ti"].try_number == 1:
        raise RuntimeError("try 1 fails after its job succeeded")


for deferrable in (False, True):
    with DAG(
        dag_id=f"retry_after_success_{'deferrable' if deferrable else 'sync'}",
        schedule=None,
        start_date=START,
    ):
        create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
        run = BrevExecOperator(
            task_id="run",
            instance_name=create.output,
            command="echo ran >> counter; echo the-work-is-done",
            deferrable=deferrable,
            poll_interval=0.2,
            retries=1,
            retry_delay=timedelta(seconds=0),
            post_execute=fail_try_1,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> run >> delete.as_teardown(setups=create)
