"""A DAG run's bill (airflow_provider_brev/core/bill.py): every billed second of an instance's window goes to one task
and one phase, what no task covers is shown as uncovered, and the table's total is the bill."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_brev.core.bill import (
    PRECEDENCE,
    STOPPED,
    TABLE_PHASES,
    UNCOVERED,
    UNCOVERED_ROW,
    cost_table,
    disk_cost,
    merged,
    run_cost,
    split_window,
    task_spans,
)
from airflow_provider_brev.core.cost import CURRENCY, PHASES, lifetime_cost, step_cost

PRICE = 3.6  # $0.001 a second


def cost(name: str, start: float, end: float, *spans: tuple[str, float, float], price: float | None = PRICE) -> dict:
    """A task's ``brev_cost`` with its window and spans, as the meter reports it."""
    phases: dict[str, float] = {}
    for phase, a, b in spans:
        phases[phase] = phases.get(phase, 0.0) + b - a
    return step_cost(
        instance_name=name,
        instance_type="g6e.xlarge",
        price_per_hour=price,
        phases=phases,
        billed_seconds=end - start,
        window=(start, end),
        spans=spans,
    )


def life(name: str, start: float, end: float, *, ended_by: str = "delete") -> dict:
    return lifetime_cost(
        instance_name=name,
        instance_type="g6e.xlarge",
        price_per_hour=PRICE,
        created_at=start,
        ended_at=end,
        ended_by=ended_by,
    )


def row(report: dict, task_id: str) -> dict:
    return next(r for r in report["tasks"] if r["task_id"] == task_id)


def nonzero(seconds: dict[str, float]) -> dict[str, float]:
    return {phase: value for phase, value in seconds.items() if value}


# -- the split ---------------------------------------------------------------------------------------------------
def test_a_task_s_idle_fills_what_its_spans_leave_of_its_window():
    spans = task_spans(cost("i", 10, 20, ("work", 12, 15), ("resume", 15, 19)))
    assert spans == [("work", 12.0, 15.0), ("resume", 15.0, 19.0), ("idle", 10.0, 20.0)]
    assert task_spans(step_cost(instance_name="i", instance_type="t", price_per_hour=1, phases={"work": 1})) is None
    odd = {"started_at": 0, "ended_at": 5, "spans": [["work", 1, 2], ["lunch", 0, 1], ["pull", 3, 3], "x", [1, 2]]}
    assert task_spans(odd) == [("work", 1.0, 2.0), ("idle", 0.0, 5.0)]  # unknown, empty and malformed spans dropped
    assert task_spans({"started_at": 5, "ended_at": 5, "spans": []}) == []


def test_sequential_tasks_split_the_window_and_the_gaps_are_uncovered():
    create = task_spans(cost("i", 0, 30, ("boot", 0, 30)))
    step = task_spans(cost("i", 35, 100, ("stage", 36, 40), ("work", 40, 90), ("resume", 90, 98)))
    assert create is not None and step is not None
    shares, uncovered = split_window(0, 110, [("create", create), ("step", step)])
    assert nonzero(shares[0]) == {"boot": 30}
    assert nonzero(shares[1]) == {"stage": 4, "work": 50, "resume": 8, "idle": 3}  # 35-36 and 98-100 idle
    assert uncovered == 15  # 30-35 between the tasks, 100-110 before the delete request
    assert sum(map(sum, (s.values() for s in shares))) + uncovered == 110


def test_overlapping_tasks_never_bill_a_second_twice_work_first_then_the_dag_s_order():
    a = [("work", 0.0, 10.0), ("idle", 0.0, 20.0)]
    b = [("stage", 5.0, 15.0), ("work", 15.0, 25.0), ("idle", 5.0, 25.0)]
    shares, uncovered = split_window(0, 30, [("a", a), ("b", b)])
    assert nonzero(shares[0]) == {"work": 10}  # a's idle 10-20 loses to b's stage and work
    assert nonzero(shares[1]) == {"stage": 5, "work": 10}  # b's stage 5-10 loses to a's work
    assert uncovered == 5
    tie, _ = split_window(0, 10, [("a", [("work", 0.0, 10.0)]), ("b", [("work", 0.0, 10.0)])])
    assert (tie[0]["work"], tie[1]["work"]) == (10, 0)  # the same phase: the first task in the DAG's order
    assert PRECEDENCE[0] == "work" and PRECEDENCE[-1] == "idle" and set(PRECEDENCE) == set(PHASES)


def test_spans_outside_the_window_are_not_billed():
    shares, uncovered = split_window(10, 20, [("t", [("boot", 0.0, 12.0), ("work", 18.0, 40.0)])])
    assert nonzero(shares[0]) == {"boot": 2, "work": 2} and uncovered == 6
    assert split_window(5, 5, [("t", [("work", 0.0, 9.0)])]) == ([dict.fromkeys(PHASES, 0.0)], 0.0)


def test_merged_windows():
    assert merged([(5, 9), (0, 3), (2, 4), (9, 10), (7, 7)]) == [(0, 4), (5, 10)]
    assert merged([]) == []


# -- the run's report --------------------------------------------------------------------------------------------
def lifecycle() -> dict[str, Any]:
    """create (boot 0.3 s) -> sensor (boot until ready at 60, resumed at 85) -> a step whose job ended at 101 and
    whose task resumed at 126 -> delete (request at 131.6); the gaps between tasks are nobody's."""
    costs = [
        ("create_instance", cost("i", 0, 0.3, ("boot", 0, 0.3))),
        ("wait_until_ready", cost("i", 1, 85, ("boot", 1, 60), ("resume", 60, 85), price=None)),
        ("gap_analysis", cost("i", 88, 128, ("stage", 89, 100), ("work", 100, 101), ("resume", 101, 126))),
        ("delete_instance", cost("i", 130, 131.6)),
    ]
    return run_cost(costs, [("delete_instance", life("i", 0, 131.6))])


def test_the_bill_is_the_instance_s_window_and_the_rows_add_up_to_it():
    report = lifecycle()
    [bill] = report["bill"]
    assert (bill["kind"], bill["seconds"], bill["dollars"]) == ("instance", 131.6, 0.1316)
    assert (bill["started_at"], bill["ended_at"], bill["ended_by"], bill["task_id"]) == (
        0,
        131.6,
        "delete",
        "delete_instance",
    )
    assert report["total_seconds"] == 131.6 and report["total_dollars"] == 0.1316  # the total is the bill
    assert sum(r["total_seconds"] for r in report["tasks"]) == pytest.approx(131.6, abs=1e-6)
    assert sum(r["total_dollars"] for r in report["tasks"]) == pytest.approx(0.1316, abs=1e-5)
    assert sum(report["seconds"].values()) == pytest.approx(131.6, abs=1e-6)
    assert [r["task_id"] for r in report["tasks"]] == [
        "create_instance",
        "wait_until_ready",
        "gap_analysis",
        "delete_instance",
        UNCOVERED_ROW,
    ]


def test_a_sensor_s_wait_is_boot_and_a_resumption_is_not_work():
    report = lifecycle()
    sensor = row(report, "wait_until_ready")
    assert nonzero(sensor["seconds"]) == {"boot": 59, "resume": 25}
    assert sensor["price_per_hour"] == PRICE and sensor["instance_type"] == "g6e.xlarge"  # the instance's price
    step = row(report, "gap_analysis")
    assert nonzero(step["seconds"]) == {"stage": 11, "work": 1, "resume": 25, "idle": 3}
    uncovered = row(report, UNCOVERED_ROW)
    assert nonzero(uncovered["seconds"]) == {UNCOVERED: pytest.approx(0.7 + 3 + 2)}  # 0.3-1, 85-88, 128-130
    assert report["seconds"]["work"] == 1 and report["seconds"]["resume"] == 50
    assert report["lifetimes"][0]["tasks_dollars"] == pytest.approx(0.1316 - 0.0057, abs=1e-6)


def test_tasks_on_an_instance_the_run_did_not_release_bill_what_they_measured():
    """A step on an existing instance: its own window; two overlapping ones: their union, each second once."""
    one = cost("box", 0, 10, ("work", 2, 8))
    two = cost("box", 5, 20, ("work", 9, 19))
    report = run_cost([("one", one), ("two", two)])
    [bill] = report["bill"]
    assert (bill["kind"], bill["seconds"], bill["tasks"]) == ("measured", 20, ["one", "two"])
    assert nonzero(row(report, "one")["seconds"]) == {"work": 6, "idle": 3}  # 8-9 goes to one's idle over two's
    assert nonzero(row(report, "two")["seconds"]) == {"work": 10, "idle": 1}
    assert report["total_seconds"] == 20 and UNCOVERED_ROW not in [r["task_id"] for r in report["tasks"]]


def test_a_lepton_step_joins_with_its_estimate_and_an_older_cost_counts_as_reported():
    lepton = step_cost(
        instance_name="job-1", instance_type="gpu.1xh100", price_per_hour=3.0, phases={"boot": 10, "work": 50}
    )
    lepton.update(estimate=True, price_source="default estimate")
    older = step_cost(instance_name="i", instance_type="g6e.xlarge", price_per_hour=PRICE, phases={"work": 20})
    report = run_cost(
        [("create", cost("i", 0, 10, ("boot", 0, 10))), ("older", older), ("lepton", lepton)],
        [("delete", life("i", 0, 40))],
    )
    instance, estimate = report["bill"]
    assert (instance["kind"], instance["seconds"]) == ("instance", 40)
    assert (estimate["kind"], estimate["seconds"], estimate["dollars"]) == ("estimate", 60, 0.05)
    assert nonzero(row(report, "older")["seconds"]) == {"work": 20}  # no spans: as it reported itself
    assert row(report, UNCOVERED_ROW)["seconds"][UNCOVERED] == 10  # 40 - 10 - 20
    assert row(report, "lepton")["estimate"] is True
    assert report["total_seconds"] == 100 and report["total_dollars"] == pytest.approx(0.04 + 0.05)


def test_a_stopped_instance_s_disk_time_is_billed_to_its_reuse_key():
    stopped = disk_cost(
        reuse_key="weekly", instance_name="i", stopped_at=1000.0, started_at=8200.0, disk_price_per_hour=0.05
    )
    assert stopped == {
        "reuse_key": "weekly",
        "instance_name": "i",
        "stopped_at": 1000.0,
        "started_at": 8200.0,
        "seconds": 7200.0,
        "disk_price_per_hour": 0.05,
        "dollars": 0.1,
    }
    create = {**cost("i", 0, 5, ("boot", 0, 5)), "stopped": stopped}
    report = run_cost([("create", create)], [("delete", life("i", 0, 10, ended_by="stop"))])
    instance, disk = report["bill"]
    assert (instance["ended_by"], disk["kind"], disk["reuse_key"], disk["dollars"]) == ("stop", "disk", "weekly", 0.1)
    assert row(report, "(stopped: weekly)")["seconds"][STOPPED] == 7200
    assert report["total_dollars"] == pytest.approx(0.01 + 0.1)
    lines = cost_table(report).splitlines()
    assert "from brev start/create to brev stop" in lines[1]
    assert lines[2].startswith("  stopped disk of reuse key 'weekly' (i, $0.05/h): 2.00 h until this run started it")


def test_an_unpriced_instance_is_named_and_an_empty_run_bills_nothing():
    unpriced = cost("i", 0, 10, ("work", 0, 10), price=None)
    report = run_cost([("t", unpriced)])
    assert report["unpriced"] == ["t"] and report["total_dollars"] == 0.0 and report["total_seconds"] == 10
    assert run_cost([]) == {
        "bill": [],
        "tasks": [],
        "seconds": dict.fromkeys(TABLE_PHASES, 0.0),
        "total_seconds": 0.0,
        "total_dollars": 0.0,
        "unpriced": [],
        "lifetimes": [],
        "phases": list(TABLE_PHASES),
        "currency": CURRENCY,
    }


def test_the_table_puts_the_bill_first_and_its_total_is_the_bill():
    assert cost_table(lifecycle()).splitlines() == [
        "Bill: $0.1316 for 131.6 s (every row below is a share of it; the total row equals it)",
        "  instance i (g6e.xlarge at $3.60/h): 131.6 s from brev create to brev delete (delete_instance), $0.1316",
        "",
        "task              type         $/h  boot  stage  work  resume  idle  uncovered  seconds        $",
        "----------------  ----------  ----  ----  -----  ----  ------  ----  ---------  -------  -------",
        "create_instance   g6e.xlarge  3.60   0.3    0.0   0.0     0.0   0.0        0.0      0.3  $0.0003",
        "wait_until_ready  g6e.xlarge  3.60  59.0    0.0   0.0    25.0   0.0        0.0     84.0  $0.0840",
        "gap_analysis      g6e.xlarge  3.60   0.0   11.0   1.0    25.0   3.0        0.0     40.0  $0.0400",
        "delete_instance   g6e.xlarge  3.60   0.0    0.0   0.0     0.0   1.6        0.0      1.6  $0.0016",
        "(uncovered)       g6e.xlarge  3.60   0.0    0.0   0.0     0.0   0.0        5.7      5.7  $0.0057",
        "----------------  ----------  ----  ----  -----  ----  ------  ----  ---------  -------  -------",
        "total                               59.3   11.0   1.0    50.0   4.6        5.7    131.6  $0.1316",
        "(uncovered: billed time no task accounts for -- Airflow's gaps between tasks, or a task without a meter)",
        "(resume: from a job's end until Airflow resumed its task after the deferral; not work)",
    ]
    bare = cost_table(run_cost([])).splitlines()
    assert bare[0].startswith("Bill: $0.0000 for 0.0 s")
    assert bare[2].split() == ["task", "type", "$/h", "boot", "work", "seconds", "$"]  # empty columns left out
    assert bare[-1].split() == ["total", "0.0", "0.0", "0.0", "$0.0000"]


# -- decisions pinned one by one ---------------------------------------------------------------------------------
def test_where_phases_overlap_upload_beats_stage_and_pull_beats_boot_whatever_the_dag_s_order():
    first = [("stage", 0.0, 10.0), ("boot", 10.0, 20.0)]
    second = [("upload", 5.0, 10.0), ("pull", 15.0, 20.0)]
    shares, uncovered = split_window(0, 20, [("first", first), ("second", second)])
    assert nonzero(shares[0]) == {"stage": 5, "boot": 5}
    assert nonzero(shares[1]) == {"upload": 5, "pull": 5}
    assert uncovered == 0
    idle_only, _ = split_window(0, 4, [("a", [("idle", 0.0, 4.0)]), ("b", [("resume", 2.0, 4.0)])])
    assert (nonzero(idle_only[0]), nonzero(idle_only[1])) == ({"idle": 2}, {"resume": 2})  # idle loses to any phase


def test_a_cost_without_a_usable_window_counts_as_reported():
    spans = [["work", 1, 2]]
    assert task_spans({"ended_at": 5, "spans": spans}) is None
    assert task_spans({"started_at": 0, "spans": spans}) is None
    assert task_spans({"started_at": 0, "ended_at": 5, "spans": None}) is None
    assert task_spans({"started_at": 0, "ended_at": 5, "spans": spans}) == [("work", 1.0, 2.0), ("idle", 0.0, 5.0)]


def test_an_inverted_window_bills_nothing_and_a_zero_length_one_merges_away():
    shares, uncovered = split_window(20, 10, [("t", [("work", 0.0, 30.0)])])
    assert shares == [dict.fromkeys(PHASES, 0.0)] and uncovered == 0.0
    assert merged([(3, 3)]) == []


def test_a_stopped_disk_s_time_is_never_negative_and_kept_to_the_millisecond():
    skewed = disk_cost(reuse_key="k", instance_name="i", stopped_at=100.5, started_at=100.2, disk_price_per_hour=1.0)
    assert (skewed["seconds"], skewed["dollars"]) == (0.0, 0.0)
    short = disk_cost(reuse_key="k", instance_name="i", stopped_at=100.0, started_at=100.25, disk_price_per_hour=None)
    assert (short["seconds"], short["dollars"]) == (0.25, None)
    fine = disk_cost(reuse_key="k", instance_name="i", stopped_at=1000.0, started_at=1030.12345, disk_price_per_hour=1)
    assert fine["seconds"] == pytest.approx(30.123, abs=1e-9)


def test_epoch_times_bill_milliseconds_and_every_row_names_its_instance():
    t0 = 1_764_850_000.123456
    costs = [
        ("create", cost("i", t0, t0 + 0.30004, ("boot", t0, t0 + 0.30004))),
        ("step", cost("i", t0 + 2.00017, t0 + 50.00071, ("work", t0 + 3.00013, t0 + 48.00029))),
    ]
    report = run_cost(costs, [("delete", life("i", t0, t0 + 60.00049))])
    [bill] = report["bill"]
    assert bill["seconds"] == pytest.approx(60.0, abs=1e-9)  # the window, to the millisecond
    assert (bill["started_at"], bill["ended_at"]) == (t0, t0 + 60.00049)
    for r in report["tasks"]:
        assert r["instance_name"] == "i" and r["currency"] == report["currency"]
        assert r["total_seconds"] == round(r["total_seconds"], 3)
        assert all(v == round(v, 3) for v in r["seconds"].values())
    step = row(report, "step")
    assert step["seconds"]["work"] == pytest.approx(45.0, abs=1e-9)
    assert step["total_seconds"] == pytest.approx(48.0, abs=1e-9)  # its window, reported to the millisecond
    gap = row(report, UNCOVERED_ROW)["seconds"][UNCOVERED]  # the lifetime's bounds are not rounded
    assert gap == pytest.approx(60.00049 - 48.0 - 0.3, abs=1e-3) and gap == round(gap, 3)
    assert report["total_seconds"] == pytest.approx(60.0, abs=1e-9)
    assert report["lifetimes"][0]["task_id"] == "delete"


def test_a_fully_covered_window_has_no_uncovered_row():
    report = run_cost([("t", cost("i", 100, 110, ("work", 100, 110)))], [("delete", life("i", 100, 110))])
    assert [r["task_id"] for r in report["tasks"]] == ["t"]
    assert report["bill"][0]["seconds"] == 10 and report["seconds"][UNCOVERED] == 0
    older = step_cost(instance_name="i", instance_type="g6e.xlarge", price_per_hour=PRICE, phases={"work": 30})
    over = run_cost([("older", older)], [("delete", life("i", 100, 110))])  # reports more than the window
    assert [r["task_id"] for r in over["tasks"]] == ["older"] and over["total_seconds"] == 10


def test_a_short_gap_gets_an_uncovered_row():
    report = run_cost([("t", cost("i", 0, 9.5, ("work", 0, 9.5)))], [("delete", life("i", 0, 10))])
    assert row(report, UNCOVERED_ROW)["seconds"][UNCOVERED] == 0.5


def test_lifetimes_of_older_shapes_end_at_their_delete_or_nowhere():
    base = life("i", 100, 140)
    only_deleted = {k: v for k, v in base.items() if k not in ("ended_at", "ended_by")}
    only_ended = {k: v for k, v in base.items() if k != "deleted_at"}
    no_end = {k: v for k, v in base.items() if k not in ("ended_at", "deleted_at")}
    step = ("t", cost("i", 100, 120, ("work", 100, 120)))
    for shape, seconds in ((only_deleted, 40), (only_ended, 40), (no_end, 0)):
        [bill] = run_cost([step], [("delete", shape)])["bill"]
        assert (bill["started_at"], bill["seconds"], bill["ended_by"]) == (100, seconds, "delete")


def test_an_instance_released_twice_claims_its_tasks_once_and_each_window_has_its_gaps():
    costs = [
        ("a", cost("i", 0, 8, ("work", 0, 8))),
        ("b", cost("i", 10, 18, ("work", 10, 18))),
        ("c", cost("j", 0, 5, ("work", 0, 5))),
    ]
    lifetimes = [("stop_i", life("i", 0, 20, ended_by="stop")), ("delete_j", life("j", 0, 10))]
    report = run_cost(costs, lifetimes)
    ids = [r["task_id"] for r in report["tasks"]]
    assert ids == ["a", "b", "c", UNCOVERED_ROW, UNCOVERED_ROW]
    assert [r["seconds"][UNCOVERED] for r in report["tasks"][3:]] == [4, 5]  # 8-10 and 18-20 on i; 5-10 on j
    assert [r["instance_name"] for r in report["tasks"][3:]] == ["i", "j"]
    assert [b["tasks"] for b in report["bill"]] == [["a", "b"], ["c"]]
    assert [lt["tasks_dollars"] for lt in report["lifetimes"]] == [0.016, 0.005]
    again = run_cost(costs, [*lifetimes, ("delete_i", life("i", 30, 40))])
    assert [b["tasks"] for b in again["bill"]] == [["a", "b"], ["c"], []]
    assert [r["task_id"] for r in again["tasks"]] == [*ids, UNCOVERED_ROW]
    assert nonzero(row(again, "b")["seconds"]) == {"work": 8}


def test_a_task_row_takes_its_own_price_and_type_where_the_lifetime_lacks_them():
    unpriced = {**life("i", 0, 10), "price_per_hour": None, "instance_type": ""}
    report = run_cost([("t", cost("i", 0, 10, ("work", 0, 10)))], [("delete", unpriced)])
    assert (row(report, "t")["price_per_hour"], row(report, "t")["instance_type"]) == (PRICE, "g6e.xlarge")
    typeless = {**cost("i", 0, 10, ("work", 0, 10)), "instance_type": ""}
    other = {**cost("i", 0, 10, ("work", 0, 10)), "instance_type": "a10"}
    report = run_cost([("typeless", typeless), ("other", other)], [("delete", life("i", 0, 10))])
    assert (row(report, "typeless")["instance_type"], row(report, "other")["instance_type"]) == ("g6e.xlarge", "a10")
    nothing = run_cost([("t", cost("i", 0, 10, ("work", 0, 10), price=None))], [("delete", unpriced)])
    assert nothing["lifetimes"][0]["tasks_dollars"] == 0.0 and nothing["unpriced"] == ["t"]


def test_unreleased_instances_are_billed_one_group_each():
    report = run_cost([("a", cost("x", 0, 10, ("work", 0, 10))), ("b", cost("y", 0, 10, ("work", 0, 10)))])
    assert [(b["instance_name"], b["seconds"], b["tasks"]) for b in report["bill"]] == [
        ("x", 10, ["a"]),
        ("y", 10, ["b"]),
    ]


def test_an_older_cost_reporting_nothing_bills_nothing():
    empty = step_cost(instance_name="x", instance_type="t", price_per_hour=PRICE, phases={})
    partial = {"instance_name": "y", "price_per_hour": PRICE, "seconds": {"work": 4}, "total_seconds": 4}
    bare = {"instance_name": "z", "price_per_hour": PRICE, "total_seconds": 0}
    report = run_cost([("empty", empty), ("partial", partial), ("bare", bare)])
    assert [b["seconds"] for b in report["bill"]] == [0, 4, 0]
    assert nonzero(row(report, "partial")["seconds"]) == {"work": 4}
    assert row(report, "bare")["total_seconds"] == 0


def test_a_stopped_record_without_seconds_is_not_billed():
    create = {**cost("i", 0, 5, ("boot", 0, 5)), "stopped": {"reuse_key": "k", "instance_name": "i"}}
    report = run_cost([("create", create)])
    assert [b["kind"] for b in report["bill"]] == ["measured"]


def test_the_stopped_disk_row_comes_after_the_task_rows_and_shows_as_disk():
    stopped = disk_cost(reuse_key="w", instance_name="i", stopped_at=0.0, started_at=3600.0, disk_price_per_hour=0.1)
    costs = [("create", {**cost("i", 0, 5, ("boot", 0, 5)), "stopped": stopped}), ("step", cost("i", 5, 10))]
    report = run_cost(costs, [("stop", life("i", 0, 10, ended_by="stop"))])
    assert [r["task_id"] for r in report["tasks"]] == ["create", "step", "(stopped: w)"]
    table = cost_table(report).splitlines()
    assert table[-1].split()[0] == "total"
    disk_row = next(line for line in table if line.startswith("(stopped: w)"))
    assert disk_row.split()[2:4] == ["disk", "0.10"]


def test_the_table_names_estimates_unknown_types_and_prices():
    lepton = step_cost(instance_name="job-1", instance_type="", price_per_hour=None, phases={"work": 50})
    lepton.update(estimate=True)
    measured = cost("box", 0, 10, ("work", 0, 10))
    report = run_cost([("lepton", lepton), ("mine", measured)])
    text = cost_table(report).splitlines()
    assert text[1].startswith("  Lepton job job-1 (? at $?/h): 50.0 s, an estimate from its shape's price")
    assert text[2].startswith("  instance box (g6e.xlarge at $3.60/h): 10.0 s as its tasks measured it")
    assert text[6].split()[:4] == ["lepton", "(estimate)", "?", "?"]
    assert "(price not known for: lepton; not in the dollars)" in text


def test_the_table_of_an_empty_or_older_report_shows_only_its_fixed_columns():
    assert cost_table({}).splitlines()[2].split() == ["task", "type", "$/h", "boot", "work", "seconds", "$"]
    report = run_cost([("t", cost("i", 0, 10, ("work", 0, 10)))])
    older = {**report, "tasks": [{**r, "seconds": {"boot": 0.0, "work": 10.0}} for r in report["tasks"]]}
    assert cost_table(older).splitlines()[3].split() == ["task", "type", "$/h", "boot", "work", "seconds", "$"]
