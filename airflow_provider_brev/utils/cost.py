"""``run_cost``'s public home for DAG files (``from airflow_provider_brev.utils.cost import run_cost``; it lives in
:mod:`airflow_provider_brev.cost.report`), and :data:`cost_report`, the task that reports a DAG run's bill."""

from __future__ import annotations

from typing import Any

from airflow.sdk import task

from airflow_provider_brev.cost.report import run_cost

__all__ = ["cost_report", "run_cost"]


def _cost_report(ti: Any = None) -> dict[str, Any]:
    """What this DAG run cost: the bill first (every instance's billed time), then each task's share of it by
    phase; the total is the bill."""
    return run_cost(ti)


#: The last task of a DAG that rents compute: ``[teardowns...] >> cost_report()`` (task id ``cost_report``; it runs
#: whatever became of the others, and its log and XCom hold the run's bill, :func:`run_cost`).
cost_report = task(task_id="cost_report", trigger_rule="all_done", multiple_outputs=False)(_cost_report)
