"""What tasks tell of their cost, and a step's cost clock, in the task memory.

A step or create task tells ``brev_cost`` (:func:`~airflow_provider_brev.core.cost.step_cost`) and its clock,
``brev_cost_clock``, while it runs (its phases so far, wall-clock starts: it survives deferrals, not retries); a
delete task tells ``brev_lifetime_cost`` (:func:`~airflow_provider_brev.core.cost.lifetime_cost`). A later task
reads them all for its DAG run (:func:`~airflow_provider_brev.cost.report.run_cost`, the delete task's warm-reuse
verdict); the task that reports the run's cost keeps its report, ``brev_run_cost``. Every value is told (XCom
only): a retry measures its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.bill import XCOM_RUN_COST
from airflow_provider_brev.core.cost import costs_in
from airflow_provider_brev.utils.task_memory import MemoryAccessor

if TYPE_CHECKING:
    from collections.abc import Iterable


#: XCom key of what a step or create task cost (:func:`~airflow_provider_brev.core.cost.step_cost`).
XCOM_COST = "brev_cost"
#: XCom key of a step's cost clock while it runs (its phases so far, wall-clock starts: it survives deferrals).
XCOM_COST_CLOCK = "brev_cost_clock"
#: XCom key of an instance's lifetime cost, reported by the delete task.
XCOM_LIFETIME_COST = "brev_lifetime_cost"


class CostLedger(MemoryAccessor):
    """The costs of a DAG run as one task reads and writes them (see the module docstring)."""

    def clock(self) -> dict[str, Any] | None:
        """This try's cost clock (told across its deferrals), or ``None`` before it started."""
        return self.memory.read(XCOM_COST_CLOCK, dict)

    def tell_clock(self, clock: dict[str, Any]) -> None:
        self.memory.tell(XCOM_COST_CLOCK, clock)

    def tell_cost(self, cost: dict[str, Any]) -> None:
        self.memory.tell(XCOM_COST, cost)

    def tell_lifetime(self, cost: dict[str, Any]) -> None:
        self.memory.tell(XCOM_LIFETIME_COST, cost)

    def tell_run(self, report: dict[str, Any]) -> None:
        """Keep the DAG run's cost report under :data:`XCOM_RUN_COST` (found by the Brev page, whatever the task's
        id or return value)."""
        self.memory.tell(XCOM_RUN_COST, report)

    def costs_of(self, task_ids: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
        """``(task id, cost)`` of every task in ``task_ids`` that reported one in this DAG run (one per map index)."""
        return [
            (task_id, cost) for task_id, value in self.memory.read_of(XCOM_COST, task_ids) for cost in costs_in(value)
        ]

    def lifetimes_of(self, task_ids: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
        """``(task id, lifetime)`` of every delete task in ``task_ids`` that reported an instance's lifetime."""
        found = []
        for task_id, value in self.memory.read_of(XCOM_LIFETIME_COST, task_ids):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict) and "total_seconds" in item:
                    found.append((task_id, item))
        return found
