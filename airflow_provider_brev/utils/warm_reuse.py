"""Warm reuse across DAG runs: the durable record of stopped instances, and the start of one by a new run.

**Where the record lives.** One Airflow Variable, :data:`REGISTRY_VARIABLE` (JSON ``{reuse_key: [entry, ...]}``, the
entries of :class:`~airflow_provider_brev.cli.instances.reuse.ReuseEntry`). A later DAG run -- on any worker of a
distributed deployment, days later -- must find what an earlier run stopped: XCom and the task state store belong to
one DAG run or task, a worker-local file to one machine; a Variable is stored in the metadata database, read and
written by every task through the Execution API, listed in the UI (an operator can see and edit what is kept) and
needs no extra table or connection. It holds ids and names only, never a secret.

**Concurrent runs.** Variables have no compare-and-swap, so two runs writing at once may lose one write. Nothing
unsafe follows, because the record is never trusted alone:

* the claim of a stopped instance is ``brev start`` itself: Brev moves an instance from STOPPED to STARTING once,
  and a second start fails ("Instance is not stopped"), so two runs that read the same entry never share the
  instance -- the loser creates a fresh one (:func:`claim_warm`);
* every decision re-reads the live instance: a record whose live id differs is never started
  (:func:`~airflow_provider_brev.cli.instances.reuse.candidate_verdict`), the janitor deletes only a STOPPED
  instance of the recorded id;
* an instance whose entry was lost keeps its owner-prefixed, expiring managed name: the janitor deletes it once the
  name expires, as any leak.

Only instances this provider created (and recorded here) are ever started; the teardown's stop goes through
:mod:`airflow_provider_brev.utils.release` with the usual identity and ownership checks.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.instances.reuse import (
    EXPIRED,
    FOREIGN,
    GONE,
    REUSE,
    STATE_IN_USE,
    ReuseEntry,
    candidate_verdict,
    candidates,
    entries_in,
    entries_value,
)
from airflow_provider_brev.cli.protocol.output import STATUS_DELETING, STATUS_FAILURE
from airflow_provider_brev.exceptions import BrevError

if TYPE_CHECKING:
    from airflow_provider_brev.cli.protocol.output import BrevInstance
    from airflow_provider_brev.hooks.brev import BrevHook

#: The Airflow Variable holding every reuse key's entries.
REGISTRY_VARIABLE = "brev_warm_instances"


class TaskVariables:
    """Airflow Variables as a task reads and writes them (``airflow.sdk.Variable``, through the Execution API)."""

    def get_json(self, key: str) -> Any:
        from airflow.sdk import Variable  # task-side only

        return Variable.get(key, default=None, deserialize_json=True)

    def set_json(self, key: str, value: Any, description: str) -> None:
        from airflow.sdk import Variable

        Variable.set(key, value, description=description, serialize_json=True)


class MetadataVariables:
    """Airflow Variables read and written in the metadata database (``airflow.models.Variable``), for code that is
    not a task: the provider's ``airflow brev`` commands, like Airflow's own ``airflow variables``."""

    def get_json(self, key: str) -> Any:
        from airflow.models import Variable

        return Variable.get(key, default_var=None, deserialize_json=True)  # noqa: AIR311 - the DB's, not a task's

    def set_json(self, key: str, value: Any, description: str) -> None:
        from airflow.models import Variable

        Variable.set(key, value, description=description, serialize_json=True)  # noqa: AIR311 - the DB's


class ReuseRegistry:
    """Read and write the stopped-instance records (:data:`REGISTRY_VARIABLE`).

    :param log: the task's logger.
    :param variable: the Variable's key.
    :param store: where Variables are read and written (default: as a task does, :class:`TaskVariables`).
    """

    def __init__(self, log: Any, variable: str = REGISTRY_VARIABLE, store: Any = None) -> None:
        self.log = log
        self.variable = variable
        self.store = store or TaskVariables()

    def load(self) -> dict[str, list[ReuseEntry]]:
        try:
            value = self.store.get_json(self.variable)
        except (ValueError, TypeError):  # not JSON: someone edited it by hand; start over rather than fail
            self.log.warning("Variable %s does not hold JSON; treating it as empty.", self.variable)
            value = None
        return entries_in(value)

    def save(self, entries: dict[str, list[ReuseEntry]]) -> None:
        self.store.set_json(
            self.variable,
            entries_value(entries),
            description="airflow-provider-brev: instances kept for warm reuse (reuse_key -> entries)",
        )

    def entries(self, key: str) -> list[ReuseEntry]:
        return list(self.load().get(key, []))

    def put(self, entry: ReuseEntry) -> None:
        """Record ``entry``, replacing any entry of the same instance id (under any key)."""
        entries = self.load()
        for key in list(entries):
            entries[key] = [e for e in entries[key] if e.id != entry.id]
        entries.setdefault(entry.key, []).append(entry)
        self.save(entries)

    def drop(self, instance_id: str) -> None:
        """Forget the instance of ``instance_id`` (deleted, gone or not ours)."""
        entries = self.load()
        if any(e.id == instance_id for items in entries.values() for e in items):
            self.save({key: [e for e in items if e.id != instance_id] for key, items in entries.items()})

    def find(self, instance_id: str) -> ReuseEntry | None:
        return next((e for items in self.load().values() for e in items if e.id == instance_id), None)


def task_identity(ti: Any) -> str:
    """``dag_id/run_id/task_id/map_index`` of a task instance: who claimed an entry."""
    map_index = getattr(ti, "map_index", -1)
    return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{map_index if isinstance(map_index, int) else -1}"


def _listed(hook: BrevHook, entry: ReuseEntry) -> BrevInstance | None:
    """What ``brev ls`` lists under the entry's name (or, when the name is free, its id)."""
    return hook.get_instance(entry.name)


def claim_warm(
    hook: BrevHook, log: Any, registry: ReuseRegistry, key: str, who: str, *, now: float | None = None
) -> BrevInstance | None:
    """The instance a new run gets under ``key`` instead of a fresh one, or ``None``.

    An entry this very task claimed before (an earlier try) is adopted if its instance (same id) is still usable.
    Otherwise the most recently stopped entries are tried in turn: started (``brev start``, by id) when
    :func:`~airflow_provider_brev.cli.instances.reuse.candidate_verdict` says :data:`REUSE`; a start that fails
    means another run started it first. A record whose instance is gone or whose name another id holds is dropped
    and never started; an expired one is left for the janitor.

    :param who: :func:`task_identity` of the claiming task.
    """
    now = time.time() if now is None else now
    entries = registry.entries(key)
    for entry in entries:
        if entry.state == STATE_IN_USE and entry.claimed_by == who:
            live = _listed(hook, entry)
            if live is not None and live.id == entry.id and live.status not in (STATUS_DELETING, STATUS_FAILURE):
                log.info("Reuse key %r: adopting %s (id %s), which an earlier try claimed.", key, live.name, live.id)
                return live
    for entry in candidates(entries):
        live = _listed(hook, entry)
        verdict = candidate_verdict(entry, live, now)
        if verdict in (GONE, FOREIGN):
            held = f"another instance (id {live.id}) holds the name" if live is not None else "it is gone"
            log.warning(
                "Reuse key %r: not starting %s (recorded id %s): %s; forgetting the record.",
                *(key, entry.name, entry.id, held),
            )
            registry.drop(entry.id)
            continue
        if verdict != REUSE:
            status = live.status if live is not None else "-"
            later = " (the janitor deletes it)" if verdict == EXPIRED else ""
            log.info("Reuse key %r: not starting %s (%s): %s%s.", key, entry.name, status, verdict, later)
            continue
        assert live is not None
        try:
            hook.start_instance(entry.name, instance_id=entry.id)
        except BrevError as err:
            log.info("Reuse key %r: %s was started by another run first (%s); trying the next.", key, entry.name, err)
            continue
        registry.put(replace(entry, state=STATE_IN_USE, since=now, claimed_by=who))
        log.info(
            "Reuse key %r: starting stopped instance %s (id %s, %s, stopped %.0f s ago) instead of creating one: its "
            "image cache and synced inputs are kept.",
            *(key, entry.name, entry.id, entry.instance_type, now - entry.since),
        )
        started = hook.get_instance(entry.id)
        return started if started is not None and started.id == entry.id else live
    return None


def record_in_use(
    registry: ReuseRegistry,
    key: str,
    instance: BrevInstance,
    who: str,
    *,
    max_idle: float,
    max_lifetime: float,
    price_per_hour: float | None,
    created_at: float | None,
) -> None:
    """Record that ``who`` created (or started) ``instance`` under ``key`` (kept ``in_use`` until its teardown)."""
    earlier = registry.find(instance.id)
    registry.put(
        ReuseEntry(
            key=key,
            id=instance.id,
            name=instance.name,
            instance_type=instance.instance_type,
            state=STATE_IN_USE,
            since=time.time(),
            max_idle=max_idle,
            max_lifetime=max_lifetime,
            saved_seconds=earlier.saved_seconds if earlier is not None else 0.0,
            claimed_by=who,
            price_per_hour=price_per_hour,
            created_at=created_at,
        )
    )


def next_run_at(context: Any, *, now: float | None = None) -> float | None:
    """When the DAG's timetable schedules its next run after now (epoch seconds), or ``None`` (no schedule, or the
    timetable cannot tell). The next interval after this run's own data interval; when that is already due (an old
    run, or a manual one without an interval), the next one after now."""
    now = time.time() if now is None else now
    try:
        import pendulum
        from airflow.timetables.base import DataInterval, TimeRestriction

        timetable = context["dag"].timetable
        if not hasattr(timetable, "next_dagrun_info"):  # Airflow 3.1+: the Task SDK's definition of it
            from airflow.serialization.encoders import coerce_to_core_timetable

            timetable = coerce_to_core_timetable(timetable)
        dag_run = context.get("dag_run")
        start = getattr(dag_run, "data_interval_start", None)
        end = getattr(dag_run, "data_interval_end", None)
        at_now = pendulum.from_timestamp(now, tz="UTC")
        lasts = [DataInterval(start, end)] if start is not None and end is not None else []
        for last in [*lasts, DataInterval(at_now, at_now)]:
            info = timetable.next_dagrun_info(
                last_automated_data_interval=last,
                restriction=TimeRestriction(earliest=None, latest=None, catchup=True),
            )
            if info is None:
                return None
            if info.run_after.timestamp() > now:
                return float(info.run_after.timestamp())
        return None
    except Exception:  # a custom timetable may want more: fall back to max_idle
        return None
