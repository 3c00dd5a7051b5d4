"""Warm reuse across DAG runs: the durable records of kept instances, and the start of one by a new run.

**Where the records live.** One Airflow Variable per instance, ``brev_warm_instance.<instance id>`` (JSON of its
:class:`~airflow_provider_brev.core.instances.warm_pool.ReuseEntry`; where, and who writes it:
:mod:`airflow_provider_brev.core.instances.warm_pool_records`). A later DAG run -- on any worker, days later -- must find
what an earlier run stopped: XCom and the task state store belong to one DAG run or task, a worker-local file to one
machine; a Variable is stored in the metadata database, read and written by every task through the Execution API,
listed in the UI and needs no extra table. It holds ids and names only, never a secret.

**No lost record.** Only whoever holds an instance writes its record: its creator, the run whose ``brev start``
claimed it, its teardown, the janitor deleting it. Writes for different instances touch different Variables, so none
can undo another (one Variable for every key lost 13 of 50 records to two concurrent writers); two writers of one
record would need to hold one instance at once, which the claim (Brev's STOPPED -> STARTING, once) prevents.

**Found from ``brev ls``, never by listing Variables** (a task cannot list them before Airflow 3.3): each listed
instance's record is read by its id. A record of an instance no longer listed is never read again; the janitor and
``airflow brev sweep`` remove the ones their connection wrote where Variables can be listed
(:meth:`ReuseRegistry.forget_orphans`).

**Only a record that proves ownership acts** (:func:`~airflow_provider_brev.core.instances.warm_pool_records.ownership_problem`:
a managed name of the owner prefix, derived from the recorded creating task, whose XCom -- or that of the run that
last held it -- holds the id). Any other is ignored with a WARNING saying why, by runs, teardowns, the janitor and
the ``airflow brev`` commands.

**Records of earlier releases** (the single Variable ``brev_warm_instances``) are read when an instance has no record
of its own, never written: an instance a run holds keeps its protection from the janitor (its record names the
task that holds it), a stopped one is not started again (nothing names its creator) and ends by its name's expiry.
Nothing deletes that Variable: another account's run may still rely on it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.records import recorded_ids, records_in
from airflow_provider_brev.core.instances.warm_pool import (
    EXPIRED,
    FOREIGN,
    GONE,
    NOT_REQUESTED,
    REUSE,
    SETTLING,
    STATE_IN_USE,
    STATE_STOPPED,
    ReuseEntry,
    Sighting,
    candidate_verdict,
    candidates,
    entries_in,
)
from airflow_provider_brev.core.instances.warm_pool_records import (
    AWAKE_PREFIX,
    LEGACY_VARIABLE,
    RECORD_PREFIX,
    TaskRef,
    awake_variable,
    ownership_problem,
    record_variable,
    tasks_named,
)
from airflow_provider_brev.core.protocol.names import parse_managed_name
from airflow_provider_brev.core.protocol.output import STATUS_DELETING, STATUS_FAILURE
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.instances.warm_pool_stores import (  # where records live; also importable from here
    TaskVariables,
    TaskXComs,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from airflow_provider_brev.core.instances.warm_pool import WarmRequest
    from airflow_provider_brev.core.protocol.output import BrevInstance
    from airflow_provider_brev.hooks.brev import BrevHook

#: The description every record's Variable carries (shown in the UI).
RECORD_DESCRIPTION = "airflow-provider-brev: an instance kept for warm reuse (written by the task that holds it)"


class ReuseRegistry:
    """Read and write the warm-reuse records, one Variable per instance (module docstring).

    :param log: the logger (a record that may not act is logged there at WARNING).
    :param store: where Variables are read and written (default: as a task does, :class:`TaskVariables`).
    :param xcoms: where the creating task's XCom is read (default: as a task does, :class:`TaskXComs`).
    """

    def __init__(self, log: Any, store: Any = None, xcoms: Any = None) -> None:
        self.log = log
        self.store = store or TaskVariables()
        self.xcoms = xcoms or TaskXComs()
        self._legacy: dict[str, ReuseEntry] | None = None
        self._proofs: dict[tuple[ReuseEntry, str, str], str | None] = {}

    # -- one record ------------------------------------------------------------------------------
    def _json(self, key: str) -> Any:
        try:
            return self.store.get_json(key)
        except (ValueError, TypeError):  # not JSON: someone edited it by hand
            self.log.warning("Variable %s does not hold JSON; ignoring it.", key)
            return None

    def _legacy_entries(self) -> dict[str, ReuseEntry]:
        """The entries of the single Variable of earlier releases, by instance id (read once)."""
        if self._legacy is None:
            self._legacy = {e.id: e for items in entries_in(self._json(LEGACY_VARIABLE)).values() for e in items}
        return self._legacy

    def find(self, instance_id: str) -> ReuseEntry | None:
        """The record of ``instance_id`` (its own Variable, else the single Variable of earlier releases), as
        stored: not yet proven (:meth:`proven`)."""
        entry = ReuseEntry.from_dict(self._json(record_variable(instance_id)))
        if entry is not None:
            return entry if entry.id == instance_id else None
        return self._legacy_entries().get(instance_id)

    def put(self, entry: ReuseEntry) -> None:
        """Write ``entry`` as the record of its instance (only whoever holds the instance does)."""
        self.store.set_json(record_variable(entry.id), entry.to_dict(), description=RECORD_DESCRIPTION)

    def drop(self, instance_id: str) -> None:
        """Forget the instance of ``instance_id`` (deleted, gone or not ours): its record and any sighting."""
        for key in (record_variable(instance_id), awake_variable(instance_id)):
            self.store.delete(key)

    # -- who may act -----------------------------------------------------------------------------
    def problem(self, entry: ReuseEntry, live: BrevInstance, prefix: str) -> str | None:
        """Why ``entry`` may not act on ``live`` (``None``: it may; else logged at WARNING), reading the XCom of the
        tasks it names -- once per record, listing and prefix: a claim waiting for a STOPPING instance asks again at
        each poll."""
        memo = (entry, f"{live.id}\x00{live.name}", prefix)
        if memo not in self._proofs:
            why = self._proofs[memo] = self._problem(entry, live, prefix)
            if why is not None:
                self._ignored(entry, why)
        return self._proofs[memo]

    def _problem(self, entry: ReuseEntry, live: BrevInstance, prefix: str) -> str | None:
        owned: dict[TaskRef, set[str] | None] = {}
        for task in tasks_named(entry):
            try:
                owned[task] = recorded_ids(records_in(self.xcoms.value(task)), owned_only=True)
            except Exception as err:
                self.log.info("Could not read XCom brev_instance of %s (%s).", task.text, err)
                owned[task] = None
        return ownership_problem(entry, live, prefix=prefix, owned_ids=owned)

    def _ignored(self, entry: ReuseEntry, why: str) -> None:
        self.log.warning(
            "Ignoring the warm-reuse record of %s (id %s, reuse key %r): %s. Nothing is started, stopped or deleted "
            "because of it.",
            *(entry.name, entry.id, entry.key, why),
        )

    def proven(self, live: BrevInstance, prefix: str) -> ReuseEntry | None:
        """The record of ``live`` if it may act on it, else ``None`` (a record that may not is logged)."""
        entry = self.find(live.id)
        if entry is None:
            return None
        return entry if self.problem(entry, live, prefix) is None else None

    def recorded(
        self, instances: Iterable[BrevInstance], prefix: str, *, key: str | None = None
    ) -> tuple[dict[str, ReuseEntry], dict[str, str]]:
        """The records of the listed ``instances`` (under ``key`` only, when given): those that may act, and why
        each other may not, both by instance id."""
        proven: dict[str, ReuseEntry] = {}
        ignored: dict[str, str] = {}
        for live in instances:
            entry = self.find(live.id)
            if entry is None or (key is not None and entry.key != key):
                continue
            why = self.problem(entry, live, prefix)
            if why is None:
                proven[live.id] = entry
            else:
                ignored[live.id] = why
        return proven, ignored

    def entries(self, instances: Iterable[BrevInstance], key: str, prefix: str) -> list[ReuseEntry]:
        """The records under ``key`` of the listed ``instances`` that may act."""
        return list(self.recorded(instances, prefix, key=key)[0].values())

    # -- the janitor's sightings and orphans -----------------------------------------------------
    def sightings(self, entries: Iterable[ReuseEntry]) -> dict[str, Sighting]:
        """The sightings earlier sweeps kept for the stopped-recorded ``entries``, by instance id."""
        found = {
            e.id: Sighting.from_dict(self._json(awake_variable(e.id))) for e in entries if e.state == STATE_STOPPED
        }
        return {ident: sighting for ident, sighting in found.items() if sighting is not None}

    def keep_sightings(self, wanted: dict[str, Sighting], stored: dict[str, Sighting]) -> None:
        """Write the sightings a sweep keeps, forget the others it had read."""
        for ident, sighting in wanted.items():
            if stored.get(ident) != sighting:
                self.store.set_json(awake_variable(ident), sighting.to_dict(), description=RECORD_DESCRIPTION)
        for ident in set(stored) - set(wanted):
            self.store.delete(awake_variable(ident))

    def stored_keys(self) -> list[str] | None:
        """Every record and sighting Variable's key, or ``None`` where they cannot be listed (a task before Airflow
        3.3). Read it *before* ``brev ls``: a record written after that is of an instance the listing shows."""
        try:
            records, awake = self.store.keys(RECORD_PREFIX), self.store.keys(AWAKE_PREFIX)
        except Exception as err:
            self.log.info("Could not list the warm-reuse Variables (%s): orphans are left for later.", err)
            return None
        return None if records is None or awake is None else [*records, *awake]

    def forget_orphans(
        self, stored_keys: Sequence[str] | None, listed: Iterable[BrevInstance], conn_id: str
    ) -> list[str]:
        """Delete the records (of ``stored_keys``) that ``conn_id`` wrote for instances ``brev ls`` no longer lists,
        and sightings without a record; returns the keys deleted. A record another connection wrote is left: its
        instance may be in an account this listing does not show. The single Variable of earlier releases is never
        deleted here (it may hold a record another account's run still relies on)."""
        if stored_keys is None:
            return []
        ids = [instance.id for instance in listed]
        listed_keys = {record_variable(i) for i in ids} | {awake_variable(i) for i in ids}
        unlisted = sorted(set(stored_keys) - listed_keys)
        orphans = [key for key in unlisted if key.startswith(RECORD_PREFIX) and self._written_by(key, conn_id)]
        remaining = set(stored_keys) - set(orphans)
        for key in unlisted:
            if key.startswith(AWAKE_PREFIX) and RECORD_PREFIX + key[len(AWAKE_PREFIX) :] not in remaining:
                orphans.append(key)
        for key in orphans:
            with contextlib.suppress(Exception):
                self.store.delete(key)
        return orphans

    def _written_by(self, key: str, conn_id: str) -> bool:
        entry = ReuseEntry.from_dict(self._json(key))
        return entry is not None and bool(conn_id) and entry.conn_id == conn_id


def task_identity(ti: Any) -> str:
    """``dag_id/run_id/task_id/map_index`` of a task instance: who created or claimed an entry."""
    map_index = getattr(ti, "map_index", -1)
    return TaskRef(ti.dag_id, ti.run_id, ti.task_id, map_index if isinstance(map_index, int) else -1).text


def _creator(name: str, who: str) -> str:
    """``who`` if the managed ``name`` derives from it (``who`` created the instance), else ``""``."""
    managed, task = parse_managed_name(name), TaskRef.parse(who)
    return who if managed is not None and task is not None and task.digest() == managed.digest else ""


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
    prefix: str,
    request: WarmRequest | None = None,
    on_claim: Callable[[BrevInstance | None, float | None], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    settle_timeout: float = STOP_SETTLE_TIMEOUT,
    poll_interval: float = 1.0,
) -> BrevInstance | None:
    """The instance a new run gets under ``key`` instead of a fresh one, or ``None``.

    An entry this very task claimed before (an earlier try) is adopted if its instance (same id) is still usable.
    Otherwise the most recently stopped entries are tried in turn: started (``brev start``, by id) when
    :func:`~airflow_provider_brev.core.instances.warm_pool.candidate_verdict` says :data:`REUSE`; a start that fails
    means another run started it first. A record whose instance is gone or whose name another id holds is dropped
    and never started; an expired one is left for the janitor; one that does not satisfy ``request`` (type, price
    cap, run-cost cap) is not started, logged with the reason, and left to expire. While a candidate is still
    STOPPING (an earlier run's teardown), the claim waits for it, up to ``settle_timeout`` seconds.

    :param who: :func:`task_identity` of the claiming task.
    :param prefix: the owner prefix of the instances the task may start (its create request's); only records that
        prove ownership are tried (:meth:`ReuseRegistry.entries`).
    :param request: what the run asks for, resolved as a create resolves it (``None``: anything).
    :param on_claim: called with the instance and ``None`` right before its ``brev start`` (in flight: the start
        that wins may be another run's), with the instance and the time the start was requested once it went
        through (the task owns it from then on: a kill must release it), and with ``(None, None)`` when it failed.
    :param cancelled: returns ``True`` once the task was killed: the wait ends and nothing is started.
    :param settle_timeout: the longest wait for STOPPING candidates.
    :param poll_interval: seconds between listings while waiting.
    """
    deadline = time.monotonic() + settle_timeout
    waited_for: set[str] = set()
    while True:
        now = time.time()
        instances = hook.list_instances()
        entries = registry.entries(instances, key, prefix)
        listed = {instance.name: instance for instance in instances}
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
    on_claim: Callable[[BrevInstance | None, float | None], None] | None,
) -> BrevInstance | None:
    """``brev start`` ``entry``'s instance (the claim) and record it in use; ``None`` when another run started it."""
    if on_claim is not None:
        on_claim(live, None)
    requested_at = time.time()
    try:
        hook.start_instance(entry.name, instance_id=entry.id)
    except BrevError as err:
        if on_claim is not None:
            on_claim(None, None)
        log.info("Reuse key %r: %s was started by another run first (%s); trying the next.", key, entry.name, err)
        return None
    if on_claim is not None:
        on_claim(live, requested_at)
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
    conn_id: str = "",
) -> None:
    """Record that ``who`` created (or started) ``instance`` under ``key`` (kept ``in_use`` until its teardown), with
    the connection ``conn_id``. Its creator is ``who`` when its managed name derives from ``who``, else the one
    recorded before."""
    earlier = registry.find(instance.id)
    creator = _creator(instance.name, who) or (earlier.created_by if earlier is not None else "")
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
            created_by=creator,
            conn_id=conn_id,
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
