"""The janitor's sweep plan (airflow_provider_brev/core/instances/sweep.py) and the lineage dataset names
(airflow_provider_brev/core/staging/lineage.py, utils/lineage.py): pure rules, table-driven."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.instances.sweep import ALREADY_DELETING, DELETE, IGNORE, KEEP, plan_sweep
from airflow_provider_brev.core.instances.warm_pool import STATE_IN_USE, STATE_STOPPED, ReuseEntry
from airflow_provider_brev.core.protocol.names import managed_instance_name
from airflow_provider_brev.core.protocol.output import BrevInstance

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def name(task: str, hours: float, prefix: str = "afbrev") -> str:
    return managed_instance_name(
        dag_id="d", run_id="r", task_id=task, expires_at=NOW + timedelta(hours=hours), prefix=prefix
    )


def listed(instance_name: str, status: str = "RUNNING", ident: str | None = None) -> BrevInstance:
    return BrevInstance(name=instance_name, id=ident or f"id-{instance_name}", status=status)


def record(instance: BrevInstance, *, state: str = STATE_STOPPED, idle_hours: float = 1.0) -> ReuseEntry:
    since = (NOW - timedelta(hours=idle_hours)).timestamp()
    return ReuseEntry(key="k", id=instance.id, name=instance.name, state=state, since=since, max_idle=7200)


OLD, EXPIRED, FRESH = name("old", -5), name("expired", -2), name("fresh", 6)


@pytest.mark.parametrize(
    ("instance", "grace_hours", "action", "reason"),
    [
        (listed(EXPIRED), 0, DELETE, "expired 2026-06-01T10:00:00+00:00"),
        (listed(EXPIRED), 3, KEEP, "expires 2026-06-01T10:00:00+00:00"),  # within the grace period
        (listed(EXPIRED, "STOPPED"), 0, DELETE, "expired 2026-06-01T10:00:00+00:00"),
        (listed(FRESH), 0, KEEP, "expires 2026-06-01T18:00:00+00:00"),
        (listed(EXPIRED, "DELETING"), 0, ALREADY_DELETING, "already DELETING (expires 2026-06-01T10:00:00+00:00)"),
        (listed(name("x", -2, "team2")), 0, IGNORE, "not a managed name with prefix 'afbrev'"),
        (listed("my-notebook"), 0, IGNORE, "not a managed name with prefix 'afbrev'"),
        (listed("afbrev-hand-made"), 0, IGNORE, "not a managed name with prefix 'afbrev'"),
        (listed(EXPIRED.replace("afbrev-", "afbrev2-", 1)), 0, IGNORE, "not a managed name with prefix 'afbrev'"),
    ],
)
def test_a_listed_instance_by_its_name(instance, grace_hours, action, reason):
    plan = plan_sweep([instance], prefix="afbrev", cutoff=NOW - timedelta(hours=grace_hours), records={}, now=NOW)
    [verdict] = plan.verdicts
    assert (verdict.action, verdict.reason) == (action, reason)
    assert verdict.managed is (action != IGNORE)
    assert plan.deletions() == ([verdict] if action == DELETE else [])


@pytest.mark.parametrize(
    ("state", "status", "idle_hours", "action", "reason"),
    [
        (STATE_STOPPED, "STOPPED", 1, KEEP, "reuse key 'k', stopped, until 2026-06-01T13:00+00:00"),
        (
            STATE_STOPPED,
            "STOPPED",
            3,
            DELETE,
            "reuse key 'k', stopped longer than its max_idle (2026-06-01T11:00+00:00)",
        ),
        (
            STATE_STOPPED,
            "STARTING",
            3,
            DELETE,
            "reuse key 'k', recorded stopped but STARTING past its max_idle (2026-06-01T11:00+00:00)",
        ),  # no run starts an expired record's instance: whoever did, it bills
        (
            STATE_IN_USE,
            "RUNNING",
            30,
            DELETE,
            "reuse key 'k', in use past max_lifetime (2026-06-01T06:00+00:00): its run died",
        ),
    ],
)
def test_a_recorded_instance_by_its_record_not_its_name(state, status, idle_hours, action, reason):
    warm = listed(OLD, status)  # its name expired long ago
    kept = record(warm, state=state, idle_hours=idle_hours)
    plan = plan_sweep([warm], prefix="afbrev", cutoff=NOW, records={warm.id: kept}, now=NOW)
    [verdict] = plan.verdicts
    assert (verdict.action, verdict.reason, verdict.reuse_key, verdict.managed) == (action, reason, "k", True)
    assert plan.forget == []


def test_a_stale_record_is_forgotten_and_the_instance_judged_by_its_name():
    gone = ReuseEntry(key="k", id="id-gone", name="afbrev-gone", state=STATE_STOPPED, since=0.0)
    holder = listed(EXPIRED, ident="someone-else")  # another id holds the recorded name
    foreign = ReuseEntry(key="k", id="id-ours", name=EXPIRED, state=STATE_STOPPED, since=0.0)
    plan = plan_sweep([holder], prefix="afbrev", cutoff=NOW, records={e.id: e for e in (gone, foreign)}, now=NOW)
    assert plan.forget == [foreign, gone]  # by key, then name
    [verdict] = plan.verdicts
    assert (verdict.action, verdict.reuse_key) == (DELETE, None)  # its own name expired


def test_deletions_run_recorded_instances_first_then_the_oldest_expiry():
    warm = listed(name("warm", 5), "STOPPED")  # its name has not expired; its record has
    instances = [listed(EXPIRED), listed(FRESH), warm, listed(OLD)]
    plan = plan_sweep(instances, prefix="afbrev", cutoff=NOW, records={warm.id: record(warm, idle_hours=3)}, now=NOW)
    assert [v.instance.name for v in plan.deletions()] == [warm.name, OLD, EXPIRED]
    assert [v.instance.name for v in plan.of(KEEP)] == [FRESH]


def test_verdicts_and_plans_are_frozen_and_expiry_is_iso():
    verdict = plan_sweep([listed(EXPIRED)], prefix="afbrev", cutoff=NOW, records={}, now=NOW).verdicts[0]
    assert verdict.expires == "2026-06-01T10:00:00+00:00"
    ignored = plan_sweep([listed("mine")], prefix="afbrev", cutoff=NOW, records={}, now=NOW).verdicts[0]
    assert (ignored.expires, ignored.expires_at) == ("", None)
    plan = plan_sweep([], prefix="afbrev", cutoff=NOW, records={}, now=NOW)
    for value, name in ((verdict, "action"), (plan, "verdicts")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, None)


def test_a_kept_recorded_instance_is_no_deletion():
    warm = listed(OLD, "STOPPED")
    plan = plan_sweep([warm], prefix="afbrev", cutoff=NOW, records={warm.id: record(warm, idle_hours=1)}, now=NOW)
    assert [v.action for v in plan.verdicts] == [KEEP] and plan.deletions() == []


def test_deletions_without_a_known_expiry_come_first_among_the_named():
    from airflow_provider_brev.core.instances.sweep import SweepPlan, SweepVerdict

    dated = SweepVerdict(listed("a"), DELETE, "expired", NOW - timedelta(hours=1))
    undated = SweepVerdict(listed("b"), DELETE, "by hand")
    assert SweepPlan([dated, undated]).deletions() == [undated, dated]
