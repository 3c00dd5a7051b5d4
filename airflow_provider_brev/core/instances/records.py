"""What a DAG run recorded about the instances it created.

A record (:class:`InstanceRecord`) names an instance *and its Brev id*: a name can be freed and taken by someone
else, an id cannot (:mod:`airflow_provider_brev.core.instances.identity`). Records go to XCom under ``brev_instance``
(:class:`~airflow_provider_brev.instances.records.InstanceRecords` writes and reads them):

* a :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator` pushes the record of the instance it
  created or adopted (with the spec to re-create it);
* a step that re-creates a lost instance (:mod:`airflow_provider_brev.instances.recovery`) or creates its own
  (ephemeral mode) pushes the records of what it created, so the teardown and later steps know the new id.

A task's own record also goes to its task state store (Airflow 3.3+, shared by every try): XCom is cleared when a
task retries, so a retry puts it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass(frozen=True)
class InstanceRecord:
    """What a task recorded about an instance it created or adopted (XCom key ``brev_instance``).

    :param name: the instance name.
    :param id: Brev's id of the instance, as ``brev ls`` listed it right after creation (or adoption).
    :param owned: the provider created it for this DAG run: its teardown and failure cleanup may delete it.
    :param adopted: the task used an instance it did not create (``adopt_existing=True``); never deleted.
    :param spec: what re-creates the same instance: ``gpu``, ``instance_types``, ``min_vram``, ``cloud_cred_id``,
        ``workspace_group_id``, ``require_docker``, ``max_price_per_hour``, ``brev_conn_id`` and ``instance_type``
        (the type Brev placed it on).
    :param price_per_hour: the price of that type (``brev search``), when known: a later step on the instance
        prices its own time with it (:mod:`airflow_provider_brev.core.cost`).
    :param created_at: when ``brev create`` was called for it (epoch seconds), when known.
    :param ready_at: when it was ready (epoch seconds), when known.
    """

    name: str
    id: str
    owned: bool
    adopted: bool
    spec: dict[str, Any] = field(default_factory=dict)
    price_per_hour: float | None = None
    created_at: float | None = None
    ready_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        value = {
            "name": self.name,
            "id": self.id,
            "owned": self.owned,
            "adopted": self.adopted,
            "spec": dict(self.spec),
        }
        for key in _BILLING_KEYS:
            if getattr(self, key) is not None:
                value[key] = getattr(self, key)
        return value

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
            **{key: _number(value.get(key)) for key in _BILLING_KEYS},
        )


#: The optional billing fields of a record (absent from older records).
_BILLING_KEYS = ("price_per_hour", "created_at", "ready_at")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def records_in(value: Any) -> list[InstanceRecord]:
    """The records in an XCom value: one record, a step's list of them, or a mapped task's list of either."""
    if isinstance(value, list | tuple):
        return [record for item in value for record in records_in(item)]
    record = InstanceRecord.from_dict(value)
    return [record] if record is not None else []


def recorded_ids(records: Iterable[InstanceRecord], *, owned_only: bool = False) -> set[str]:
    """The instance ids of ``records`` (only those the DAG run owns, with ``owned_only``)."""
    return {record.id for record in records if record.id and (record.owned or not owned_only)}
