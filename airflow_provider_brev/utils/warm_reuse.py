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
    NOT_REQUESTED,
    REUSE,
    SETTLING,
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
    from collections.abc import Callable

    from airflow_provider_brev.cli.instances.reuse import WarmRequest
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


#: How long a run waits for a recorded instance that is still STOPPING (an earlier run's teardown) before it creates
#: one instead: a stop takes seconds on the simulator and up to minutes on Brev, a cold start minutes.
STOP_SETTLE_TIMEOUT = 300.0


def claim_warm(
    hook: BrevHook,
    log: Any,
    registry: ReuseRegistry,
    key: str,
    who: str,
    *,
    request: WarmRequest | None = None,
    on_claim: Callable[[BrevInstance | None], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    settle_timeout: float = STOP_SETTLE_TIMEOUT,
    poll_interval: float = 1.0,
) -> BrevInstance | None:
    """The instance a new run gets under ``key`` instead of a fresh one, or ``None``.

    An entry this very task claimed before (an earlier try) is adopted if its instance (same id) is still usable.
    Otherwise the most recently stopped entries are tried in turn: started (``brev start``, by id) when
    :func:`~airflow_provider_brev.cli.instances.reuse.candidate_verdict` says :data:`REUSE`; a start that fails
    means another run started it first. A record whose instance is gone or whose name another id holds is dropped
    and never started; an expired one is left for the janitor; one that does not satisfy ``request`` (type, price
    cap, run-cost cap) is not started, logged with the reason, and left to expire. While a candidate is still
    STOPPING (an earlier run's teardown), the claim waits for it, up to ``settle_timeout`` seconds.

    :param who: :func:`task_identity` of the claiming task.
    :param request: what the run asks for, resolved as a create resolves it (``None``: anything).
    :param on_claim: called with the instance right before its ``brev start`` (the task owns it from then on: a kill
        must release it), and with ``None`` when that start failed.
    :param cancelled: returns ``True`` once the task was killed: the wait ends and nothing is started.
    :param settle_timeout: the longest wait for STOPPING candidates.
    :param poll_interval: seconds between listings while waiting.
    """
    deadline = time.monotonic() + settle_timeout
    waited_for: set[str] = set()
    while True:
        now = time.time()
        entries = registry.entries(key)
        listed = {instance.name: instance for instance in hook.list_instances()} if entries else {}
        adopted = _earlier_claim(log, key, who, entries, listed)
        if adopted is not None:
            return adopted
        settling: list[BrevInstance] = []
        for entry in candidates(entries):
            live = listed.get(entry.name)
            verdict = candidate_verdict(entry, live, now, request)
            if verdict == SETTLING:
                assert live is not None
                settling.append(live)
                continue
            if verdict != REUSE:
                _skip(log, registry, key, entry, live, verdict, request)
                continue
            assert live is not None
            started = _start(hook, log, registry, key, who, entry, live, now, on_claim)
            if started is not None:
                return started
        if not settling or (cancelled is not None and cancelled()) or time.monotonic() >= deadline:
            if settling:
                names = ", ".join(instance.name for instance in settling)
                log.info(
                    "Reuse key %r: %s still STOPPING after %.0f s of waiting; not waiting longer.",
                    key,
                    names,
                    settle_timeout,
                )
            return None
        for instance in settling:
            if instance.id not in waited_for:
                waited_for.add(instance.id)
                log.info(
                    "Reuse key %r: %s (id %s) is still STOPPING (an earlier run's teardown); waiting up to %.0f s for "
                    "it to stop rather than creating a second instance.",
                    *(key, instance.name, instance.id, max(deadline - time.monotonic(), 0.0)),
                )
        time.sleep(min(poll_interval, max(deadline - time.monotonic(), 0.0)))


def _earlier_claim(
    log: Any, key: str, who: str, entries: list[ReuseEntry], listed: dict[str, BrevInstance]
) -> BrevInstance | None:
    """The instance an earlier try of this very task claimed, if it is still usable (same id)."""
    for entry in entries:
        if entry.state == STATE_IN_USE and entry.claimed_by == who:
            live = listed.get(entry.name)
            if live is not None and live.id == entry.id and live.status not in (STATUS_DELETING, STATUS_FAILURE):
                log.info("Reuse key %r: adopting %s (id %s), which an earlier try claimed.", key, live.name, live.id)
                return live
    return None


def _skip(
    log: Any,
    registry: ReuseRegistry,
    key: str,
    entry: ReuseEntry,
    live: BrevInstance | None,
    verdict: str,
    request: WarmRequest | None,
) -> None:
    """Log why ``entry`` is not started; forget it when its instance is gone or another id holds its name."""
    if verdict in (GONE, FOREIGN):
        held = f"another instance (id {live.id}) holds the name" if live is not None else "it is gone"
        log.warning(
            "Reuse key %r: not starting %s (recorded id %s): %s; forgetting the record.",
            *(key, entry.name, entry.id, held),
        )
        registry.drop(entry.id)
        return
    status = live.status if live is not None else "-"
    if verdict == NOT_REQUESTED and request is not None and live is not None:
        reason = request.mismatch(live.instance_type or entry.instance_type)
        log.warning(
            "Reuse key %r: not starting %s (%s, %s): %s. It stays stopped until its max_idle passes (the janitor then "
            "deletes it); this run creates what it asks for.",
            *(key, entry.name, status, live.instance_type or entry.instance_type, reason),
        )
        return
    later = " (the janitor deletes it)" if verdict == EXPIRED else ""
    log.info("Reuse key %r: not starting %s (%s): %s%s.", key, entry.name, status, verdict, later)


def _start(
    hook: BrevHook,
    log: Any,
    registry: ReuseRegistry,
    key: str,
    who: str,
    entry: ReuseEntry,
    live: BrevInstance,
    now: float,
    on_claim: Callable[[BrevInstance | None], None] | None,
) -> BrevInstance | None:
    """``brev start`` ``entry``'s instance (the claim) and record it in use; ``None`` when another run started it."""
    if on_claim is not None:
        on_claim(live)
    try:
        hook.start_instance(entry.name, instance_id=entry.id)
    except BrevError as err:
        if on_claim is not None:
            on_claim(None)
        log.info("Reuse key %r: %s was started by another run first (%s); trying the next.", key, entry.name, err)
        return None
    registry.put(replace(entry, state=STATE_IN_USE, since=now, claimed_by=who))
    log.info(
        "Reuse key %r: starting stopped instance %s (id %s, %s, stopped %.0f s ago) instead of creating one: its "
        "image cache and synced inputs are kept.",
        *(key, entry.name, entry.id, entry.instance_type, now - entry.since),
    )
    started = hook.get_instance(entry.id)
    return started if started is not None and started.id == entry.id else live


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
