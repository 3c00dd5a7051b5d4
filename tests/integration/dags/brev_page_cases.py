"""DAGs for tests/integration/test_brev_page.py: what the Brev page of the Airflow UI shows, made by real runs.

* ``brev_page_warm``: create with a ``reuse_key``, a step, a teardown that stops the instance, the run's cost report
  (twice: the second run starts the first one's instance) -> the warm pool and two bars of cost history;
* ``brev_page_billing``: create and a step, no teardown -> an instance still billing (the fleet);
* ``brev_page_private``: the same, in a DAG the test's restricted user may not read.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.utils.cost import run_cost

START = datetime(2026, 1, 1)


def _create(**more: object) -> BrevCreateInstanceOperator:
    return BrevCreateInstanceOperator(
        task_id="create", instance_types="g6e.xlarge", ready_timeout=60, poll_interval=0.2, deferrable=False, **more
    )


def _step(create: BrevCreateInstanceOperator) -> BrevExecOperator:
    return BrevExecOperator(task_id="work", instance_name=create.output, command="echo worked", poll_interval=0.2)


@task(trigger_rule="all_done", multiple_outputs=False)
def cost_report(ti=None) -> dict:
    return run_cost(ti)


with DAG(dag_id="brev_page_warm", schedule=None, start_date=START):
    create = _create(reuse_key="page-weekly", max_idle=3600)
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output, release="stop")
    create >> _step(create) >> delete.as_teardown(setups=create)
    delete >> cost_report()

for dag_id in ("brev_page_billing", "brev_page_private"):
    with DAG(dag_id=dag_id, schedule=None, start_date=START):
        create = _create()
        create >> _step(create) >> cost_report()
