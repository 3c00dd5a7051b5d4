"""The bill of a task that uses an instance without being a step: a readiness wait (``boot``), an S3 transfer
(``stage`` or ``upload``). Its time is billed on the instance at the price the DAG run's record of it gives (its
create task's; unpriced without one), as :class:`~airflow_provider_brev.cost.meter.CostMeter` phases, so the run's
bill (:mod:`airflow_provider_brev.core.bill`) gives it its share instead of leaving it uncovered."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.instances.records import InstanceRecords
from airflow_provider_brev.instances.recovery import upstream_task_ids
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from collections.abc import Iterator


def task_meter(memory: TaskMemory, log: Any, task: Any, name: str, phase: str) -> CostMeter:
    """The cost clock of ``task``'s time on instance ``name``, in ``phase`` from now -- or, for a task resumed after a
    deferral (or a rescheduled poke), the clock it kept.

    :param memory: the task's memory.
    :param log: its logger.
    :param task: the operator (its upstream tasks hold the instance's record).
    :param name: the instance.
    :param phase: what its time is (a phase of :data:`~airflow_provider_brev.core.cost.PHASES`).
    """
    meter = CostMeter(memory, log)
    if meter.started_at is None:
        records = InstanceRecords(memory).named(name, upstream_task_ids(task))
        priced = next((r for r in reversed(records) if r.price_per_hour is not None), None)
        instance_type = str(priced.spec.get("instance_type") or "") if priced is not None else ""
        meter.bill_on(name, instance_type, priced.price_per_hour if priced is not None else None)
        meter.begin()
        meter.start(phase, at=meter.started_at)
    return meter


@contextlib.contextmanager
def metered(context: Any, log: Any, task: Any, name: str, phase: str) -> Iterator[CostMeter | None]:
    """Bill the block as ``phase`` on instance ``name`` (:func:`task_meter`) and report ``brev_cost`` after it, also
    when it fails; nothing is billed outside a task instance (an operator's ``execute`` called without ``ti``)."""
    if not context or context.get("ti") is None:
        yield None
        return
    meter = task_meter(TaskMemory(context, log), log, task, name, phase)
    try:
        yield meter
    finally:
        meter.report()
