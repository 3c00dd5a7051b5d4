"""DAGs exercised by tests/integration/chaos/ (a fault injected into the Brev simulator during a real DAG run).

Every DAG runs the same shape: ``create`` (setup) >> ``run`` (a detached job) >> ``delete`` (teardown). The job
first appends ``try-<try number>`` to a ``counter`` file in the instance sandbox, so a test can prove that the
command started exactly once per try, then checks that its secret arrived through ``secret_env`` (never on a
command line) and runs ``params.command``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator

START = datetime(2026, 1, 1)
#: Log chunk size of every chaos DAG's job polls: the string ``__BJ_MAX=12345`` only occurs in those polls, so a
#: test can aim a ``connection_drop`` fault at them (``match=``) without hitting the launch or the kill.
CHUNK_BYTES = 12345
JOB = (
    "echo try-{{ ti.try_number }} >> counter; "
    '[ -n "$CHAOS_SECRET" ] || { echo "chaos: the secret did not arrive"; exit 9; }; '
    'printf %s "$CHAOS_SECRET" | sha256sum > secret.sha256; '
    "{{ params.command }}"
)
PARAMS = {"command": "echo job-done", "secret": ""}


def chaos_dag(
    dag_id: str,
    *,
    deferrable: bool = False,
    retries: int = 0,
    max_lifetime: timedelta = timedelta(hours=24),
    ready_timeout: float = 60,
) -> DAG:
    with DAG(dag_id=dag_id, schedule=None, start_date=START, params=dict(PARAMS)) as dag:
        create = BrevCreateInstanceOperator(
            task_id="create",
            gpu="L40S:1",
            ready_timeout=ready_timeout,
            poll_interval=0.2,
            deferrable=deferrable,
            max_lifetime=max_lifetime,
        )
        run = BrevExecOperator(
            task_id="run",
            instance_name=create.output,
            command=JOB,
            secret_env={"CHAOS_SECRET": "{{ params.secret }}"},
            poll_interval=0.2,
            log_chunk_bytes=CHUNK_BYTES,
            deferrable=deferrable,
            retries=retries,
            retry_delay=timedelta(seconds=0),
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> run >> delete.as_teardown(setups=create)
    return dag


# Worker-side waits and polls (sync) and triggerer-side ones (deferrable create and run).
chaos_dag("brev_chaos_sync")
chaos_dag("brev_chaos_deferrable", deferrable=True)
# The test SIGKILLs the process running `run` mid-job, then re-runs the same DAG run: the retry must re-attach.
chaos_dag("brev_chaos_resume", retries=2)
# The test SIGKILLs the process while `create` waits for readiness: no teardown ever runs, so the instance is
# left to the janitor. A 1 s lifetime makes it expire at once (names carry a minute-precision expiry).
chaos_dag("brev_chaos_create_killed", max_lifetime=timedelta(seconds=1), ready_timeout=300)


with DAG(dag_id="brev_chaos_janitor", schedule=None, start_date=START):
    BrevSweepInstancesOperator(
        task_id="sweep",
        wait_for_deletion=True,
        deletion_timeout=30,
        poll_interval=0.1,
        cli_retry_limit=3,
        cli_retry_delay=0.05,
    )
