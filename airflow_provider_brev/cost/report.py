"""What a DAG run cost: the bill, split into every task's phases, in one table, for a final task of the DAG.

Each step, create task and readiness sensor pushes XCom ``brev_cost`` (:func:`~airflow_provider_brev.core.cost.step_cost`:
instance type, ``price_per_hour``, seconds and dollars per phase, the total, its window and the spans of its phases);
a delete task pushes ``brev_lifetime_cost`` (the instance's billed window, ``brev create`` or ``brev start`` to the
delete or stop request: :func:`report_lifetime`). :func:`run_cost` reads them all for the calling task's DAG run
(through :class:`~airflow_provider_brev.cost.ledger.CostLedger`), splits the bill
(:func:`~airflow_provider_brev.core.bill.run_cost`) and logs it, the bill first::

    @task(trigger_rule="all_done")
    def report_cost(ti=None) -> dict:
        return run_cost(ti)
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.bill import cost_table
from airflow_provider_brev.core.bill import run_cost as price_run
from airflow_provider_brev.core.cost import lifetime_cost, money
from airflow_provider_brev.cost.ledger import CostLedger
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_brev.core.instances.records import InstanceRecord

__all__ = ["report_lifetime", "run_cost"]


def report_lifetime(
    memory: TaskMemory,
    log: Any,
    records: Sequence[InstanceRecord],
    instance_id: str | None,
    *,
    ended_at: float | None = None,
    stopped: bool = False,
) -> None:
    """The released instance's billed window in this run, ``brev create`` (or ``brev start``) to the delete (or
    stop) request, priced (XCom ``brev_lifetime_cost``) and logged, when a record of its id says when it was
    created or started and at what price (no ``brev`` call); nothing when it was left alone.

    :param memory: the teardown task's memory.
    :param log: its logger.
    :param records: the DAG run's records of the instance, oldest first.
    :param instance_id: the id that was deleted or stopped (``None``: nothing was).
    :param ended_at: when the deletion or stop was requested (default: now).
    :param stopped: it was stopped (for warm reuse), not deleted.
    """
    record = next((r for r in reversed(records) if r.id == instance_id and r.created_at is not None), None)
    if record is None or record.created_at is None or instance_id is None:
        return
    ended_by = "stop" if stopped else "delete"
    cost = lifetime_cost(
        instance_name=record.name,
        instance_type=str(record.spec.get("instance_type") or ""),
        price_per_hour=record.price_per_hour,
        created_at=float(record.created_at),
        ended_at=ended_at if ended_at is not None else time.time(),
        ended_by=ended_by,
    )
    CostLedger(memory).tell_lifetime(cost)
    log.info(
        "Instance %s billed %.1f s in this run (brev %s to brev %s): %s.",
        *(record.name, cost["total_seconds"], "start/create" if stopped else "create", ended_by),
        money(cost["total_dollars"]),
    )


def run_cost(ti_or_context: Any, *, task_ids: list[str] | None = None, log: Any = None) -> dict[str, Any]:
    """The DAG run's cost so far: every task's ``brev_cost``, in the DAG's task order, as a report and a table.

    :param ti_or_context: the calling task's ``ti`` (or its context).
    :param task_ids: the tasks to include (default: every task of the DAG).
    :param log: where the table is logged (default: the calling task's logger, i.e. its task log).
    :return: the report of :func:`~airflow_provider_brev.core.bill.run_cost` (``bill``, ``tasks``, ``seconds``
        per phase, ``total_seconds`` and ``total_dollars`` -- the bill's --, ``unpriced``, ``lifetimes``) plus
        ``table``, the text table.
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
    log.info("What this DAG run cost, the bill first:\n%s", report["table"])
    return report
