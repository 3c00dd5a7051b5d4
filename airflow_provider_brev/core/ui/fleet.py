"""The fleet and the warm pool as the Brev page shows them (pure).

**Fleet**: every instance a DAG run recorded (XCom ``brev_instance``,
:mod:`airflow_provider_brev.core.instances.records`) that is not yet released. Of the records of one name in one run
the newest counts (a recovery re-creates a lost instance under the same name); it is released when

* the run's teardown reported its lifetime (XCom ``brev_lifetime_cost`` of that name, ended after it was created);
* it was a step's own (ephemeral) instance -- recorded by a step (a list) under a name no create task of the run
  recorded -- and that task instance has finished (its release ran in a ``finally``);
* a warm-reuse record says it is stopped (then it belongs to the warm pool);
* ``brev ls`` could be run and does not list its id (deleted: by the janitor, by hand).

Each row has its DAG, run and task, type, state (``brev ls``'s, else what the records say), age, $/h and $ so far
(price x age), id and expiry (from its managed name). A row whose run has finished without releasing it is flagged.

**Warm pool**: the warm-reuse records in state ``stopped``, per reuse key: the disk's $/h and what it cost so far,
the idle time, what ``max_idle`` leaves before the janitor deletes it, and the break-even the teardown that stopped
it logged.

A row is shown only when the user may read its DAG (``readable``; ``None``: every DAG).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.core.instances.records import InstanceRecord, records_in
from airflow_provider_brev.core.instances.warm_pool import STATE_STOPPED
from airflow_provider_brev.core.instances.warm_pool_records import TaskRef
from airflow_provider_brev.core.protocol.names import parse_managed_name
from airflow_provider_brev.core.ui.facts import FINISHED_RUN_STATES, FINISHED_TASK_STATES

if TYPE_CHECKING:
    from collections.abc import Collection

    from airflow_provider_brev.core.instances.warm_pool import ReuseEntry
    from airflow_provider_brev.core.ui.facts import PageFacts, Pushed

_HOUR = 3600.0


@dataclass(frozen=True)
class FleetRow:
    """One instance that bills (or may): see the module docstring.

    :param dag_id: the DAG whose run recorded it.
    :param run_id: that run.
    :param task_id: the task that recorded it.
    :param map_index: its map index.
    :param name: the instance name.
    :param id: Brev's id of it.
    :param instance_type: its type.
    :param state: ``brev ls``'s status, else ``recorded``.
    :param created_at: when ``brev create`` was called (epoch seconds), when known.
    :param age_seconds: how long it has existed, when known.
    :param price_per_hour: its price, when known.
    :param dollars: price x age, when both are known.
    :param expires_at: the expiry its managed name carries (epoch seconds), when it is one.
    :param orphaned: its run finished without releasing it (a failed teardown, or none).
    :param adopted: the run adopted it (``adopt_existing``): never deleted by the provider.
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    name: str
    id: str
    instance_type: str
    state: str
    created_at: float | None
    age_seconds: float | None
    price_per_hour: float | None
    dollars: float | None
    expires_at: float | None
    orphaned: bool
    adopted: bool


@dataclass(frozen=True)
class WarmRow:
    """One stopped instance kept for warm reuse.

    :param key: its reuse key.
    :param name: the instance.
    :param id: its id.
    :param instance_type: its type.
    :param dag_id: the DAG that last held it (else the one that created it; ``""``: the record names none).
    :param state: ``brev ls``'s status, else ``stopped`` (the record's).
    :param idle_seconds: how long it has been stopped.
    :param left_seconds: what ``max_idle`` leaves before the janitor deletes it (0 once passed).
    :param disk_price_per_hour: the stopped disk's $/h, when recorded.
    :param disk_dollars: what the disk cost while stopped, when its price is recorded.
    :param break_even: the break-even the teardown that stopped it logged (``""``: not recorded).
    """

    key: str
    name: str
    id: str
    instance_type: str
    dag_id: str
    state: str
    idle_seconds: float
    left_seconds: float
    disk_price_per_hour: float | None
    disk_dollars: float | None
    break_even: str


@dataclass(frozen=True)
class Fleet:
    """The fleet and the warm pool of one page.

    :param rows: the instances not yet released, oldest first.
    :param warm: the stopped instances, by reuse key, then longest idle first.
    :param gone: records of instances ``brev ls`` no longer lists (released outside their DAG), not shown.
    """

    rows: list[FleetRow]
    warm: list[WarmRow]
    gone: int


@dataclass(frozen=True)
class _Recorded:
    ref: TaskRef
    record: InstanceRecord
    by_step: bool
    order: int


def _recorded(pushed: list[Pushed]) -> dict[tuple[str, str, str], list[_Recorded]]:
    """The records of each ``(dag_id, run_id, name)``, in the order they were read."""
    found: dict[tuple[str, str, str], list[_Recorded]] = {}
    for item in pushed:
        if item.key != "brev_instance":
            continue
        by_step = isinstance(item.value, list | tuple)
        for record in records_in(item.value):
            ref = TaskRef(item.dag_id, item.run_id, item.task_id, item.map_index)
            records = found.setdefault((item.dag_id, item.run_id, record.name), [])
            records.append(_Recorded(ref, record, by_step, len(records)))
    return found


def _ended(pushed: list[Pushed]) -> dict[tuple[str, str, str], float]:
    """When each ``(dag_id, run_id, instance name)`` was released by its run's teardown (its lifetime's end)."""
    ended: dict[tuple[str, str, str], float] = {}
    for item in pushed:
        if item.key != "brev_lifetime_cost":
            continue
        for life in item.value if isinstance(item.value, list) else [item.value]:
            if not isinstance(life, dict) or not isinstance(life.get("instance_name"), str):
                continue
            end = life.get("ended_at", life.get("deleted_at"))
            key = (item.dag_id, item.run_id, life["instance_name"])
            ended[key] = max(ended.get(key, 0.0), float(end) if isinstance(end, int | float) else 0.0)
    return ended


def _newest(records: list[_Recorded]) -> _Recorded:
    return max(records, key=lambda r: (r.record.created_at or float("-inf"), r.order))


def _expiry(name: str) -> float | None:
    managed = parse_managed_name(name)
    return managed.expires_at.timestamp() if managed is not None else None


def fleet(facts: PageFacts, readable: Collection[str] | None = None) -> Fleet:
    """The fleet and the warm pool (the module docstring) of the DAGs in ``readable`` (``None``: all of them).

    :param facts: what the page is shaped from.
    :param readable: the DAG ids the user may read.
    """
    stopped = {entry.id for entry in facts.warm if entry.state == STATE_STOPPED}
    ended = _ended(facts.pushed)
    rows: list[FleetRow] = []
    gone = 0
    for (dag_id, run_id, name), records in _recorded(facts.pushed).items():
        if readable is not None and dag_id not in readable:
            continue
        newest = _newest(records)
        record = newest.record
        created = record.created_at
        if (dag_id, run_id, name) in ended and ended[(dag_id, run_id, name)] >= (created or 0.0):
            continue
        ephemeral = all(r.by_step for r in records)
        state = facts.task_states.get((dag_id, run_id, newest.ref.task_id, newest.ref.map_index), "")
        if ephemeral and state in FINISHED_TASK_STATES:
            continue
        if record.id and record.id in stopped:
            continue
        live = facts.live.get(record.id) if facts.live is not None else None
        if facts.live is not None and live is None:
            gone += 1
            continue
        rows.append(_row(facts, newest, record, live.status if live else "", live.instance_type if live else ""))
    rows.sort(key=lambda row: (row.created_at or 0.0, row.dag_id, row.run_id, row.name))
    return Fleet(rows, warm_pool(facts, readable), gone)


def _row(facts: PageFacts, newest: _Recorded, record: InstanceRecord, status: str, live_type: str) -> FleetRow:
    created = record.created_at
    age = max(facts.now - created, 0.0) if created is not None else None
    price = record.price_per_hour
    run = facts.runs.get((newest.ref.dag_id, newest.ref.run_id))
    return FleetRow(
        dag_id=newest.ref.dag_id,
        run_id=newest.ref.run_id,
        task_id=newest.ref.task_id,
        map_index=newest.ref.map_index,
        name=record.name,
        id=record.id,
        instance_type=live_type or str(record.spec.get("instance_type") or ""),
        state=status or "recorded",
        created_at=created,
        age_seconds=age,
        price_per_hour=price,
        dollars=round(price * age / _HOUR, 6) if price is not None and age is not None else None,
        expires_at=_expiry(record.name),
        orphaned=run is not None and run.state in FINISHED_RUN_STATES,
        adopted=record.adopted,
    )


def entry_dag(entry: ReuseEntry) -> str:
    """The DAG a warm-reuse record belongs to: the one that last held it, else the one that created it."""
    for text in (entry.claimed_by, entry.created_by):
        ref = TaskRef.parse(text) if text else None
        if ref is not None:
            return ref.dag_id
    return ""


def warm_pool(facts: PageFacts, readable: Collection[str] | None = None) -> list[WarmRow]:
    """The stopped instances of the warm pool whose DAG the user may read (a record naming no DAG is shown only
    to a user who may read every DAG)."""
    rows = []
    for entry in facts.warm:
        dag_id = entry_dag(entry)
        if entry.state != STATE_STOPPED or (readable is not None and dag_id not in readable):
            continue
        live = facts.live.get(entry.id) if facts.live is not None else None
        idle = max(facts.now - entry.since, 0.0)
        disk = entry.disk_price_per_hour
        rows.append(
            WarmRow(
                key=entry.key,
                name=entry.name,
                id=entry.id,
                instance_type=entry.instance_type,
                dag_id=dag_id,
                state=live.status if live is not None else ("not listed" if facts.live is not None else "stopped"),
                idle_seconds=idle,
                left_seconds=max(entry.since + entry.max_idle - facts.now, 0.0),
                disk_price_per_hour=disk,
                disk_dollars=round(disk * idle / _HOUR, 6) if disk is not None else None,
                break_even=entry.break_even,
            )
        )
    rows.sort(key=lambda row: (row.key, -row.idle_seconds))
    return rows
