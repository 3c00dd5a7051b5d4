"""Issue: the janitor deletes expired provider-managed instances, and nothing else, inside real dag.test() runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers import cli_calls, run_state, task_states
from helpers import deleted_names as deleted_by_name

from airflow_provider_brev.core.protocol.names import managed_instance_name

NOW = datetime.now(UTC)


def managed(task_id: str, *, expires_in: timedelta, prefix: str = "afbrev") -> str:
    return managed_instance_name(
        dag_id="some_dag", run_id="manual__1", task_id=task_id, expires_at=NOW + expires_in, prefix=prefix
    )


EXPIRED_OLD = managed("old", expires_in=-timedelta(hours=5))
EXPIRED = managed("expired", expires_in=-timedelta(hours=2))
EXPIRED_STOPPED = managed("stopped", expires_in=-timedelta(hours=1))
FRESH = managed("fresh", expires_in=timedelta(hours=6))
EXPIRED_DELETING = managed("deleting", expires_in=-timedelta(hours=3))
OTHER_PREFIX_EXPIRED = managed("other", expires_in=-timedelta(hours=4), prefix="team2")
FOREIGN = ["my-notebook", "afbrev-hand-made", "afbrev-x202001010000", EXPIRED.replace("afbrev-", "afbrev2-", 1)]


def seed(sim) -> None:
    sim.create_instance_directly(EXPIRED_OLD)
    sim.create_instance_directly(EXPIRED)
    sim.create_instance_directly(EXPIRED_STOPPED, status="STOPPED")
    sim.create_instance_directly(FRESH)
    sim.create_instance_directly(EXPIRED_DELETING, status="DELETING")
    sim.create_instance_directly(OTHER_PREFIX_EXPIRED)
    for name in FOREIGN:
        sim.create_instance_directly(name)


def deleted_names(sim) -> list[str]:
    """What the sweep deleted, by name; it deletes by the id it listed."""
    targets = [target for call in cli_calls(sim, "delete") for target in call["argv"][1:] if not target.startswith("-")]
    assert not [t for t in targets if sim.name_of(t) == t], f"deleted by name, not by id: {targets}"
    return sorted(deleted_by_name(sim))


def statuses(sim) -> dict[str, str]:
    return {i["name"]: i["status"] for i in sim.instances()}


def sweep_ti(dag_run):
    (ti,) = dag_run.get_task_instances()
    return ti


def test_example_janitor_deletes_only_expired_managed_instances(run_dag, brev_sim, task_logs):
    # DELETING lasts an hour of simulated time: the seeded DELETING one stays and ours stay visible however long a
    # loaded machine takes over the run (two minutes were outlasted under load)
    brev_sim.set_timings(delete_seconds=3600)
    seed(brev_sim)
    dag_run = run_dag("brev_janitor")
    assert run_state(dag_run) == "success", task_states(dag_run)

    expected = sorted([EXPIRED_OLD, EXPIRED, EXPIRED_STOPPED])
    assert deleted_names(brev_sim) == expected  # one delete call each, nothing else
    after = statuses(brev_sim)
    assert {name: after[name] for name in expected} == dict.fromkeys(expected, "DELETING")
    assert after[FRESH] == "RUNNING"
    assert after[EXPIRED_DELETING] == "DELETING"
    assert after[OTHER_PREFIX_EXPIRED] == "RUNNING"
    assert all(after[name] == "RUNNING" for name in FOREIGN)

    ti = sweep_ti(dag_run)
    report = ti.xcom_pull(task_ids=ti.task_id)
    assert ti.xcom_pull(task_ids=ti.task_id, key="report") == report
    assert report["deleted"] == [EXPIRED_OLD, EXPIRED, EXPIRED_STOPPED]  # oldest expiry first
    assert report["would_delete"] == []
    assert report["failed"] == []
    assert report["already_deleting"] == [EXPIRED_DELETING]
    assert [k["name"] for k in report["kept"]] == [FRESH]
    assert datetime.fromisoformat(report["kept"][0]["expires_at"]) > NOW
    assert report["ignored"] == len(FOREIGN) + 1  # the foreign names and the other owner's instance
    assert report["dry_run"] is False

    logs = task_logs.text
    assert f"Deleting {EXPIRED_OLD}" in logs
    assert f"Keeping {FRESH}" in logs
    assert f"Skipping {EXPIRED_DELETING}: already DELETING" in logs
    assert "Ignoring my-notebook: not a managed name with prefix 'afbrev'" in logs


def test_dry_run_deletes_nothing(run_dag, brev_sim, task_logs):
    seed(brev_sim)
    before = statuses(brev_sim)
    dag_run = run_dag("brev_case_janitor_dry_run")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert cli_calls(brev_sim, "delete") == []
    after = statuses(brev_sim)
    before.pop(EXPIRED_DELETING, None)  # that one finishes its own deletion meanwhile
    after.pop(EXPIRED_DELETING, None)
    assert after == before
    report = sweep_ti(dag_run).xcom_pull(task_ids="sweep")
    assert report["would_delete"] == [EXPIRED_OLD, EXPIRED, EXPIRED_STOPPED]
    assert report["deleted"] == []
    assert report["dry_run"] is True
    assert f"Dry run: would delete {EXPIRED}" in task_logs.text


def test_failing_delete_fails_the_task_but_the_others_are_deleted(run_dag, brev_sim, task_logs):
    seed(brev_sim)
    # The sweep makes 2 attempts per delete (cli_retry_limit=2) and deletes oldest expiry first: the first
    # instance's both attempts hit the fault, the next deletes succeed.
    brev_sim.set_fault("http_5xx", command="delete", times=2)
    dag_run = run_dag("brev_case_janitor")
    ti = sweep_ti(dag_run)
    assert ti.state == "failed"

    after = statuses(brev_sim)
    assert after[EXPIRED_OLD] == "RUNNING"  # its delete failed
    assert EXPIRED not in after  # wait_for_deletion: the others are already gone
    assert EXPIRED_STOPPED not in after
    assert set(after) >= {FRESH, OTHER_PREFIX_EXPIRED, *FOREIGN}
    assert [c["exit_code"] != 0 for c in cli_calls(brev_sim, "delete")] == [True, True, False, False]

    report = ti.xcom_pull(task_ids="sweep", key="report")
    assert report["deleted"] == [EXPIRED, EXPIRED_STOPPED]
    assert [f["name"] for f in report["failed"]] == [EXPIRED_OLD]
    assert "502" in report["failed"][0]["error"]
    assert f"could not delete 1 expired instance(s) (the other deletions went ahead): {EXPIRED_OLD}" in task_logs.text


@pytest.mark.parametrize("source", ["connection", "template"])
def test_owner_prefix_from_connection_or_template(run_dag, brev_sim, source):
    seed(brev_sim)
    if source == "connection":
        dag_run = run_dag("brev_case_janitor", connection=brev_sim.connection_json(name_prefix="team2"))
    else:
        dag_run = run_dag("brev_case_janitor", conf={"name_prefix": "team2"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert deleted_names(brev_sim) == [OTHER_PREFIX_EXPIRED]
    assert OTHER_PREFIX_EXPIRED not in statuses(brev_sim)
    assert {EXPIRED_OLD, EXPIRED, EXPIRED_STOPPED, FRESH, *FOREIGN} <= set(statuses(brev_sim))


def test_invalid_prefix_fails_before_listing(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_case_janitor", conf={"name_prefix": "Not-A-Prefix"})
    ti = sweep_ti(dag_run)
    assert ti.state == "failed"
    assert cli_calls(brev_sim, "ls") == []
    assert "Invalid owner prefix" in task_logs.text


def test_example_janitor_dag_imports(dagbag):
    dag = dagbag.get_dag("brev_janitor")
    assert dag is not None
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert dag.schedule == "@hourly"
    assert [t.task_type for t in dag.tasks] == ["BrevSweepInstancesOperator"]
