"""Each DAG run's bill for the Brev page's cost history (core/ui/history.py), from the costs the tasks report."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from airflow_provider_brev.core.bill import run_cost
from airflow_provider_brev.core.cost import step_cost
from airflow_provider_brev.core.instances.warm_pool_records import TaskRef
from airflow_provider_brev.core.ui.facts import PageFacts, Pushed, RunFacts
from airflow_provider_brev.core.ui.history import OTHER, XCOM_RUN_COST, bill_of, history, is_run_report, phase_order


def cost(**phases: float) -> dict:
    return step_cost(instance_name="gpu", instance_type="t", price_per_hour=3.6, phases=phases)


def facts(*items: Pushed, runs: dict | None = None) -> PageFacts:
    return PageFacts(list(items), runs or {}, {}, [], None, "", 0.0)


def test_a_report_gives_the_bill_its_phases_and_a_link_to_the_task_that_wrote_it() -> None:
    report = run_cost([("create", cost(boot=100)), ("train", cost(work=300, pull=50))])
    items = [Pushed("d", "r1", "cost_report", -1, XCOM_RUN_COST, report)]
    [dag] = history(facts(*items, runs={("d", "r1"): RunFacts("d", "r1", "success", 5.0)}))
    [bill] = dag.runs
    assert bill.report == TaskRef("d", "r1", "cost_report", -1)
    assert bill.total_dollars == pytest.approx(0.45)  # 450 s at $3.60/h
    assert bill.dollars == {"boot": 0.1, "work": 0.3, "pull": 0.05}
    assert bill.total_seconds == 450.0
    assert bill.non_work_share == pytest.approx(150 / 450)
    assert (bill.at, dag.phases) == (5.0, ["boot", "pull", "work"])


def test_a_run_without_a_report_is_added_up_from_its_tasks_costs_and_links_to_the_run() -> None:
    items = [
        Pushed("d", "r1", "a", -1, "brev_cost", cost(work=36)),
        Pushed("d", "r1", "b", -1, "brev_cost", [cost(stage=36), None]),
    ]
    [dag] = history(facts(*items))
    [bill] = dag.runs
    assert bill.report is None
    assert (bill.total_dollars, bill.dollars) == (0.072, {"work": 0.036, "stage": 0.036})
    assert bill.non_work_share == pytest.approx(0.5)


def test_a_phase_the_page_does_not_know_is_shown_after_the_known_ones() -> None:
    report = {
        "tasks": [
            {
                "task_id": "t",
                "seconds": {"work": 10, "settle": 5, "resume": 3},
                "dollars": {"work": 1.0, "settle": 0.5, "resume": 0.3},
                "total_dollars": 1.8,
            }
        ],
        "total_dollars": 1.8,
        "total_seconds": 18,
    }
    bill = bill_of("d", "r", 0.0, report=report, costs=[], by=None)
    assert bill is not None and bill.dollars == {"work": 1.0, "settle": 0.5, "resume": 0.3}
    assert phase_order(["settle", "work", OTHER, "boot", "resume"])[:2] == ["boot", "work"]
    assert phase_order(["zeta", "alpha", OTHER, "work"]) == ["work", "alpha", "zeta", OTHER]


def test_what_the_rows_do_not_account_for_of_the_bill_is_other() -> None:
    report = {
        "tasks": [{"task_id": "t", "seconds": {"work": 10}, "dollars": {"work": 1.0}, "total_dollars": 1.0}],
        "total_dollars": 1.25,
    }
    bill = bill_of("d", "r", 0.0, report=report, costs=[], by=None)
    assert bill is not None and bill.dollars == {"work": 1.0, OTHER: 0.25} and bill.total_dollars == 1.25
    rounded = {**report, "total_dollars": 1.000003}  # the rows' own rounding is no other cost
    bill = bill_of("d", "r", 0.0, report=rounded, costs=[], by=None)
    assert bill is not None and bill.dollars == {"work": 1.0}


def test_unpriced_tasks_are_named_and_count_no_dollars() -> None:
    unpriced = step_cost(instance_name="g", instance_type="?", price_per_hour=None, phases={"work": 10})
    bill = bill_of("d", "r", 0.0, report=None, costs=[unpriced, cost(work=36)], by=None)
    assert bill is not None and bill.unpriced == ("g",) and bill.total_dollars == 0.036


def test_runs_are_per_dag_oldest_first_and_only_readable_dags() -> None:
    runs = {("d", "new"): RunFacts("d", "new", "success", 20.0), ("d", "old"): RunFacts("d", "old", "success", 10.0)}
    items = [Pushed("d", r, "t", -1, "brev_cost", cost(work=1)) for r in ("new", "old")]
    items.append(Pushed("e", "x", "t", -1, "brev_cost", cost(work=1)))
    assert [d.dag_id for d in history(facts(*items, runs=runs))] == ["d", "e"]
    assert [b.run_id for b in history(facts(*items, runs=runs))[0].runs] == ["old", "new"]
    assert [d.dag_id for d in history(facts(*items, runs=runs), readable={"e"})] == ["e"]


def test_values_that_are_neither_reports_nor_costs_are_ignored() -> None:
    items = [Pushed("d", "r", "t", -1, XCOM_RUN_COST, {"tasks": "x"}), Pushed("d", "r", "t", -1, "brev_cost", "text")]
    assert history(facts(*items)) == []
    assert bill_of("d", "r", 0.0, report=None, costs=[], by=None) is None
    zero = bill_of("d", "r", 0.0, report={"tasks": [], "total_dollars": 0.0}, costs=[], by=None)
    assert zero is not None and zero.non_work_share is None


def test_bills_are_frozen_values() -> None:
    [dag] = history(facts(Pushed("d", "r", "t", -1, "brev_cost", cost(work=1))))
    with pytest.raises(FrozenInstanceError):
        dag.runs[0].total_dollars = 0.0  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        dag.phases = []  # type: ignore[misc]


def test_the_non_work_share_is_a_fraction_of_any_billed_time() -> None:
    def share(work: float, total: float) -> float | None:
        row = {"task_id": "t", "seconds": {"work": work}, "dollars": {"work": 0.1}, "total_dollars": 0.1}
        bill = bill_of(
            "d", "r", 0.0, report={"tasks": [row], "total_dollars": 0.1, "total_seconds": total}, costs=[], by=None
        )
        assert bill is not None
        return bill.non_work_share

    assert share(0.25, 0.5) == 0.5  # under a second is still billed time
    assert share(10.0, 5.0) == 0.0  # work above the total (a report that rounded) is never a negative share
    assert share(0.0, 5.0) == 1.0
    assert share(1.0, 0.0) is None


def test_what_counts_as_a_report_or_a_number() -> None:
    assert is_run_report({"tasks": [], "total_dollars": 0})
    assert not is_run_report({"tasks": []}) and not is_run_report({"tasks": "x", "total_dollars": 1})
    assert not is_run_report([]) and not is_run_report(None)
    row = {
        "task_id": "t",
        "seconds": {"work": True, "boot": 2.0},
        "dollars": {"work": True, "boot": "1"},
        "total_dollars": 0,
    }
    bill = bill_of("d", "r", 0.0, report={"tasks": [row, "junk"], "total_dollars": 0.0}, costs=[], by=None)
    assert bill is not None and bill.dollars == {} and bill.seconds == {"boot": 2.0}  # booleans and text are no numbers


def test_an_unpriced_row_is_named_by_its_task_else_its_instance() -> None:
    rows = [
        {"task_id": "train", "instance_name": "gpu", "seconds": {}, "total_dollars": None},
        {"instance_name": "gpu2", "seconds": {}, "total_dollars": None},
        {"seconds": {}, "total_dollars": None},
    ]
    bill = bill_of("d", "r", 0.0, report={"tasks": rows, "total_dollars": 0.0}, costs=[], by=None)
    assert bill is not None and bill.unpriced == ("train", "gpu2", "?")


def test_the_reports_own_total_time_and_rounding_are_kept() -> None:
    row = {"task_id": "t", "seconds": {"work": 1.23456}, "dollars": {"work": 0.1234567}, "total_dollars": 0.1234567}
    report = {"tasks": [row], "total_dollars": 0.1234567, "total_seconds": 9.87654}
    bill = bill_of("d", "r", 0.0, report=report, costs=[], by=None)
    assert bill is not None
    assert (bill.dollars, bill.seconds) == ({"work": 0.123457}, {"work": 1.235})
    assert (bill.total_dollars, bill.total_seconds) == (0.123457, 9.877)


def test_only_the_run_cost_key_holds_a_report_and_a_run_without_facts_ran_at_zero() -> None:
    report = run_cost([("t", cost(work=36))])
    assert history(facts(Pushed("d", "r", "t", -1, "return_value", report))) == []
    [dag] = history(facts(Pushed("d", "r", "t", -1, XCOM_RUN_COST, report)))
    assert dag.runs[0].at == 0.0


def test_runs_of_the_same_time_are_ordered_by_run_id() -> None:
    runs = {("d", r): RunFacts("d", r, "success", 1.0) for r in ("b", "a")}
    items = [Pushed("d", r, "t", -1, "brev_cost", cost(work=1)) for r in ("b", "a")]
    assert [bill.run_id for bill in history(facts(*items, runs=runs))[0].runs] == ["a", "b"]
