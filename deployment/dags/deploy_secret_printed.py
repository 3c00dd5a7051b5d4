"""Used by ``make deployment-test``: commands that PRINT a ``secret_env`` value (taken from a connection), followed
on a worker (detached), in the foreground and through the real triggerer (deferrable). The test checks that the
secret appears in no task log, trigger log file or XCom, and that the redacted line (``key=***``) does."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)

with DAG(
    dag_id="deploy_brev_secret_printed",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["brev", "deployment-test"],
) as dag:
    create = BrevCreateInstanceOperator(task_id="create_instance", gpu="L40S:1", ready_timeout=300, poll_interval=0.5)
    printed = {
        "instance_name": create.output,
        "command": 'echo "key=$WANDB_API_KEY"',
        "secret_env": {"WANDB_API_KEY": "{{ conn.wandb.password }}"},
    }
    detached = BrevExecOperator(task_id="detached", poll_interval=0.5, **printed)  # type: ignore[arg-type]
    foreground = BrevExecOperator(task_id="foreground", detach=False, **printed)  # type: ignore[arg-type]
    deferred = BrevExecOperator(task_id="deferred", deferrable=True, poll_interval=0.5, **printed)  # type: ignore[arg-type]
    delete = BrevDeleteInstanceOperator(task_id="delete_instance", instance_name=create.output)
    create >> [detached, foreground, deferred] >> delete.as_teardown(setups=create)
