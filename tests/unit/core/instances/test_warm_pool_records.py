"""The janitor's treatment of instances kept for warm reuse, over every record state x live state x age, and who may
act on a record (airflow_provider_brev/core/instances/warm_pool.py, warm_pool_records.py, sweep.py): pure rules,
table-driven."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.instances.sweep import ALREADY_DELETING, DELETE, IGNORE, KEEP, STOP, plan_sweep
from airflow_provider_brev.core.instances.warm_pool import (
    CLAIM_GRACE_SECONDS,
    STATE_IN_USE,
    STATE_STOPPED,
    ReuseEntry,
    Sighting,
    janitor_verdict,
)
from airflow_provider_brev.core.instances.warm_pool_records import (
    TaskRef,
    awake_variable,
    record_variable,
    tasks_named,
)
from airflow_provider_brev.core.protocol.output import BrevInstance
from unit.core.instances.warm_pool_records_helpers import CREATOR, HOLDER, NOW, OURS, entry_for, managed

MAX_IDLE, MAX_LIFETIME, GRACE = 3600.0, 7200.0, CLAIM_GRACE_SECONDS
#: The example janitor DAG sweeps hourly: a bound is "by the first sweep after ...".
SWEEP = 3600.0


#: The age of a record (seconds since it entered its state): before max_idle; past max_idle but within the claim
#: grace after it; past both; past max_lifetime too.
AGES = {"fresh": 60.0, "idle": MAX_IDLE + 60, "late": MAX_IDLE + GRACE + 60, "ancient": MAX_LIFETIME + 60}
NAMES = {"name_fresh": managed(6), "name_expired": managed(-2)}
LIVE = ["RUNNING", "STOPPED", "STOPPING", "STARTING", "DEPLOYING", "FAILURE", "DELETING", "gone", "another_id"]
AWAKE = {"RUNNING", "STARTING", "DEPLOYING", "FAILURE"}
ASLEEP = {"STOPPED", "STOPPING"}

# What the first sweep does, by record state and live state, at each age. A recorded (and proven) instance is
# judged by its record whatever its name's expiry; one without a record by its name (fresh: kept, expired: deleted).
EXPECTED = {
    # recorded stopped, found running (by hand, or its run died before recording it): noted, then ended
    ("stopped", "awake"): {"fresh": KEEP, "idle": KEEP, "late": DELETE, "ancient": DELETE},
    ("stopped", "asleep"): {"fresh": KEEP, "idle": DELETE, "late": DELETE, "ancient": DELETE},
    ("in_use", "awake"): {"fresh": KEEP, "idle": KEEP, "late": KEEP, "ancient": DELETE},
    ("in_use", "asleep"): {"fresh": KEEP, "idle": KEEP, "late": KEEP, "ancient": DELETE},
}


def live_instance(name: str, live: str) -> BrevInstance | None:
    if live == "gone":
        return None
    if live == "another_id":
        return BrevInstance(name=name, id="someone-elses", status="RUNNING")
    return BrevInstance(name=name, id="i-warm", status=live)


def record(name: str, state: str, age: float) -> ReuseEntry:
    return ReuseEntry(
        key="weekly",
        id="i-warm",
        name=name,
        state=state,
        since=NOW.timestamp() - age,
        max_idle=MAX_IDLE,
        max_lifetime=MAX_LIFETIME,
        created_by=CREATOR.text,
        claimed_by=CREATOR.text,
    )


def expected_action(state: str, live: str, age: str, name: str) -> str | None:
    """The table above, with the rows every state shares: nothing listed, DELETING, another id under the name."""
    if live == "gone":
        return None
    if live == "DELETING":
        return ALREADY_DELETING
    if state == "none" or live == "another_id":  # judged by the name
        return KEEP if name == "name_fresh" else DELETE
    return EXPECTED[(state, "awake" if live in AWAKE else "asleep")][age]


def deadline(state: str, live: str, age: float, name: str) -> float:
    """The time from which the janitor stops or deletes the instance, whoever keeps it in that state meanwhile."""
    since, now = NOW.timestamp() - age, NOW.timestamp()
    if live in ("gone", "DELETING"):
        return now
    if state == "none" or live == "another_id":  # its name's expiry
        return now + (6 if name == "name_fresh" else -2) * 3600
    if state == STATE_IN_USE:
        return since + MAX_LIFETIME
    if live in ASLEEP:
        return since + MAX_IDLE
    return min(now + GRACE, since + MAX_IDLE + GRACE)  # first seen now


def sweep(instance: BrevInstance | None, entry: ReuseEntry | None, at: float, seen: dict[str, Sighting]):
    return plan_sweep(
        [instance] if instance is not None else [],
        prefix="afbrev",
        cutoff=datetime.fromtimestamp(at, UTC),
        records={entry.id: entry} if entry is not None else {},
        now=datetime.fromtimestamp(at, UTC),
        sightings=seen,
    )


ROWS = list(itertools.product(["stopped", "in_use", "none"], LIVE, AGES, NAMES))


@pytest.mark.parametrize(("state", "live", "age", "name"), ROWS, ids=["-".join(row) for row in ROWS])
def test_every_record_and_live_state_ends_in_a_stop_or_delete_by_a_bound(state, live, age, name):
    instance_name = NAMES[name]
    instance = live_instance(instance_name, live)
    entry = None if state == "none" else record(instance_name, state, AGES[age])
    plan = sweep(instance, entry, NOW.timestamp(), {})
    [*verdicts] = plan.verdicts
    want = expected_action(state, live, age, name)
    assert [v.action for v in verdicts] == ([want] if want is not None else [])
    if entry is not None and live in ("gone", "another_id"):
        assert plan.forget == [entry]  # the record goes; another id under the name is judged by the name alone
    if verdicts and state != "none" and live != "another_id":
        assert verdicts[0].reuse_key == "weekly" and verdicts[0].managed

    # whoever keeps it in that state, hourly sweeps end it (a stop or a delete) by the bound
    at, seen, ended = NOW.timestamp(), {}, None
    for _ in range(10):
        plan = sweep(instance, entry, at, seen)
        actions = {v.action for v in plan.verdicts}
        if not actions or actions & {DELETE, STOP, ALREADY_DELETING}:
            ended = at
            break
        seen = dict(plan.sightings)
        at += SWEEP
    assert ended is not None and ended < max(deadline(state, live, AGES[age], name), NOW.timestamp()) + SWEEP


@pytest.mark.parametrize("status", ["RUNNING", "UNHEALTHY"])
def test_a_stopped_record_found_running_is_stopped_after_the_grace_and_its_disk_kept(status):
    entry = record(NAMES["name_expired"], STATE_STOPPED, 60)
    instance = BrevInstance(name=entry.name, id=entry.id, status=status)
    first = janitor_verdict(entry, instance, NOW.timestamp())
    assert (first.action, first.sighting) == (KEEP, Sighting(entry.since, NOW.timestamp()))
    assert first.until == NOW.timestamp() + GRACE
    assert "recorded stopped but " + status in first.reason and "unless a run records it in use" in first.reason
    early = janitor_verdict(entry, instance, NOW.timestamp() + GRACE - 1, first.sighting)
    assert (early.action, early.sighting) == (KEEP, first.sighting)  # a run's in_use record may still come
    late = janitor_verdict(entry, instance, NOW.timestamp() + GRACE, first.sighting)
    assert late.action == STOP and "stopping it" in late.reason
    # a run that started it wrote its record again: the old sighting counts for nothing
    rewritten = record(entry.name, STATE_STOPPED, 30)
    again = janitor_verdict(rewritten, instance, NOW.timestamp() + GRACE, first.sighting)
    assert (again.action, again.sighting) == (KEEP, Sighting(rewritten.since, NOW.timestamp() + GRACE))


@pytest.mark.parametrize("status", ["STARTING", "DEPLOYING", "FAILURE"])
def test_a_stopped_record_stuck_in_another_state_after_the_grace_is_deleted(status):
    entry = record(NAMES["name_fresh"], STATE_STOPPED, 60)
    instance = BrevInstance(name=entry.name, id=entry.id, status=status)
    seen = Sighting(entry.since, NOW.timestamp() - GRACE)
    assert janitor_verdict(entry, instance, NOW.timestamp(), seen).action == DELETE


def test_the_plan_keeps_a_sighting_only_while_the_instance_is_running_on_a_stopped_record():
    entry = record(NAMES["name_expired"], STATE_STOPPED, 60)
    running = BrevInstance(name=entry.name, id=entry.id, status="RUNNING")
    plan = sweep(running, entry, NOW.timestamp(), {})
    assert plan.sightings == {entry.id: Sighting(entry.since, NOW.timestamp())}
    [kept] = plan.verdicts
    assert kept.expires_at == NOW + timedelta(seconds=GRACE)  # what `airflow brev instances` shows
    stopped = BrevInstance(name=entry.name, id=entry.id, status="STOPPED")
    assert sweep(stopped, entry, NOW.timestamp() + SWEEP, plan.sightings).sightings == {}


# --- who may act on a record ----------------------------------------------------------------------------------------


def test_tasks_named_are_the_creator_then_the_last_holder():
    assert tasks_named(entry_for(OURS, claimed_by=HOLDER.text)) == [CREATOR, HOLDER]
    assert tasks_named(entry_for(OURS, claimed_by=CREATOR.text)) == [CREATOR]
    assert tasks_named(entry_for(OURS, created_by="", claimed_by="x")) == []


@pytest.mark.parametrize(
    ("text", "task"),
    [
        ("d/r/t/-1", TaskRef("d", "r", "t", -1)),
        ("d/manual__2026/01/t/3", TaskRef("d", "manual__2026/01", "t", 3)),  # a run id may hold a slash
        ("d/r/t", None),
        ("d/r/t/x", None),
        ("/r/t/1", None),
        ("", None),
    ],
)
def test_task_refs_read_back(text, task):
    assert TaskRef.parse(text) == task
    if task is not None:
        assert TaskRef.parse(task.text) == task


def test_each_instance_has_its_own_variables():
    assert record_variable("abc-123_X") == "brev_warm_instance.abc-123_X"
    assert awake_variable("abc-123_X") == "brev_warm_awake.abc-123_X"
    odd = record_variable("a/b c")
    assert odd.startswith("brev_warm_instance.sha256-") and odd != record_variable("a/b d")


def test_a_record_that_may_not_act_leaves_the_instance_to_its_name():
    nb = BrevInstance(name="my-notebook", id="i-nb", status="RUNNING")
    plan = plan_sweep(
        [nb, OURS], prefix="afbrev", cutoff=NOW, records={}, now=NOW, unproven={"i-nb": "not ours", "i-warm": "x"}
    )
    assert [(v.instance.name, v.action, v.managed) for v in plan.verdicts] == [
        (OURS.name, DELETE, True),  # its name expired
        ("my-notebook", IGNORE, False),
    ]
    assert plan.verdicts[1].reason.endswith("its reuse record is ignored: not ours")
