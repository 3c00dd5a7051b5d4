"""DAGs exercised by tests/integration/test_proof_exec.py: the expensive exec/create branches of issue 11 ("Proof").

Every job command waits for a ``gate`` file in the instance's HOME (bounded: about 5 minutes), so a test decides
when it may end instead of racing it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.sensors.brev import BrevReadySensor
from airflow_provider_brev.steps.workload import CommandWorkload, command_spec

START = datetime(2026, 1, 1)
#: A job that counts its start, then waits for the test to create ``gate`` (at most ~5 minutes).
GATED = "echo started >> counter; for i in $(seq 1 6000); do [ -e gate ] && break; sleep 0.05; done; echo finished"
#: Log chunk size of ``proof_exec_poll_failures``'s polls: ``__BJ_MAX=34567`` occurs only in them (not in the
#: launch, nor in a retry's 1-byte probe), so a test can aim a ``connection_drop`` fault at them.
POLL_FAILURES_CHUNK_BYTES = 34567
#: The job id the ``seed`` task of ``proof_exec_store_handle`` launches and records in the task state store: no
#: try of ``run`` derives it, so only reading the store can find it.
SEEDED_JOB_ID = "proof-seeded-job-1"


def _create() -> BrevCreateInstanceOperator:
    return BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)


def _delete(create: BrevCreateInstanceOperator) -> BrevDeleteInstanceOperator:
    return BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output).as_teardown(setups=create)


for action in ("kill", "keep"):
    with DAG(dag_id=f"proof_exec_on_kill_{action}", schedule=None, start_date=START):
        # The test sends the task's process SIGTERM (Airflow's task runner then calls on_kill) while the job runs.
        create = _create()
        run = BrevExecOperator(
            task_id="run", instance_name=create.output, command=GATED, on_kill_action=action, poll_interval=0.2
        )
        create >> run >> _delete(create)


class _KilledWhileItsInputsSync(BrevExecOperator):
    """A SIGTERM that lands while the inputs sync, right before the launch: ``on_kill`` runs then, on the task's main
    thread, as Airflow's signal handler runs it (the workload is asked what to launch right after the inputs synced).
    """

    def workload(self, parameters):
        operator = self

        class KilledBeforeItsLaunch(CommandWorkload):
            def launch(self, run, ref):
                launch = super().launch(run, ref)
                operator.on_kill()
                return launch

        return KilledBeforeItsLaunch(command_spec(parameters))


with DAG(dag_id="proof_exec_killed_before_launch", schedule=None, start_date=START):
    create = _create()
    run = _KilledWhileItsInputsSync(
        task_id="run", instance_name=create.output, command="echo started >> counter", poll_interval=0.2
    )
    create >> run >> _delete(create)

with DAG(dag_id="proof_exec_on_kill_ephemeral", schedule=None, start_date=START):
    BrevExecOperator(task_id="run", gpu="L40S:1", command=GATED, poll_interval=0.2, ready_timeout=60)

with DAG(dag_id="proof_create_on_kill", schedule=None, start_date=START):
    # The test keeps the new instance unreachable (ssh_refused), so the task is still waiting when it is killed.
    BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=120, poll_interval=0.2)

with DAG(dag_id="proof_create_ready_timeout_deferred", schedule=None, start_date=START):
    # Unreachable instance (ssh_refused): the readiness trigger reaches its absolute deadline.
    BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=3, poll_interval=0.2, deferrable=True)

with DAG(dag_id="proof_sensor_ready_timeout_deferred", schedule=None, start_date=START):
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", wait_for_ready=False)
    wait = BrevReadySensor(task_id="wait", instance_name=create.output, timeout=3, poke_interval=0.2, deferrable=True)
    create >> wait >> _delete(create)

with DAG(dag_id="proof_exec_deadline_deferred", schedule=None, start_date=START):
    # The job never gets its gate: the remote-job trigger kills it at the absolute deadline.
    create = _create()
    run = BrevExecOperator(
        task_id="run", instance_name=create.output, command=GATED, timeout=4, deferrable=True, poll_interval=0.2
    )
    create >> run >> _delete(create)

with DAG(dag_id="proof_create_trigger_error", schedule=None, start_date=START):
    # The test keeps the instance unreachable (ssh_refused) and revokes the token while the readiness trigger
    # waits: its next `brev ls` fails to log in, and the trigger yields an error event.
    BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=300, poll_interval=0.2, deferrable=True)

with DAG(dag_id="proof_exec_trigger_error", schedule=None, start_date=START):
    # The test takes the brev CLI's execute permission away while the remote-job trigger follows the job: the
    # trigger's next poll cannot start `brev` and it yields an error event, which the task re-raises.
    create = _create()
    run = BrevExecOperator(
        task_id="run", instance_name=create.output, command=GATED, deferrable=True, poll_interval=0.2
    )
    create >> run >> _delete(create)

with DAG(dag_id="proof_exec_lost_relaunch", schedule=None, start_date=START):
    # Try 1's job is killed with its wrapper (no exit code: lost); try 2 must relaunch. The second run succeeds.
    create = _create()
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command=f"echo run >> counter; [ $(wc -l < counter) -ge 2 ] && {{ echo second-run; exit 0; }}; {GATED}",
        poll_interval=0.2,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )
    create >> run >> _delete(create)

with DAG(dag_id="proof_exec_poll_failures", schedule=None, start_date=START):
    create = _create()
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command=GATED,
        poll_interval=0.2,
        log_chunk_bytes=POLL_FAILURES_CHUNK_BYTES,
        max_poll_failures=2,
    )
    create >> run >> _delete(create)

with DAG(dag_id="proof_exec_store_handle", schedule=None, start_date=START):
    create = _create()

    @task
    def seed(instance_name: str, dag_run=None) -> None:
        """Launch a job under an id no try of ``run`` derives and record it in ``run``'s task state store, as an
        earlier try of ``run`` would have (Airflow 3.3+)."""
        from airflow._shared.state import TaskScope
        from airflow.state.metastore import MetastoreBackend

        from airflow_provider_brev.core.jobs.remote import RemoteJob
        from airflow_provider_brev.hooks.brev import BrevHook

        job = RemoteJob(SEEDED_JOB_ID)
        assert BrevHook().launch_job(instance_name, job, GATED).launched
        handle = {"instance_name": instance_name, "job": job.to_dict(), "deadline": None, "ephemeral": False}
        scope = TaskScope(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id="run")
        MetastoreBackend().set(scope, "brev_job", json.dumps(handle))

    run = BrevExecOperator(task_id="run", instance_name=create.output, command=GATED, poll_interval=0.2)
    create >> seed(create.output) >> run >> _delete(create)
