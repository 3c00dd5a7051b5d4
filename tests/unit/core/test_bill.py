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
