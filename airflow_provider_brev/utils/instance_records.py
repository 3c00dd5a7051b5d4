"""What a DAG run recorded about the instances it created: the records, and who may read them.

A record (:class:`InstanceRecord`) names an instance *and its Brev id*: a name can be freed and taken by someone
else, an id cannot (:mod:`airflow_provider_brev.cli.identity`). Records go to XCom under ``brev_instance``:

* a :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator` pushes the record of the instance it
  created or adopted (with the spec to re-create it);
* a step that re-creates a lost instance (:mod:`airflow_provider_brev.utils.recovery`) or creates its own
  (ephemeral mode) pushes the records of what it created (:func:`publish_record`), so the teardown and later steps
  know the new id.

A task's own records also go to its task state store (Airflow 3.3+, shared by every try): XCom is cleared when a
task retries, so a retry puts them back (:func:`republish_records`). :func:`records_for` gathers every record of
one name that a set of tasks (usually a task's upstream) and this task's own store hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

#: XCom key of a task's :class:`InstanceRecord` (a create task: one; a step: the list of what it created).
XCOM_INSTANCE_RECORD = "brev_instance"
#: Task state store key (Airflow 3.3+) under which a task records the instance it created last.
STATE_STORE_INSTANCE_KEY = "brev_instance"


@dataclass(frozen=True)
class InstanceRecord:
    """What a task recorded about an instance it created or adopted (XCom key ``brev_instance``).

    :param name: the instance name.
    :param id: Brev's id of the instance, as ``brev ls`` listed it right after creation (or adoption).
    :param owned: the provider created it for this DAG run: its teardown and failure cleanup may delete it.
    :param adopted: the task used an instance it did not create (``adopt_existing=True``); never deleted.
    :param spec: what re-creates the same instance: ``gpu``, ``instance_types``, ``min_vram``, ``cloud_cred_id``,
        ``workspace_group_id``, ``require_docker``, ``brev_conn_id`` and ``instance_type`` (the type Brev placed it
        on).
    """

    name: str
    id: str
    owned: bool
    adopted: bool
    spec: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.id, "owned": self.owned, "adopted": self.adopted, "spec": dict(self.spec)}

    @classmethod
    def from_dict(cls, value: Any) -> InstanceRecord | None:
        """The record in ``value`` (an XCom or state-store value), or ``None`` if it is not one."""
        if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
            return None
        spec = value.get("spec")
        return cls(
            name=value["name"],
            id=str(value.get("id") or ""),
            owned=value.get("owned") is True,
            adopted=value.get("adopted") is True,
            spec=dict(spec) if isinstance(spec, dict) else {},
        )


def records_in(value: Any) -> list[InstanceRecord]:
    """The records in an XCom value: one record, a step's list of them, or a mapped task's list of either."""
    if isinstance(value, list | tuple):
        return [record for item in value for record in records_in(item)]
    record = InstanceRecord.from_dict(value)
    return [record] if record is not None else []


def read_instance_records(context: Any, create_task_id: str) -> list[InstanceRecord]:
    """Every record the task ``create_task_id`` pushed in this DAG run (one per map index, a step's list)."""
    return records_in(context["ti"].xcom_pull(task_ids=create_task_id, key=XCOM_INSTANCE_RECORD))


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


def task_state_store(context: Any) -> Any | None:
    """The Airflow 3.3+ task state store (shared by every try of the task instance), or ``None``."""
    return context.get("task_state_store") if hasattr(context, "get") else None


def stored_record(context: Any) -> InstanceRecord | None:
    """The record this task's own state store holds (an earlier try's creation), or ``None``."""
    store = task_state_store(context)
    if store is None:
        return None
    try:
        return InstanceRecord.from_dict(store.get(STATE_STORE_INSTANCE_KEY))
    except Exception:
        return None


def records_for(context: Any, name: str, task_ids: Iterable[str]) -> list[InstanceRecord]:
    """Every record of instance ``name`` pushed by ``task_ids`` (and this task) in this DAG run, plus the one in
    this task's own state store; unreadable values count as none."""
    ti = context["ti"]
    records: list[InstanceRecord] = []
    for task_id in dict.fromkeys([*task_ids, ti.task_id]):
        try:
            records += read_instance_records(context, task_id)
        except Exception:
            continue
    stored = stored_record(context)
    if stored is not None:
        records.append(stored)
    return [record for record in records if record.name == name]


def recorded_ids(records: Iterable[InstanceRecord], *, owned_only: bool = False) -> set[str]:
    """The instance ids of ``records`` (only those the DAG run owns, with ``owned_only``)."""
    return {record.id for record in records if record.id and (record.owned or not owned_only)}


def publish_record(context: Any, record: InstanceRecord, log: Any) -> None:
    """Add ``record`` to this task's records: its XCom list (read by the teardown and later steps) and its task
    state store (read by its retries). Failures are logged, never raised."""
    ti = context["ti"]
    try:
        mine = read_instance_records(context, ti.task_id)
    except Exception:
        mine = []
    values = [r.to_dict() for r in mine if r.id != record.id] + [record.to_dict()]
    try:
        ti.xcom_push(key=XCOM_INSTANCE_RECORD, value=values)
    except Exception:
        log.warning("Could not record instance %s (id %s) in XCom.", record.name, record.id, exc_info=True)
    store = task_state_store(context)
    if store is None:
        return
    try:
        store.set(STATE_STORE_INSTANCE_KEY, record.to_dict())
    except Exception as err:
        log.warning("Could not record instance %s in the task state store (%s).", record.name, err)


def republish_records(context: Any, log: Any) -> InstanceRecord | None:
    """On a retry (XCom cleared), put the record an earlier try of this task kept in its state store back into XCom
    (unless the task is the create task that pushes it anyway); returns it."""
    stored = stored_record(context)
    if stored is not None:
        publish_record(context, stored, log)
    return stored
