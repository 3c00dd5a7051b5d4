"""The fleet and the warm pool of the Brev page (core/ui/fleet.py): which recorded instances bill, and what a row says.

The facts are built with the provider's own writers (``InstanceRecord.to_dict``, ``lifetime_cost``,
``ReuseEntry``), as the tasks push them.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pytest

from airflow_provider_brev.core.cost import lifetime_cost
from airflow_provider_brev.core.instances.records import InstanceRecord
from airflow_provider_brev.core.instances.warm_pool import STATE_IN_USE, STATE_STOPPED, ReuseEntry
from airflow_provider_brev.core.protocol.names import managed_instance_name
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.core.ui.facts import PageFacts, Pushed, RunFacts
from airflow_provider_brev.core.ui.fleet import entry_dag, fleet, warm_pool

NOW = 1_800_000_000.0
EXPIRES = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)


def record(name: str, ident: str, *, created: float | None = NOW - 3600, price: float | None = 2.0, **kw) -> dict:
    spec = {"instance_type": "g6e.xlarge"}
    return InstanceRecord(
        name, ident, owned=True, adopted=False, spec=spec, price_per_hour=price, created_at=created, **kw
    ).to_dict()


def pushed(value, *, dag="dag_a", run="run_1", task="create", key="brev_instance", map_index=-1) -> Pushed:
    return Pushed(dag, run, task, map_index, key, value)


def facts(*items: Pushed, runs=None, states=None, warm=(), live=None) -> PageFacts:
    runs = runs or {("dag_a", "run_1"): RunFacts("dag_a", "run_1", "running", NOW - 3700)}
    return PageFacts(list(items), runs, dict(states or {}), list(warm), live, "note", NOW)


def test_a_created_instance_bills_with_its_age_price_dollars_and_expiry() -> None:
    name = managed_instance_name(dag_id="dag_a", run_id="run_1", task_id="create", expires_at=EXPIRES)
    rows = fleet(facts(pushed(record(name, "id-1")))).rows
    assert len(rows) == 1
    row = rows[0]
    assert (row.dag_id, row.run_id, row.task_id, row.name, row.id) == ("dag_a", "run_1", "create", name, "id-1")
    assert (row.instance_type, row.state, row.age_seconds) == ("g6e.xlarge", "recorded", 3600.0)
    assert (row.price_per_hour, row.dollars) == (2.0, 2.0)
    assert row.expires_at == EXPIRES.timestamp()
    assert not row.orphaned


def test_unknown_price_or_creation_time_gives_no_dollars_never_a_guess() -> None:
    row = fleet(facts(pushed(record("plain", "id-1", price=None)))).rows[0]
    assert (row.price_per_hour, row.dollars, row.expires_at) == (None, None, None)
    row = fleet(facts(pushed(record("plain", "id-1", created=None)))).rows[0]
    assert (row.age_seconds, row.dollars) == (None, None)


def test_the_teardowns_lifetime_releases_it_unless_it_ended_before_a_later_re_creation() -> None:
    life = lifetime_cost(
        instance_name="gpu", instance_type="t", price_per_hour=2.0, created_at=NOW - 3600, ended_at=NOW - 60
    )
    assert fleet(facts(pushed(record("gpu", "id-1")), pushed(life, task="delete", key="brev_lifetime_cost"))).rows == []
    # the same name re-created after that lifetime ended (a later recovery): still billing
    later = record("gpu", "id-2", created=NOW - 30)
    rows = fleet(
        facts(pushed(record("gpu", "id-1")), pushed([later], task="step"), pushed(life, key="brev_lifetime_cost"))
    ).rows
    assert [row.id for row in rows] == ["id-2"]


def test_of_several_records_of_a_name_the_newest_counts() -> None:
    rows = fleet(
        facts(
            pushed(record("gpu", "id-2", created=NOW - 10)), pushed([record("gpu", "id-1", created=NOW - 99)], task="t")
        )
    ).rows
    assert [(row.id, row.task_id) for row in rows] == [("id-2", "create")]


@pytest.mark.parametrize(
    ("state", "shown"), [("running", True), ("deferred", True), ("success", False), ("failed", False)]
)
def test_a_steps_own_instance_is_released_when_the_step_finished(state: str, shown: bool) -> None:
    step = pushed([record("eph", "id-9")], task="step")
    got = fleet(facts(step, states={("dag_a", "run_1", "step", -1): state})).rows
    assert [row.id for row in got] == (["id-9"] if shown else [])


def test_a_steps_re_creation_of_a_create_tasks_name_is_not_released_by_the_step_ending() -> None:
    items = (
        pushed(record("gpu", "id-1", created=NOW - 99)),
        pushed([record("gpu", "id-2", created=NOW - 9)], task="step"),
    )
    rows = fleet(facts(*items, states={("dag_a", "run_1", "step", -1): "success"})).rows
    assert [row.id for row in rows] == ["id-2"]


def test_a_stopped_warm_record_moves_it_to_the_warm_pool_and_brev_ls_decides_what_is_gone() -> None:
    stopped = ReuseEntry(key="k", id="id-1", name="gpu", state=STATE_STOPPED, since=NOW - 60)
    assert fleet(facts(pushed(record("gpu", "id-1")), warm=[stopped])).rows == []
    live = {"id-2": BrevInstance(name="other", id="id-2", status="RUNNING", instance_type="a100")}
    result = fleet(facts(pushed(record("gpu", "id-1")), pushed(record("b", "id-2"), run="run_1", task="c2"), live=live))
    assert [(row.id, row.state, row.instance_type) for row in result.rows] == [("id-2", "RUNNING", "a100")]
    assert result.gone == 1


def test_a_finished_run_that_did_not_release_its_instance_is_flagged() -> None:
    runs = {("dag_a", "run_1"): RunFacts("dag_a", "run_1", "failed", NOW - 3700)}
    assert fleet(facts(pushed(record("gpu", "id-1")), runs=runs)).rows[0].orphaned


def test_rows_of_dags_the_user_may_not_read_are_left_out() -> None:
    items = (pushed(record("a", "id-1")), pushed(record("b", "id-2"), dag="dag_b"))
    assert {row.dag_id for row in fleet(facts(*items), readable={"dag_b"}).rows} == {"dag_b"}
    assert fleet(facts(*items), readable=set()).rows == []
    assert len(fleet(facts(*items), readable=None).rows) == 2


def test_values_that_are_not_records_are_ignored() -> None:
    items = (pushed("text"), pushed({"name": ""}), pushed(None), pushed({"x": 1}, key="brev_lifetime_cost"))
    assert fleet(facts(*items)).rows == []


def test_the_warm_pool_shows_stopped_entries_with_idle_time_what_max_idle_leaves_disk_cost_and_break_even() -> None:
    entry = ReuseEntry(
        key="weekly",
        id="id-1",
        name="gpu",
        instance_type="g6e.xlarge",
        state=STATE_STOPPED,
        since=NOW - 7200,
        max_idle=86400.0,
        claimed_by="dag_a/run_1/create/-1",
        disk_price_per_hour=0.05,
        break_even="stopping: the disk ...",
    )
    in_use = ReuseEntry(key="weekly", id="id-2", name="gpu2", state=STATE_IN_USE, since=NOW, claimed_by="dag_a/r/c/-1")
    rows = warm_pool(facts(warm=[entry, in_use]))
    assert len(rows) == 1
    row = rows[0]
    assert (row.key, row.dag_id, row.state, row.idle_seconds, row.left_seconds) == (
        "weekly",
        "dag_a",
        "stopped",
        7200.0,
        79200.0,
    )
    assert (row.disk_price_per_hour, row.disk_dollars, row.break_even) == (0.05, 0.1, "stopping: the disk ...")
    assert warm_pool(facts(warm=[entry]), readable={"dag_b"}) == []
    expired = ReuseEntry(key="k", id="i", name="n", state=STATE_STOPPED, since=NOW - 90000, max_idle=3600.0)
    assert warm_pool(facts(warm=[expired]))[0].left_seconds == 0.0
    assert warm_pool(facts(warm=[entry], live={}))[0].state == "not listed"


def test_a_warm_entry_belongs_to_the_dag_that_last_held_it_else_its_creator() -> None:
    assert entry_dag(ReuseEntry(key="k", id="i", name="n", claimed_by="b/r/t/-1", created_by="a/r/t/-1")) == "b"
    assert entry_dag(ReuseEntry(key="k", id="i", name="n", created_by="a/r/t/-1")) == "a"
    assert entry_dag(ReuseEntry(key="k", id="i", name="n", claimed_by="garbage")) == ""


def test_rows_are_frozen_values() -> None:
    result = fleet(
        facts(pushed(record("gpu", "id-1")), warm=[ReuseEntry(key="k", id="w", name="n", state=STATE_STOPPED)])
    )
    with pytest.raises(FrozenInstanceError):
        result.rows[0].state = "x"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        result.warm[0].state = "x"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        result.gone = 3  # type: ignore[misc]


def test_lifetimes_in_any_shape_and_either_end_key_release_what_they_name() -> None:
    ended = {"instance_name": "gpu", "ended_at": NOW - 60}  # a teardown that stopped it
    assert fleet(facts(pushed(record("gpu", "id-1")), pushed(ended, key="brev_lifetime_cost"))).rows == []
    noise = pushed(["text", None, {"instance_name": 3}], key="brev_lifetime_cost")
    assert len(fleet(facts(pushed(record("gpu", "id-1")), noise)).rows) == 1
    # ended exactly when it was created: released; a record without a creation time: any lifetime releases it
    at_creation = pushed({"instance_name": "gpu", "deleted_at": NOW - 3600}, key="brev_lifetime_cost")
    assert fleet(facts(pushed(record("gpu", "id-1")), at_creation)).rows == []
    assert fleet(facts(pushed(record("gpu", "id-1", created=None)), at_creation)).rows == []


def test_a_record_without_a_creation_time_is_older_than_one_with_it() -> None:
    items = (pushed([record("gpu", "id-2", created=NOW - 5)], task="step"), pushed(record("gpu", "id-1", created=None)))
    assert [row.id for row in fleet(facts(*items)).rows] == ["id-2"]
    both = (pushed(record("a", "id-a", created=NOW - 5)), pushed(record("b", "id-b", created=None), task="c2"))
    assert [row.id for row in fleet(facts(*both)).rows] == ["id-b", "id-a"]  # oldest first, unknown first


def test_numbers_are_rounded_and_never_negative() -> None:
    row = fleet(facts(pushed(record("gpu", "id-1", created=NOW - 1, price=2.24)))).rows[0]
    assert (row.age_seconds, row.dollars) == (1.0, 0.000622)
    row = fleet(facts(pushed(record("gpu", "id-1", created=NOW + 10)))).rows[0]  # a clock ahead of ours
    assert (row.age_seconds, row.dollars) == (0.0, 0.0)
    bare = InstanceRecord("gpu", "id-1", owned=True, adopted=True).to_dict()
    row = fleet(facts(pushed(bare))).rows[0]
    assert (row.instance_type, row.adopted, row.price_per_hour) == ("", True, None)


def test_the_warm_pool_is_scoped_by_dag_and_its_numbers_are_rounded_and_never_negative() -> None:
    mine = ReuseEntry(
        key="k",
        id="a",
        name="a",
        state=STATE_STOPPED,
        since=NOW - 1,
        claimed_by="dag_a/r/t/-1",
        disk_price_per_hour=0.0342,
    )
    theirs = ReuseEntry(key="k", id="b", name="b", state=STATE_STOPPED, since=NOW + 5, claimed_by="dag_b/r/t/-1")
    rows = warm_pool(facts(warm=[mine, theirs]), readable={"dag_a"})
    assert [(row.id, row.disk_dollars) for row in rows] == [("a", 0.00001)]
    assert warm_pool(facts(warm=[theirs]))[0].idle_seconds == 0.0
    assert [
        row.key for row in warm_pool(facts(warm=[ReuseEntry(key="z", id="1", name="n", state=STATE_STOPPED), mine]))
    ] == ["k", "z"]
