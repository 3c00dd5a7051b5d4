"""The instance records a task keeps and tells, and the instance it runs on: the instances' facts in the task memory.

:class:`InstanceRecords` reads and writes them through the task's
:class:`~airflow_provider_brev.utils.task_memory.TaskMemory`; what a record holds and how it is read from any XCom
value is :mod:`airflow_provider_brev.core.instances.records`. A task's own record is *kept* (the task state store on
Airflow 3.3+, for its retries, and XCom ``brev_instance``); later tasks read it from XCom
(:func:`read_instance_record` in a DAG's own task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.records import InstanceRecord, records_in
from airflow_provider_brev.utils.task_memory import MemoryAccessor, TaskMemory

if TYPE_CHECKING:
    from collections.abc import Iterable

#: XCom key of the instance a task runs on (its name).
XCOM_INSTANCE_NAME = "instance_name"
#: XCom key of the instance the create task made, as ``brev ls`` listed it.
XCOM_INSTANCE = "instance"
#: XCom key (and state store key) of the records of the instances a task created
#: (:class:`~airflow_provider_brev.core.instances.records.InstanceRecord`: a create task one, a step a list).
XCOM_INSTANCE_RECORD = "brev_instance"
STATE_STORE_INSTANCE_KEY = XCOM_INSTANCE_RECORD


class InstanceRecords(MemoryAccessor):
    """The instance records of a DAG run as one task reads and writes them (see the module docstring)."""

    def of(self, task_id: str) -> list[InstanceRecord]:
        """Every instance record ``task_id`` pushed in this DAG run (one per map index, a step's list)."""
        return [
            record for _, value in self.memory.read_of(XCOM_INSTANCE_RECORD, [task_id]) for record in records_in(value)
        ]

    def named(self, name: str, task_ids: Iterable[str]) -> list[InstanceRecord]:
        """Every record of instance ``name`` pushed by ``task_ids`` and this task, plus this task's kept one."""
        records: list[InstanceRecord] = []
        for task_id in dict.fromkeys([*task_ids, self.memory.task_id]):
            records += self.of(task_id)
        stored = self.stored()
        if stored is not None:
            records.append(stored)
        return [record for record in records if record.name == name]

    def stored(self) -> InstanceRecord | None:
        """The record an earlier try of this task kept in its state store, or ``None``."""
        return InstanceRecord.from_dict(self.memory.stored(STATE_STORE_INSTANCE_KEY))

    def own(self) -> InstanceRecord | None:
        """The record this task told later tasks (a create task's), or ``None``."""
        records = self.of(self.memory.task_id)
        return records[0] if len(records) == 1 else None

    def record(self, record: InstanceRecord, *, alone: bool = False) -> None:
        """Remember that this task created (or adopted) ``record``'s instance: kept for its retries, told to later
        tasks. ``alone``: the task's only record (a create task), else added to its list (a step's re-creations)."""
        self.memory.remember(
            STATE_STORE_INSTANCE_KEY,
            record.to_dict(),
            failure=f"Could not record instance {record.name} in the task state store",
        )
        if alone:
            self.tell(record)
            return
        mine = [r for r in self.of(self.memory.task_id) if r.id != record.id]
        self.memory.tell(XCOM_INSTANCE_RECORD, [r.to_dict() for r in mine] + [record.to_dict()])

    def tell(self, record: InstanceRecord) -> None:
        """Tell later tasks this task's only record (a create task's; again when it changes: its ready time)."""
        self.memory.tell(XCOM_INSTANCE_RECORD, record.to_dict())

    def tell_instance(self, name: str, listed: dict[str, Any] | None = None) -> None:
        """Tell later tasks the instance this task runs on (and, for a create task, how ``brev ls`` listed it)."""
        self.memory.tell(XCOM_INSTANCE_NAME, name)
        if listed is not None:
            self.memory.tell(XCOM_INSTANCE, listed)


def read_instance_records(context: Any, create_task_id: str) -> list[InstanceRecord]:
    """Every record the task ``create_task_id`` pushed in this DAG run (one per map index, a step's list).

    :param context: the calling task's context.
    :param create_task_id: the task that recorded them.
    """
    return InstanceRecords(TaskMemory(context)).of(create_task_id)


def read_instance_record(context: Any, create_task_id: str, instance_name: str | None = None) -> InstanceRecord | None:
    """The record of the instance the create task ``create_task_id`` made (or adopted) in this DAG run.

    :param context: the calling task's context.
    :param create_task_id: task id of the :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator`.
    :param instance_name: pick the record of this instance (a mapped create task pushes one per map index).
    :return: the record, or ``None`` when the task recorded none (it failed before creating anything, or it ran
        with a provider version that did not record).
    """
    records = read_instance_records(context, create_task_id)
    if instance_name is not None:
        records = [r for r in records if r.name == instance_name]
    return records[0] if records else None
