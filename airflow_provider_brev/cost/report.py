"""What a DAG run cost: every task's ``brev_cost`` in one table, for a final task of the DAG.

Each step and create task pushes XCom ``brev_cost`` (:func:`~airflow_provider_brev.core.cost.step_cost`:
instance type, ``price_per_hour``, seconds and dollars per phase, the total); a delete task pushes
``brev_lifetime_cost`` (the instance's whole life: :func:`report_lifetime`). :func:`run_cost` reads them all for the
calling task's DAG run (through :class:`~airflow_provider_brev.cost.ledger.CostLedger`) and logs the table::

    @task(trigger_rule="all_done")
    def report_cost(ti=None) -> dict:
        return run_cost(ti)
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import cost_table, lifetime_cost, money
from airflow_provider_brev.core.cost import run_cost as price_run
from airflow_provider_brev.cost.ledger import CostLedger
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_brev.core.instances.records import InstanceRecord

__all__ = ["report_lifetime", "run_cost"]


def report_lifetime(memory: TaskMemory, log: Any, records: Sequence[InstanceRecord], instance_id: str | None) -> None:
    """The deleted instance's whole life, ``brev create`` to now, priced (XCom ``brev_lifetime_cost``) and logged, when
    a record of ``instance_id`` says when it was created and at what price (no ``brev`` call).

    :param memory: the delete task's memory.
    :param log: its logger.
    :param records: the DAG run's records of the instance, oldest first.
    :param instance_id: the id that was deleted (``None``: nothing was).
    """
    record = next((r for r in reversed(records) if r.id == instance_id and r.created_at is not None), None)
    if record is None or record.created_at is None or instance_id is None:
        return
    cost = lifetime_cost(
        instance_name=record.name,
        instance_type=str(record.spec.get("instance_type") or ""),
        price_per_hour=record.price_per_hour,
        created_at=float(record.created_at),
        ended_at=time.time(),
    )
    CostLedger(memory).tell_lifetime(cost)
    log.info(
        "Instance %s lived %.1f s (brev create to brev delete): %s.",
        *(record.name, cost["total_seconds"], money(cost["total_dollars"])),
    )


def run_cost(ti_or_context: Any, *, task_ids: list[str] | None = None, log: Any = None) -> dict[str, Any]:
    """The DAG run's cost so far: every task's ``brev_cost``, in the DAG's task order, as a report and a table.

    :param ti_or_context: the calling task's ``ti`` (or its context).
    :param task_ids: the tasks to include (default: every task of the DAG).
    :param log: where the table is logged (default: the calling task's logger, i.e. its task log).
    :return: the report of :func:`~airflow_provider_brev.core.cost.run_cost` (``tasks``, ``seconds`` per
        phase, ``total_seconds``, ``total_dollars``, ``unpriced``, ``lifetimes``) plus ``table``, the text table.
        JSON-serialisable: return it from the task to keep it in XCom.
    """
    context = ti_or_context if isinstance(ti_or_context, dict) or hasattr(ti_or_context, "keys") else None
    ti = context["ti"] if context is not None else ti_or_context
    task = getattr(ti, "task", None)
    log = log or getattr(task, "log", None) or logging.getLogger(__name__)
    ledger = CostLedger(TaskMemory({"ti": ti}, log))
    if task_ids is None:
        dag = getattr(task, "dag", None)
        task_ids = [t for t in (dag.task_ids if dag is not None else []) if t != ti.task_id]
    report = price_run(ledger.costs_of(task_ids), ledger.lifetimes_of(task_ids))
    report["table"] = cost_table(report)
    ledger.tell_run(report)
    log.info("What this DAG run cost (brev_cost of every task):\n%s", report["table"])
    return report
