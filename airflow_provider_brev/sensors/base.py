"""Base class of the Brev sensors, and the bill of a readiness wait."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import BaseSensorOperator
from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.instances.records import InstanceRecords
from airflow_provider_brev.instances.recovery import upstream_task_ids
from airflow_provider_brev.utils.mixins import BrevConnectionParams
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from airflow.sdk import Context


class BrevBaseSensor(BrevConnectionParams, BaseSensorOperator):
    """Base of every Brev sensor: the Brev connection (:class:`~airflow_provider_brev.utils.mixins.BrevConnectionParams`:
    ``brev_conn_id``, templated, and a lazily built ``hook``)."""

    ui_color = "#76b900"

    def boot_meter(self, context: Context, name: str) -> CostMeter:
        """The cost clock of a wait for instance ``name``: the instance bills while it boots, so the wait is its
        ``boot`` (priced from the DAG run's record of it, e.g. its create task's; unpriced without one), from now --
        or from when a resumed try began."""
        memory = TaskMemory(context, self.log)
        meter = CostMeter(memory, self.log)
        if meter.started_at is None:
            records = InstanceRecords(memory).named(name, upstream_task_ids(self))
            priced = next((r for r in reversed(records) if r.price_per_hour is not None), None)
            instance_type = str(priced.spec.get("instance_type") or "") if priced is not None else ""
            meter.bill_on(name, instance_type, priced.price_per_hour if priced is not None else None)
            meter.begin()
            meter.start("boot", at=meter.started_at)
        return meter

    def report_boot(self, context: Context, event: dict[str, Any] | None) -> None:
        """A deferred wait resumed: its ``boot`` ended when the trigger saw the instance ready (or failed), the rest is
        ``resume``; report ``brev_cost``."""
        meter = CostMeter(TaskMemory(context, self.log), self.log)
        meter.resumed("boot", (event or {}).get("ended_at"))
        meter.report()
