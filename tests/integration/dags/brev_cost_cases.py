"""DAGs exercised by tests/integration/test_cost.py: what steps cost (XCom ``brev_cost``) and the price caps.

The caps come in through ``params`` (templated, rendered as text), as users pass them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.utils.cost import run_cost

START = datetime(2026, 1, 1)
#: Tasks retry at once: a cap refusal must fail on the first try anyway (no retry is spent).
COMMON = {"retries": 1, "retry_delay": timedelta(0)}

# A create task's instance (L40S:1: g6e.xlarge at $2.24/h) with a step on it, followed from the triggerer, and an
# ephemeral step (the cheapest of two explicit types: g5.xlarge at $1.21/h); the last task prints the run's cost.
with DAG(dag_id="brev_cost_steps", schedule=None, start_date=START, params={"cap": "3"}):
    create = BrevCreateInstanceOperator(
        task_id="create",
        gpu="L40S:1",
        ready_timeout=60,
        poll_interval=0.2,
        deferrable=True,
        max_price_per_hour="{{ params.cap }}",
        **COMMON,
    )
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command="sleep 1; echo done",
        deferrable=True,
        poll_interval=0.2,
        timeout=600,
        max_run_cost="{{ params.cap }}",  # $3 > 2.24 $/h x 600 s
        **COMMON,
    )
    solo = BrevExecOperator(
        task_id="solo",
        instance_types=["g5.xlarge", "g6e.xlarge"],
        command="sleep 0.5; echo alone",
        ready_timeout=60,
        poll_interval=0.2,
        timeout=600,
        max_price_per_hour="{{ params.cap }}",
        max_run_cost="{{ params.cap }}",  # $3 > 1.21 $/h x (60 + 600) s
        **COMMON,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output, **COMMON)

    @task(trigger_rule="all_done", multiple_outputs=False)
    def cost_report(ti=None) -> dict:
        return run_cost(ti)

    create >> run >> delete.as_teardown(setups=create)
    [delete, solo] >> cost_report()

# Each cap alone, in a DAG of one task: refused before any `brev create` (and any launch).
with DAG(dag_id="brev_cost_cap_create", schedule=None, start_date=START, params={"cap": "1"}):
    BrevCreateInstanceOperator(
        task_id="create", gpu="L40S:1", ready_timeout=60, max_price_per_hour="{{ params.cap }}", **COMMON
    )

with DAG(dag_id="brev_cost_cap_ephemeral", schedule=None, start_date=START, params={"price": "", "cost": ""}):
    BrevExecOperator(
        task_id="solo",
        gpu="L40S:1",
        command="echo never",
        ready_timeout=60,
        timeout=600,
        max_price_per_hour="{{ params.price }}",
        max_run_cost="{{ params.cost }}",
        **COMMON,
    )

#: The instance the existing-instance cap runs on (the test creates it directly in the simulator).
EXISTING = "priced-box"
with DAG(dag_id="brev_cost_cap_existing", schedule=None, start_date=START, params={"cost": "0.5"}):
    BrevExecOperator(
        task_id="run",
        instance_name=EXISTING,
        command="echo never",
        timeout=3600,
        max_run_cost="{{ params.cost }}",
        **COMMON,
    )

# A deferred step whose job ends long before its event may come back (the test sets [brev] deferral_settle_seconds):
# `work` is the job's own run time; the event held back, and Airflow's resumption, are `resume`.
with DAG(dag_id="brev_cost_settle", schedule=None, start_date=START):
    settled = BrevExecOperator(
        task_id="run",
        instance_name=EXISTING,
        command="sleep 0.5; echo done",
        deferrable=True,
        poll_interval=0.1,
        timeout=600,
        **COMMON,
    )

    @task(trigger_rule="all_done", multiple_outputs=False)
    def settle_report(ti=None) -> dict:
        return run_cost(ti)

    settled >> settle_report()
