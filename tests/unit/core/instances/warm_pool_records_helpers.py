"""Test helpers shared by ``core/instances/test_warm_pool_records.py``, ``core/protocol/test_output.py`` (one
definition, imported by each)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_provider_brev.core.instances.warm_pool import ReuseEntry
from airflow_provider_brev.core.instances.warm_pool_records import TaskRef
from airflow_provider_brev.core.protocol.names import managed_instance_name
from airflow_provider_brev.core.protocol.output import BrevInstance

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


CREATOR = TaskRef("weekly", "scheduled__2026-05-01", "create")


def managed(expires_in_hours: float, task: TaskRef = CREATOR, prefix: str = "afbrev") -> str:
    return managed_instance_name(
        dag_id=task.dag_id,
        run_id=task.run_id,
        task_id=task.task_id,
        map_index=task.map_index,
        expires_at=NOW + timedelta(hours=expires_in_hours),
        prefix=prefix,
    )


OURS = BrevInstance(name=managed(-2), id="i-warm", status="STOPPED")


HOLDER = TaskRef("weekly", "scheduled__2026-05-08", "create")


def entry_for(instance: BrevInstance, **fields) -> ReuseEntry:
    values = {"key": "weekly", "id": instance.id, "name": instance.name, "created_by": CREATOR.text, **fields}
    return ReuseEntry(**values)
