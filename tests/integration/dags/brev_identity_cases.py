"""DAGs exercised by tests/integration/test_instance_identity.py: an instance is known by its id.

``shared-gpu`` is created by the DAG (explicit name). The tests make it vanish outside Airflow and someone else
create a new instance under the freed name; nothing of the DAG may use, stop or delete that one.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)

START = datetime(2026, 1, 1)
NAME = "shared-gpu"
#: The job waits for this file in its HOME (bounded: 300 s), so the test can act while it runs.
GATED = "echo started >> counter; for i in $(seq 1 6000); do [ -e gate ] && break; sleep 0.05; done; echo job-done"


def replace_before_the_step(context: Any) -> None:
    """Before the step starts: the instance is deleted outside Airflow and someone creates another of that name."""
    from airflow_provider_brev.testing import BrevSimulator

    BrevSimulator(os.environ["FAKE_BREV_STATE"]).replace_instance(NAME)


for mode in ("sync", "deferrable"):
    with DAG(dag_id=f"identity_replaced_mid_job_{mode}", schedule=None, start_date=START):
        create = BrevCreateInstanceOperator(
            task_id="create", instance_name=NAME, gpu="L40S:1", ready_timeout=60, poll_interval=0.2
        )
        run = BrevExecOperator(
            task_id="run",
            instance_name=create.output,
            command=GATED,
            deferrable=mode == "deferrable",
            poll_interval=0.2,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> run >> delete.as_teardown(setups=create)


with DAG(dag_id="identity_replaced_before_the_step", schedule=None, start_date=START):
    create = BrevCreateInstanceOperator(
        task_id="create", instance_name=NAME, gpu="L40S:1", ready_timeout=60, poll_interval=0.2
    )
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command="echo started >> counter",
        poll_interval=0.2,
        pre_execute=replace_before_the_step,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output, wait_for_deletion=True)
    create >> run >> delete.as_teardown(setups=create)


#: A provider-managed name whose expiry passed: the janitor's to delete, never re-created under that expiry.
EXPIRED_NAME = "afbrev-expired-0123abcd-x202601010000"

with DAG(dag_id="identity_expired_instance_lost", schedule=None, start_date=START):
    create = BrevCreateInstanceOperator(
        task_id="create", instance_name=EXPIRED_NAME, gpu="L40S:1", ready_timeout=60, poll_interval=0.2
    )
    run = BrevExecOperator(task_id="run", instance_name=create.output, command=GATED, poll_interval=0.2)
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> run >> delete.as_teardown(setups=create)
