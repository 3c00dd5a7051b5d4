"""The pure decisions of warm reuse (airflow_provider_brev/core/instances/warm_pool.py), table-driven."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.cost import CostLimits, PriceCap
from airflow_provider_brev.core.instances.warm_pool import (
    EXPIRED,
    FOREIGN,
    GONE,
    IN_USE,
    NOT_REQUESTED,
    NOT_STOPPED,
    REUSE,
    SETTLING,
    STATE_IN_USE,
    STATE_STOPPED,
    ReuseEntry,
    WarmRequest,
    break_even,
    candidate_verdict,
    candidates,
    disk_dollars_per_hour,
    entries_in,
    expected_idle_seconds,
    reuse_key_value,
    saved_seconds,
)
from airflow_provider_brev.core.protocol.output import BrevInstance, InstanceTypeOffer
from airflow_provider_brev.exceptions import BrevInvalidInputError

NOW = 1_000_000.0


def entry(state: str = STATE_STOPPED, since: float = NOW - 100, **kw) -> ReuseEntry:
    return ReuseEntry(**{"key": "k", "id": "i-1", "name": "n", "state": state, "since": since, "max_idle": 3600, **kw})


def live(status: str = "STOPPED", ident: str = "i-1") -> BrevInstance:
    return BrevInstance(name="n", id=ident, status=status, instance_type="g6e.xlarge")


def offer(stoppable: bool = True, **raw) -> InstanceTypeOffer:
    row = {"stoppable": stoppable, "disk_min_gb": 250, "disk_max_gb": 16000, "disk_price_per_gb_mo": 0.1, **raw}
    return InstanceTypeOffer("g6e.xlarge", "L40S", 1, 48, 48, 2.24, boot_time_seconds=390, raw=row)


@pytest.mark.parametrize(
    ("the_entry", "the_live", "verdict"),
    [
        (entry(), live(), REUSE),
        (entry(), None, GONE),
        (entry(), live(ident="i-2"), FOREIGN),  # another id under the recorded name: never started
        (entry(), live("RUNNING"), NOT_STOPPED),
        (entry(), live("STARTING"), NOT_STOPPED),  # another run's start: in use
        (entry(), live("STOPPING"), SETTLING),  # a teardown's stop under way: worth a bounded wait
        (entry(state=STATE_IN_USE), live("STOPPING"), SETTLING),  # the teardown records it once the stop is asked
        (entry(state=STATE_IN_USE), live(), IN_USE),
        (entry(since=NOW - 3600), live(), EXPIRED),
        (entry(since=NOW - 3600), live("STOPPING"), EXPIRED),
        (entry(since=NOW - 3599), live(), REUSE),
        (entry(state=STATE_IN_USE), live(ident="i-2"), FOREIGN),
    ],
)
def test_candidate_verdict(the_entry, the_live, verdict):
    assert candidate_verdict(the_entry, the_live, NOW) == verdict


PRICES = {"g4dn.xlarge": 0.53, "g6e.xlarge": 2.24}


@pytest.mark.parametrize(
    ("request_", "status", "verdict"),
    [
        (WarmRequest(("g6e.xlarge",), PRICES), "STOPPED", REUSE),
        (WarmRequest(("g4dn.xlarge", "g6e.xlarge"), PRICES), "STOPPED", REUSE),
        (WarmRequest(("g4dn.xlarge",), PRICES), "STOPPED", NOT_REQUESTED),  # another type than asked for
        (WarmRequest(("g4dn.xlarge",), PRICES), "STOPPING", NOT_REQUESTED),  # not waited for either
        (WarmRequest(("g6e.xlarge",), PRICES, PriceCap(1.0, max_price_per_hour=1.0)), "STOPPED", NOT_REQUESTED),
        (WarmRequest(("g6e.xlarge",), PRICES, PriceCap(2.24, max_price_per_hour=2.24)), "STOPPED", REUSE),
        (WarmRequest(("g6e.xlarge",), PRICES, CostLimits(None, 0.2).price_cap(840.0)), "STOPPED", NOT_REQUESTED),
        (WarmRequest(("g6e.xlarge",), PRICES, CostLimits(None, 0.6).price_cap(840.0)), "STOPPED", REUSE),
        (WarmRequest(("g6e.xlarge",), {}, PriceCap(5.0)), "STOPPED", NOT_REQUESTED),  # no known price under a cap
        (WarmRequest(("g6e.xlarge",), PRICES), "STOPPING", SETTLING),
    ],
)
def test_a_warm_candidate_must_satisfy_the_request_as_a_create_would(request_, status, verdict):
    assert candidate_verdict(entry(), live(status), NOW, request_) == verdict


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (WarmRequest(("g4dn.xlarge",), PRICES), "its type g6e.xlarge is not one this run asks for (g4dn.xlarge)"),
        (
            WarmRequest(("g6e.xlarge",), PRICES, PriceCap(1.0, max_price_per_hour=1.0)),
            "its price $2.24/h is above max_price_per_hour=$1.00/h",
        ),
        (
            WarmRequest(("g6e.xlarge",), PRICES, CostLimits(None, 0.2).price_cap(840.0)),
            "at $2.24/h the step may cost $0.5227 ((ready_timeout + timeout) x price), more than max_run_cost=$0.2000",
        ),
        (WarmRequest(("g6e.xlarge",), {}, PriceCap(5.0)), "the price of g6e.xlarge is not known"),
        (WarmRequest(("g6e.xlarge",), PRICES, PriceCap(5.0)), None),
    ],
)
def test_why_a_warm_candidate_does_not_fit(request_, reason):
    mismatch = request_.mismatch("g6e.xlarge")
    assert mismatch == reason if reason is None else mismatch is not None and mismatch.startswith(reason)
    if request_.types == ("g6e.xlarge",):
        assert request_.admitted == ([] if reason else ["g6e.xlarge"])


def test_candidates_are_the_stopped_ones_newest_first():
    old, new = entry(since=1, id="a"), entry(since=2, id="b")
    assert candidates([old, entry(STATE_IN_USE, id="c"), new]) == [new, old]


@pytest.mark.parametrize(
    ("the_offer", "saved", "idle_hours", "stop", "disk", "warm"),
    [
        (offer(), 390, 1, True, 0.068493, 0.242667),  # 500 GB x $0.1/GB-month = $0.0685/h < 390 s of $2.24/h
        (offer(), 390, 24, False, 1.643836, 0.242667),
        (offer(), 930, 8, True, 0.547945, 0.578667),  # boot, pulls and staging
        (offer(), 930, 9, False, 0.616438, 0.578667),
        (offer(disk_price_per_gb_mo=0), 1, 1000, True, 0.0, 0.000622),  # an unpriced disk: always stop
        (offer(target_disk_gb=1000), 390, 1, True, 0.136986, 0.242667),
        (offer(False), 390, 1, False, 0.0, 0.0),
        (None, 390, 1, False, 0.0, 0.0),
    ],
)
def test_break_even(the_offer, saved, idle_hours, stop, disk, warm):
    verdict = break_even(the_offer, price_per_hour=None, saved_seconds=saved, idle_seconds=idle_hours * 3600)
    assert (verdict.stop, verdict.disk_dollars, verdict.warm_dollars) == (stop, disk, warm)
    assert verdict.stoppable == (the_offer is not None and bool(the_offer.raw["stoppable"]))
    if verdict.stoppable:
        assert f"${disk:.4f}" in verdict.message and f"${warm:.4f}" in verdict.message  # both numbers
        assert verdict.message.startswith("stopping" if stop else "deleting")
    else:
        assert "not stoppable" in verdict.message


def test_break_even_prefers_the_recorded_price():
    assert break_even(offer(), price_per_hour=4.48, saved_seconds=390, idle_seconds=3600).warm_dollars == 0.485333


def test_disk_price_of_a_fixed_disk_is_its_size():
    assert disk_dollars_per_hour(offer(disk_min_gb=1024, disk_max_gb=1024)) == pytest.approx(1024 * 0.1 / 730)
    assert disk_dollars_per_hour(None) == 0.0


@pytest.mark.parametrize(
    ("boot", "pull", "stage", "catalog", "saved"),
    [(10, 400, 140, 390, 930), (500, 0, 0, 390, 500), (10, -1, 0, None, 10)],
)
def test_saved_seconds(boot, pull, stage, catalog, saved):
    assert (
        saved_seconds(boot_seconds=boot, pull_seconds=pull, stage_seconds=stage, catalog_boot_seconds=catalog) == saved
    )


@pytest.mark.parametrize(
    ("next_run", "idle"),
    [(None, 3600), (NOW + 60, 60), (NOW + 7200, 3600), (NOW - 5, 3600), (NOW, 3600)],
)
def test_expected_idle_is_until_the_next_run_within_max_idle(next_run, idle):
    assert expected_idle_seconds(now=NOW, next_run_at=next_run, max_idle=3600) == idle


def test_entries_of_the_single_variable_of_earlier_releases_skip_what_is_not_one():
    kept = entry()
    stored = {"k": [kept.to_dict()], "empty": [], "bad": "x", "k2": [{"key": "other", "id": "i", "name": "n"}]}
    assert entries_in(stored) == {"k": [kept]}
    assert entries_in(None) == {}
    assert ReuseEntry.from_dict({"key": "k", "id": "", "name": "n"}) is None
    odd = ReuseEntry.from_dict({"key": "k", "id": "i", "name": "n", "state": "??", "since": True})
    assert odd is not None and (odd.state, odd.since) == (STATE_IN_USE, 0.0)


@pytest.mark.parametrize(
    ("value", "key"),
    [(None, None), ("", None), ("  ", None), ("None", None), (" none ", None), (" weekly ", "weekly"), (7, "7")],
)
def test_reuse_key_value(value, key):
    assert reuse_key_value(value) == key


@pytest.mark.parametrize("value", ["x" * 201, "a\nb"])
def test_reuse_key_value_refuses(value):
    with pytest.raises(BrevInvalidInputError, match="reuse_key"):
        reuse_key_value(value)


def test_next_run_at_reads_the_timetable():
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from airflow.sdk import DAG

    from airflow_provider_brev.instances.warm_pool import next_run_at

    daily = DAG(dag_id="reuse_daily", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=UTC))
    now = datetime(2026, 3, 2, 6, tzinfo=UTC).timestamp()
    tomorrow = datetime(2026, 3, 3, tzinfo=UTC).timestamp()
    today_run, old_run = (
        SimpleNamespace(data_interval_start=day, data_interval_end=day)
        for day in (datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    )
    for run in (today_run, old_run, None):  # this run's interval, an old one, a manual run: the next after now
        assert next_run_at({"dag": daily, "dag_run": run}, now=now) == tomorrow
    manual = DAG(dag_id="reuse_manual", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
    assert next_run_at({"dag": manual, "dag_run": today_run}, now=now) is None
    assert next_run_at({}) is None  # no DAG: the break-even falls back to max_idle


# --- the stored records: field names, defaults, shapes -------------------------------------------------------------

FULL = {
    "key": "weekly",
    "id": "i-7",
    "name": "brev-weekly",
    "instance_type": "g6e.xlarge",
    "state": "stopped",
    "since": 12.5,
    "max_idle": 7200.0,
    "max_lifetime": 900.0,
    "saved_seconds": 930.0,
    "claimed_by": "d/r/t/-1",
    "price_per_hour": 2.24,
    "created_at": 11.0,
    "created_by": "d/r/create/-1",
    "conn_id": "brev_default",
    "disk_price_per_hour": 0.0342,
}
#: What a record holding only key, id and name reads as (and what a new entry holds): the documented defaults.
DEFAULTS = {
    "instance_type": "",
    "state": "in_use",
    "since": 0.0,
    "max_idle": 86400.0,  # a day
    "max_lifetime": 86400.0,
    "saved_seconds": 0.0,
    "claimed_by": "",
    "price_per_hour": None,
    "created_at": None,
    "created_by": "",
    "conn_id": "",
    "disk_price_per_hour": None,
}
MINIMAL = {"key": "weekly", "id": "i-7", "name": "brev-weekly"}


def test_a_full_record_round_trips_under_its_stored_field_names():
    read = ReuseEntry.from_dict(FULL)
    assert read is not None and read.to_dict() == FULL  # every field is written and read back under its name
    assert [e.to_dict() for e in entries_in({"weekly": [FULL]})["weekly"]] == [FULL]


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(MINIMAL, id="fields-missing"),
        pytest.param({**MINIMAL, **dict.fromkeys(DEFAULTS)}, id="fields-null"),
        pytest.param(
            {**MINIMAL, "instance_type": 5, "claimed_by": ["x"], "max_idle": "1h", "created_by": 3},
            id="fields-wrong-type",
        ),
        pytest.param({**MINIMAL, "state": "running", "since": True, "saved_seconds": False}, id="unknown-state-bools"),
    ],
)
def test_a_record_missing_a_field_reads_with_its_default(record):
    read = ReuseEntry.from_dict(record)
    assert read is not None and read.to_dict() == {**MINIMAL, **DEFAULTS}
    assert ReuseEntry(**MINIMAL).to_dict() == {**MINIMAL, **DEFAULTS}  # a new entry holds the same defaults


@pytest.mark.parametrize(
    "record",
    [
        pytest.param("weekly", id="not-a-dict"),
        pytest.param(None, id="none"),
        pytest.param({**MINIMAL, "key": 5}, id="key-not-text"),
        pytest.param({**MINIMAL, "key": ""}, id="key-empty"),
        pytest.param({**MINIMAL, "id": 7}, id="id-not-text"),
        pytest.param({**MINIMAL, "id": ""}, id="id-empty"),
        pytest.param({**MINIMAL, "name": 7}, id="name-not-text"),
        pytest.param({**MINIMAL, "name": ""}, id="name-empty"),
        pytest.param({"key": "weekly", "id": "i-7"}, id="name-missing"),
    ],
)
def test_a_record_of_a_wrong_shape_is_dropped(record):
    assert ReuseEntry.from_dict(record) is None
    assert entries_in({"weekly": [record, MINIMAL]}) == {"weekly": [ReuseEntry(**MINIMAL)]}  # the rest is kept


def test_records_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReuseEntry(**MINIMAL).state = STATE_STOPPED  # type: ignore[misc]
    verdict = break_even(None, price_per_hour=None, saved_seconds=1, idle_seconds=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.stop = True  # type: ignore[misc]


# --- the break-even's edges ----------------------------------------------------------------------------------------


def test_break_even_when_the_disk_costs_exactly_the_warm_saving_deletes():
    # 730 GB at $1/GB-month = $1/h for 1 h against 1000 s at $3.60/h = $1: not less, so delete
    verdict = break_even(
        offer(target_disk_gb=730, disk_price_per_gb_mo=1), price_per_hour=3.6, saved_seconds=1000, idle_seconds=3600
    )
    assert (verdict.stop, verdict.disk_dollars, verdict.warm_dollars) == (False, 1.0, 1.0)
    assert verdict.message.startswith("deleting") and "not less" in verdict.message


def test_break_even_counts_negative_times_as_none():
    verdict = break_even(offer(), price_per_hour=None, saved_seconds=-60, idle_seconds=-3600)
    assert (verdict.idle_hours, verdict.disk_dollars, verdict.warm_dollars, verdict.stop) == (0.0, 0.0, 0.0, False)


def test_break_even_of_an_unknown_type_names_it_and_deletes():
    verdict = break_even(None, price_per_hour=2.0, saved_seconds=390, idle_seconds=60)
    assert verdict.message == "its type cannot be stopped (not stoppable): deleting"
    assert break_even(offer(False), price_per_hour=2.0, saved_seconds=390, idle_seconds=60).message.startswith(
        "g6e.xlarge cannot be stopped"
    )


def bare_offer(**raw) -> InstanceTypeOffer:
    return InstanceTypeOffer("g6e.xlarge", "L40S", 1, 48, 48, 2.24, boot_time_seconds=390, raw=raw)


@pytest.mark.parametrize(
    ("raw", "gb"),
    [
        pytest.param({"disk_min_gb": 250, "disk_max_gb": 16000}, 500, id="default-within-range"),
        pytest.param({"disk_min_gb": 1000, "disk_max_gb": 16000}, 1000, id="default-below-min"),
        pytest.param({"disk_min_gb": 100, "disk_max_gb": 300}, 300, id="default-above-max"),
        pytest.param({"disk_min_gb": 250}, 250, id="no-max-is-the-min"),
        pytest.param({"disk_min_gb": 800, "disk_max_gb": 400}, 800, id="max-below-min-is-the-min"),
        pytest.param({}, 0, id="no-range-no-disk"),
        pytest.param({"disk_max_gb": 16000}, 500, id="no-min"),
        pytest.param({"target_disk_gb": 64, "disk_min_gb": 250}, 64, id="target-wins"),
    ],
)
def test_disk_size_is_the_create_default_clamped_to_the_type_range(raw, gb):
    assert disk_dollars_per_hour(bare_offer(disk_price_per_gb_mo=0.73, **raw)) == pytest.approx(gb * 0.001)


def test_an_unpriced_disk_costs_nothing():
    assert disk_dollars_per_hour(bare_offer(disk_min_gb=250, disk_max_gb=16000)) == 0.0


@pytest.mark.parametrize(
    ("boot", "catalog", "saved"),
    [
        pytest.param(0, None, 0, id="no-catalog-boot-is-no-floor"),
        pytest.param(10.0004, None, 10.0, id="kept-to-the-millisecond"),
        pytest.param(0, 0, 0, id="zero-catalog-boot"),
    ],
)
def test_saved_seconds_edges(boot, catalog, saved):
    assert saved_seconds(boot_seconds=boot, pull_seconds=0, stage_seconds=0, catalog_boot_seconds=catalog) == saved


def test_reuse_key_value_accepts_exactly_200_characters():
    assert reuse_key_value("x" * 200) == "x" * 200
