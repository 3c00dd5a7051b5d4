"""DAGs exercised by tests/integration/test_ownership_dags.py: explicit instance names and who owns them.

The instance name comes from ``params`` (overridable with ``dag.test(run_conf=...)``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator

START = datetime(2026, 1, 1)
NAME = "{{ params.name }}"


@task
def work(instance_name: str) -> None:
    from airflow_provider_brev.hooks.brev import BrevHook

    result = BrevHook().run_command(instance_name, "echo working")
    if result.exit_code:
        raise RuntimeError(f"work failed with exit code {result.exit_code}")


@task
def recorded() -> dict | None:
    """What a later task reads back from the create task (the public helper)."""
    from airflow.sdk import get_current_context

    from airflow_provider_brev.instances.provisioning import read_instance_record

    record = read_instance_record(get_current_context(), "create")
    return record.to_dict() if record else None


with DAG(dag_id="brev_own_explicit", schedule=None, start_date=START, params={"name": "my-notebook"}):
    # The delete runs whatever happens upstream (all_done, the instance named literally): it must still leave
    # an instance its create task did not record creating.
    create = BrevCreateInstanceOperator(
        task_id="create", instance_name=NAME, gpu="L40S:1", ready_timeout=60, poll_interval=0.2, retries=2
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=NAME, trigger_rule="all_done")
    create >> [work(create.output), recorded()] >> delete


with DAG(dag_id="brev_own_adopt", schedule=None, start_date=START, params={"name": "my-notebook"}):
    create = BrevCreateInstanceOperator(
        task_id="create", instance_name=NAME, gpu="L40S:1", ready_timeout=60, poll_interval=0.2, adopt_existing=True
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    work(create.output) >> delete.as_teardown(setups=create)


def create_with_teardown(dag_id: str, name: str, **create_kwargs: object) -> None:
    """A DAG whose create task (explicit name, one immediate retry) is torn down by a delete."""
    with DAG(dag_id=dag_id, schedule=None, start_date=START, params={"name": name}):
        create = BrevCreateInstanceOperator(
            task_id="create",
            instance_name=NAME,
            gpu="L40S:1",
            poll_interval=0.2,
            retries=1,
            retry_delay=timedelta(seconds=0),
            **create_kwargs,  # type: ignore[arg-type]
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> delete.as_teardown(setups=create)


# First try: readiness times out (the simulator refuses ssh for a while); with delete_on_failure off the instance
# stays, and the retry must recognise it as its own (recorded id) instead of refusing it.
create_with_teardown("brev_own_retry", "retry-notebook", ready_timeout=3, delete_on_failure=False)
# First try: the instance ends in FAILURE (during the readiness wait or already in `brev create`); with
# delete_on_failure off it stays, and the retry must replace it as its own. No readiness timeout is part of the
# case, so the wait is long: a busy machine must not turn the retry's boot into a timeout.
create_with_teardown("brev_own_keep_failed", "retry-notebook", ready_timeout=60, delete_on_failure=False)
# First try: the instance ends in FAILURE and the task deletes it; the retry finds it still DELETING and must
# recognise it as the one its first try recorded (wait it out, create anew) instead of refusing the name.
create_with_teardown("brev_own_retry_after_boot_failure", "boot-notebook", ready_timeout=60)


with DAG(dag_id="brev_own_race", schedule=None, start_date=START, params={"name": "shared-name"}):
    # Two create tasks of one run want the same explicit name: create_a gets it, create_b must refuse it, and
    # create_b's delete (forced to run) must leave it to create_a's teardown.
    create_a = BrevCreateInstanceOperator(
        task_id="create_a", instance_name=NAME, gpu="L40S:1", ready_timeout=60, poll_interval=0.2
    )
    create_b = BrevCreateInstanceOperator(
        task_id="create_b", instance_name=NAME, instance_types="g6e.xlarge", ready_timeout=60, poll_interval=0.2
    )
    delete_b = BrevDeleteInstanceOperator(task_id="delete_b", instance_name=NAME, trigger_rule="all_done")
    delete_a = BrevDeleteInstanceOperator(task_id="delete_a", instance_name=create_a.output)
    create_a >> create_b >> delete_b >> delete_a.as_teardown(setups=create_a)
