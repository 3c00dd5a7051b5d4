"""Each DAG run's bill, by phase, for the Brev page's cost history (pure).

A run's bill comes from the report its cost-report task wrote (XCom ``brev_run_cost``,
:func:`~airflow_provider_brev.cost.report.run_cost`): its total is the bill, its rows (``tasks``) give the seconds
and dollars per phase. A run without a report is added up from its tasks' own costs (XCom ``brev_cost``). Phase
names are taken from the data, whatever they are: the known ones (:data:`~airflow_provider_brev.core.cost.PHASES`)
come first in their order, any other in name order after them, so a report that adds a phase shows it. What the
rows' dollars do not account for of the total (beyond their rounding) is :data:`OTHER`.

The non-work share of a run is the part of its seconds not in ``work``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.bill import XCOM_RUN_COST, is_run_report
from airflow_provider_brev.core.cost import PHASES, costs_in
from airflow_provider_brev.core.instances.warm_pool_records import TaskRef

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from airflow_provider_brev.core.ui.facts import PageFacts

#: What of a run's total its rows' dollars do not account for.
OTHER = "other"
#: The least difference between a run's total and its rows' dollars that is shown as :data:`OTHER` (rounding is not).
OTHER_LEAST = 1e-5
WORK = "work"


@dataclass(frozen=True)
class RunBill:
    """What one DAG run cost, by phase.

    :param dag_id: its DAG.
    :param run_id: the run.
    :param at: when it ran (epoch seconds).
    :param dollars: dollars per phase (only phases that cost something).
    :param seconds: seconds per phase.
    :param total_dollars: the run's bill.
    :param total_seconds: its billed seconds.
    :param report: the task that wrote its cost report (``None``: the run has none; the bill is its tasks' sum).
    :param unpriced: tasks whose price is not known (not in the dollars).
    """

    dag_id: str
    run_id: str
    at: float
    dollars: dict[str, float]
    seconds: dict[str, float]
    total_dollars: float
    total_seconds: float
    report: TaskRef | None
    unpriced: tuple[str, ...] = ()

    @property
    def non_work_share(self) -> float | None:
        """The part of the billed seconds that is not ``work`` (``None`` without billed seconds)."""
        if self.total_seconds <= 0:
            return None
        return min(max(1.0 - self.seconds.get(WORK, 0.0) / self.total_seconds, 0.0), 1.0)


@dataclass(frozen=True)
class DagHistory:
    """The bills of one DAG's runs, oldest first, and the phases they use (in display order)."""

    dag_id: str
    runs: list[RunBill]
    phases: list[str]


def phase_order(names: Iterable[str]) -> list[str]:
    """``names`` in display order: the known phases first (in :data:`PHASES` order), then the others by name,
    :data:`OTHER` last."""
    names = set(names)
    known = [p for p in PHASES if p in names]
    rest = sorted(n for n in names if n not in PHASES and n != OTHER)
    return known + rest + ([OTHER] if OTHER in names else [])


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _add(into: dict[str, float], values: Any) -> None:
    if isinstance(values, dict):
        for phase, value in values.items():
            number = _number(value)
            if number is not None and number > 0:
                into[str(phase)] = into.get(str(phase), 0.0) + number


def bill_of(
    dag_id: str, run_id: str, at: float, *, report: Mapping[str, Any] | None, costs: Iterable[Any], by: TaskRef | None
) -> RunBill | None:
    """One run's bill (the module docstring): from ``report`` when there is one, else from ``costs`` (the
    ``brev_cost`` values of its tasks); ``None`` when there is neither.

    :param by: the task that wrote ``report``.
    """
    rows: list[Any] = list(report["tasks"]) if report is not None else [c for v in costs for c in costs_in(v)]
    if report is None and not rows:
        return None
    dollars: dict[str, float] = {}
    seconds: dict[str, float] = {}
    unpriced = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        _add(dollars, row.get("dollars"))
        _add(seconds, row.get("seconds"))
        if row.get("total_dollars") is None:
            unpriced.append(str(row.get("task_id") or row.get("instance_name") or "?"))
    summed = sum(dollars.values())
    total = _number(report.get("total_dollars")) if report is not None else None
    total = summed if total is None else total
    if total - summed > max(OTHER_LEAST, total * 0.001):  # not the rows' own rounding
        dollars[OTHER] = total - summed
    total_seconds = _number(report.get("total_seconds")) if report is not None else None
    return RunBill(
        dag_id=dag_id,
        run_id=run_id,
        at=at,
        dollars={phase: round(value, 6) for phase, value in dollars.items()},
        seconds={phase: round(value, 3) for phase, value in seconds.items()},
        total_dollars=round(total, 6),
        total_seconds=round(sum(seconds.values()) if total_seconds is None else total_seconds, 3),
        report=by if report is not None else None,
        unpriced=tuple(unpriced),
    )


def history(facts: PageFacts, readable: Collection[str] | None = None) -> list[DagHistory]:
    """Every run's bill of the DAGs in ``readable`` (``None``: all of them), per DAG (by DAG id), oldest run first.

    :param facts: what the page is shaped from.
    :param readable: the DAG ids the user may read.
    """
    reports: dict[tuple[str, str], tuple[TaskRef, dict[str, Any]]] = {}
    costs: dict[tuple[str, str], list[Any]] = {}
    for item in facts.pushed:
        if readable is not None and item.dag_id not in readable:
            continue
        run = (item.dag_id, item.run_id)
        if item.key == XCOM_RUN_COST and is_run_report(item.value):
            reports[run] = (TaskRef(item.dag_id, item.run_id, item.task_id, item.map_index), item.value)
        elif item.key == "brev_cost":
            costs.setdefault(run, []).append(item.value)
    bills: dict[str, list[RunBill]] = {}
    for run in dict.fromkeys([*reports, *costs]):
        facts_of_run = facts.runs.get(run)
        at = facts_of_run.at if facts_of_run is not None else 0.0
        by, report = reports.get(run, (None, None))
        bill = bill_of(run[0], run[1], at, report=report, costs=costs.get(run, []), by=by)
        if bill is not None:
            bills.setdefault(run[0], []).append(bill)
    out = []
    for dag_id in sorted(bills):
        runs = sorted(bills[dag_id], key=lambda bill: (bill.at, bill.run_id))
        out.append(DagHistory(dag_id, runs, phase_order(p for bill in runs for p in bill.dollars)))
    return out
