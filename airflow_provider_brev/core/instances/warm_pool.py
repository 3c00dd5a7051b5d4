"""Warm reuse across DAG runs (``brev stop`` / ``brev start``): the pure decisions.

A create task with a ``reuse_key`` first looks for a STOPPED instance the provider recorded under that key; a
teardown with ``release="stop"`` stops the instance instead of deleting it when its type can stop and the break-even
favours it; the janitor deletes a stopped instance once its ``max_idle`` passed. The records live in durable
Airflow Variables, one per instance (:mod:`airflow_provider_brev.core.instances.warm_pool_records` says where, and which
record may act at all); this module only decides:

* :class:`ReuseEntry` -- what is recorded per instance (key, id, name, type, state, since, ``max_idle``, the
  measured cold-start seconds it saves, the task that created it and the one that last held it);
* :func:`candidate_verdict` -- may this entry's instance be started now? Only when ``brev ls`` lists an instance of
  exactly the recorded **id** under the recorded name, STOPPED, its ``max_idle`` has not passed, and it satisfies the
  run's own request as a create would (:class:`WarmRequest`: its type among the request's candidates, its price
  within ``max_price_per_hour`` and the step's ``max_run_cost``). One still STOPPING is :data:`SETTLING`: worth
  waiting for (bounded) rather than creating a second instance;
* :func:`break_even` -- stop or delete: the disk's price over the expected idle hours against the GPU price of the
  cold start (boot, image pulls, input staging) a warm start saves; both numbers go into the verdict's message;
* :func:`expected_idle_seconds` -- until the DAG's next scheduled run, else ``max_idle``;
* :func:`janitor_verdict` -- what the janitor does with a recorded instance; every record state and live state ends
  in a stop or a delete by a bounded time (its docstring).

**Never two runs on one instance.** The claim is Brev's own STOPPED -> STARTING transition: ``brev start`` of an
instance that is not STOPPED fails ("Instance is not stopped"), so of two runs that picked the same entry only one
start succeeds; the other creates a fresh instance. The record is written after the start (state ``in_use``), and a
record is never trusted alone: every decision re-reads the live status and id.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.output import (
    STATUS_DELETING,
    STATUS_RUNNING,
    STATUS_STOPPED,
    STATUS_STOPPING,
    STATUS_UNHEALTHY,
)
from airflow_provider_brev.core.values import is_empty
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from airflow_provider_brev.core.cost import PriceCap
    from airflow_provider_brev.core.protocol.output import BrevInstance, InstanceTypeOffer

#: Default ``max_idle``: a stopped instance not started again within a day is deleted by the janitor.
DEFAULT_MAX_IDLE_SECONDS = 24 * 3600.0
DEFAULT_MAX_IDLE = timedelta(seconds=DEFAULT_MAX_IDLE_SECONDS)
"""How long an instance released with ``release="stop"`` may stay stopped before the janitor deletes it: 24 hours."""
#: ``brev create``'s default disk when the type's disk is resizable (reference/brev-cli.md: min disk 500 GB).
DEFAULT_DISK_GB = 500.0
#: Hours in a billing month (the catalog prices disk per GB-month).
HOURS_PER_MONTH = 730.0

STATE_STOPPED = "stopped"
STATE_IN_USE = "in_use"

# candidate_verdict outcomes
REUSE = "reuse"
GONE = "gone"  # nothing is listed under the recorded name: drop the record
FOREIGN = "foreign"  # another id holds the name: never started; the record is stale
NOT_STOPPED = "not_stopped"  # listed with the recorded id but not STOPPED (a run uses it, or it is starting)
SETTLING = "settling"  # listed with the recorded id and STOPPING: STOPPED soon, worth a bounded wait
NOT_REQUESTED = "not_requested"  # not what this run asks for (type, price cap or run-cost cap): left to expire
EXPIRED = "expired"  # stopped longer than its max_idle: the janitor deletes it
IN_USE = "in_use"  # recorded as claimed by another run

# janitor_verdict outcomes
DELETE = "delete"
STOP = "stop"
KEEP = "keep"
DROP = "drop"
ALREADY_DELETING = "already_deleting"

#: How long after the janitor first finds a stopped-recorded instance running it waits before stopping it (a run
#: that has just started it writes its ``in_use`` record within seconds of ``brev start``), and how long past
#: ``max_idle`` such an instance may run before it is deleted whatever the janitor saw before.
CLAIM_GRACE_SECONDS = 600.0


@dataclass(frozen=True)
class ReuseEntry:
    """One instance recorded under a reuse key.

    :param key: the reuse key.
    :param id: Brev's id of the instance (identity: a stopped instance whose live id differs is never started).
    :param name: its name.
    :param instance_type: its type.
    :param state: ``stopped`` (released by ``brev stop``) or ``in_use`` (created or started by a run).
    :param since: when it entered that state (epoch seconds).
    :param max_idle: seconds it may stay stopped before the janitor deletes it.
    :param max_lifetime: seconds an ``in_use`` instance is protected from the janitor (its run died otherwise).
    :param saved_seconds: the cold-start seconds (boot, image pulls, input staging) a warm start saves, as measured
        on the instance's cold run.
    :param claimed_by: the task that last created or started it (``dag_id/run_id/task_id/map_index``): it holds it
        while ``in_use``.
    :param price_per_hour: its price, when known.
    :param created_at: when ``brev create`` was called for it (epoch seconds), when known.
    :param created_by: the task that created it (``dag_id/run_id/task_id/map_index``): its managed name derives
        from it (:mod:`airflow_provider_brev.core.instances.warm_pool_records`).
    :param conn_id: the Airflow connection it was created or started with: only a sweep through that connection
        (whose ``brev ls`` shows its account) may forget the record once the instance is no longer listed.
    :param disk_price_per_hour: its stopped disk's price per hour (the catalog's, when it was stopped), when known:
        the run that starts it again bills its stopped time to the reuse key.
    """

    key: str
    id: str
    name: str
    instance_type: str = ""
    state: str = STATE_IN_USE
    since: float = 0.0
    max_idle: float = DEFAULT_MAX_IDLE_SECONDS
    max_lifetime: float = DEFAULT_MAX_IDLE_SECONDS
    saved_seconds: float = 0.0
    claimed_by: str = ""
    price_per_hour: float | None = None
    created_at: float | None = None
    created_by: str = ""
    conn_id: str = ""
    disk_price_per_hour: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "id": self.id,
            "name": self.name,
            "instance_type": self.instance_type,
            "state": self.state,
            "since": self.since,
            "max_idle": self.max_idle,
            "max_lifetime": self.max_lifetime,
            "saved_seconds": self.saved_seconds,
            "claimed_by": self.claimed_by,
            "price_per_hour": self.price_per_hour,
            "created_at": self.created_at,
            "created_by": self.created_by,
            "conn_id": self.conn_id,
            "disk_price_per_hour": self.disk_price_per_hour,
        }

    @classmethod
    def from_dict(cls, value: Any) -> ReuseEntry | None:
        """The entry in ``value`` (a stored dict), or ``None`` if it is not one."""
        if not isinstance(value, dict):
            return None
        key, ident, name = value.get("key"), value.get("id"), value.get("name")
        if not (isinstance(key, str) and key and isinstance(ident, str) and ident and isinstance(name, str) and name):
            return None
        return cls(
            key=key,
            id=ident,
            name=name,
            instance_type=_text(value.get("instance_type")),
            state=STATE_STOPPED if value.get("state") == STATE_STOPPED else STATE_IN_USE,
            since=_number(value.get("since")) or 0.0,
            max_idle=_number(value.get("max_idle")) or DEFAULT_MAX_IDLE_SECONDS,
            max_lifetime=_number(value.get("max_lifetime")) or DEFAULT_MAX_IDLE_SECONDS,
            saved_seconds=_number(value.get("saved_seconds")) or 0.0,
            claimed_by=_text(value.get("claimed_by")),
            price_per_hour=_number(value.get("price_per_hour")),
            created_at=_number(value.get("created_at")),
            created_by=_text(value.get("created_by")),
            conn_id=_text(value.get("conn_id")),
            disk_price_per_hour=_number(value.get("disk_price_per_hour")),
        )

    def expires_at(self) -> float:
        """When the janitor may delete it: ``since + max_idle`` when stopped, ``since + max_lifetime`` in use."""
        return self.since + (self.max_idle if self.state == STATE_STOPPED else self.max_lifetime)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def entries_in(value: Any) -> dict[str, list[ReuseEntry]]:
    """The entries of the single Variable of earlier releases (``{key: [entry, ...]}``); anything malformed is
    skipped."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, list[ReuseEntry]] = {}
    for key, items in value.items():
        entries = [e for e in map(ReuseEntry.from_dict, items if isinstance(items, list) else []) if e and e.key == key]
        if entries:
            out[str(key)] = entries
    return out


@dataclass(frozen=True)
class WarmRequest:
    """What a warm candidate must satisfy: the same resolved request a create is held to.

    :param types: the request's candidate instance types (``gpu`` resolved through ``brev search``, or the given
        ``instance_types``), in order.
    :param prices: price per hour by type (``brev search``).
    :param cap: the request's price cap (``max_price_per_hour``, and ``max_run_cost`` over the step's estimate), or
        ``None``.
    """

    types: tuple[str, ...]
    prices: Mapping[str, float]
    cap: PriceCap | None = None

    @property
    def admitted(self) -> list[str]:
        """The candidate types within the cap (all of them without one)."""
        return list(self.types) if self.cap is None else self.cap.within(self.types, self.prices)

    def mismatch(self, instance_type: str) -> str | None:
        """Why an instance of ``instance_type`` does not satisfy this request (``None``: it does).

        :param instance_type: the type ``brev ls`` lists for the stopped instance.
        """
        if instance_type not in self.types:
            wanted = ", ".join(self.types) or "none"
            return f"its type {instance_type or '(unknown)'} is not one this run asks for ({wanted})"
        if self.cap is not None and instance_type not in self.admitted:
            return self.cap.refusal(instance_type, self.prices)
        return None


def candidate_verdict(
    entry: ReuseEntry, live: BrevInstance | None, now: float, request: WarmRequest | None = None
) -> str:
    """May ``entry``'s instance be started for a new run? :data:`REUSE` only when ``live`` (what ``brev ls`` lists
    under the recorded name) has the recorded id, is STOPPED, the record says ``stopped``, ``max_idle`` has not
    passed and the instance satisfies ``request``. :data:`SETTLING` while it is still STOPPING (a teardown's stop
    under way: the caller waits, bounded); :data:`NOT_REQUESTED` when it is not what the run asks for.

    :param entry: the recorded entry.
    :param live: the instance listed under ``entry.name`` (``None``: nothing).
    :param now: epoch seconds.
    :param request: the run's resolved request (``None``: any type and price).
    """
    if live is None:
        return GONE
    if live.id != entry.id:
        return FOREIGN
    if now >= entry.expires_at() and entry.state == STATE_STOPPED:
        return EXPIRED
    if request is not None and request.mismatch(live.instance_type or entry.instance_type) is not None:
        return NOT_REQUESTED
    if live.status == STATUS_STOPPING:
        return SETTLING
    if entry.state != STATE_STOPPED:
        return IN_USE
    if live.status != STATUS_STOPPED:
        return NOT_STOPPED
    return REUSE


def candidates(entries: Iterable[ReuseEntry]) -> list[ReuseEntry]:
    """The entries worth trying, most recently stopped first (its caches are the freshest)."""
    return sorted((e for e in entries if e.state == STATE_STOPPED), key=lambda e: (-e.since, e.id))


@dataclass(frozen=True)
class Sighting:
    """The janitor found a stopped-recorded instance running.

    :param since: the record's ``since`` at the time (a record written again since starts a new sighting).
    :param seen_at: when (epoch seconds).
    """

    since: float
    seen_at: float

    def to_dict(self) -> dict[str, float]:
        return {"since": self.since, "seen_at": self.seen_at}

    @classmethod
    def from_dict(cls, value: Any) -> Sighting | None:
        if not isinstance(value, dict):
            return None
        since, seen_at = _number(value.get("since")), _number(value.get("seen_at"))
        return cls(since, seen_at) if since is not None and seen_at is not None else None


@dataclass(frozen=True)
class RecordVerdict:
    """What the janitor does with a recorded instance.

    :param action: :data:`DELETE`, :data:`STOP`, :data:`KEEP`, :data:`DROP` (forget the record: the instance is
        gone or another id holds the name) or :data:`ALREADY_DELETING`.
    :param reason: why, in words.
    :param until: for :data:`KEEP`, the time from which the janitor ends it (unless a run writes its record again).
    :param sighting: the sighting to keep for the next sweep (``None``: none).
    """

    action: str
    reason: str
    until: float | None = None
    sighting: Sighting | None = None


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="minutes")


def janitor_verdict(
    entry: ReuseEntry, live: BrevInstance | None, now: float, sighting: Sighting | None = None
) -> RecordVerdict:
    """What the janitor does with an instance recorded under a reuse key (its record proven: ``warm_pool_records``).

    * gone, or another id under the name: :data:`DROP` the record (that other instance is not the record's);
    * DELETING: :data:`ALREADY_DELETING`;
    * ``in_use`` (a run holds it): kept until ``since + max_lifetime``, then deleted (its run died), in any state;
    * ``stopped`` and listed STOPPED or STOPPING: kept until ``since + max_idle``, then deleted;
    * ``stopped`` but listed running, starting, deploying or failed: someone started it by hand (``brev start``,
      ``brev shell``, ``brev exec`` start a stopped instance), or a run's create task died between ``brev start``
      and its record. A run that starts it writes ``in_use`` within seconds, so the first sweep to see it notes a
      :class:`Sighting` and keeps it; a sweep :data:`CLAIM_GRACE_SECONDS` later that still finds the same record
      stops a RUNNING one (its disk is kept, and the stopped rule above applies) and deletes any other. Past
      ``since + max_idle + CLAIM_GRACE_SECONDS`` it is deleted whatever was seen before.

    :param entry: the record.
    :param live: what ``brev ls`` lists under the recorded name (``None``: nothing).
    :param now: epoch seconds.
    :param sighting: the sighting an earlier sweep noted for this instance, if any.
    """
    if live is None or live.id != entry.id:
        return RecordVerdict(DROP, "not listed with the recorded id")
    if live.status == STATUS_DELETING:
        return RecordVerdict(ALREADY_DELETING, "already DELETING")
    end = entry.expires_at()
    if entry.state == STATE_IN_USE:
        if now < end:
            return RecordVerdict(KEEP, f"in_use, until {_at(end)}", until=end)
        return RecordVerdict(DELETE, f"in use past max_lifetime ({_at(end)}): its run died")
    if live.status in (STATUS_STOPPED, STATUS_STOPPING):
        if now < end:
            return RecordVerdict(KEEP, f"stopped, until {_at(end)}", until=end)
        return RecordVerdict(DELETE, f"stopped longer than its max_idle ({_at(end)})")
    status, last = live.status, end + CLAIM_GRACE_SECONDS
    if now >= last:
        return RecordVerdict(DELETE, f"recorded stopped but {status} past its max_idle ({_at(end)})")
    if sighting is None or sighting.since != entry.since or sighting.seen_at > now:
        sighting = Sighting(entry.since, now)
    due = sighting.seen_at + CLAIM_GRACE_SECONDS
    seen = f"recorded stopped but {status} since at least {_at(sighting.seen_at)}"
    if now < due:
        until = min(due, last)
        reason = f"{seen}: ended from {_at(until)} unless a run records it in use"
        return RecordVerdict(KEEP, reason, until=until, sighting=sighting)
    if status in (STATUS_RUNNING, STATUS_UNHEALTHY):
        return RecordVerdict(STOP, f"{seen} (started by hand, or its run died before recording it): stopping it")
    return RecordVerdict(DELETE, f"{seen}: deleting it")


@dataclass(frozen=True)
class BreakEven:
    """Stop or delete, with both numbers.

    :param stop: stopping is cheaper than a cold start next time.
    :param stoppable: the type can stop at all.
    :param disk_dollars: what the stopped disk costs over the expected idle time.
    :param warm_dollars: what the cold start a warm start saves costs in GPU time.
    :param idle_hours: the expected idle time.
    :param message: the verdict in one line (logged).
    """

    stop: bool
    stoppable: bool
    disk_dollars: float
    warm_dollars: float
    idle_hours: float
    message: str


def disk_dollars_per_hour(offer: InstanceTypeOffer | None) -> float:
    """The stopped disk's price per hour: its size (``target_disk_gb``, else the create default clamped to the
    type's range) times ``disk_price_per_gb_mo`` over a 730-hour month; 0 when the catalog prices no disk."""
    if offer is None:
        return 0.0
    raw = offer.raw
    price = _number(raw.get("disk_price_per_gb_mo")) or 0.0
    target = _number(raw.get("target_disk_gb"))
    low, high = _number(raw.get("disk_min_gb")) or 0.0, _number(raw.get("disk_max_gb")) or 0.0
    size = target or max(min(DEFAULT_DISK_GB, high), low)  # the default clamped to [low, high]; low if high < low
    return size * price / HOURS_PER_MONTH


def break_even(
    offer: InstanceTypeOffer | None, *, price_per_hour: float | None, saved_seconds: float, idle_seconds: float
) -> BreakEven:
    """Stop when the disk over ``idle_seconds`` costs less than the GPU time of the cold start it saves.

    :param offer: the type's ``brev search`` row (``None``: unknown, so not known to be stoppable).
    :param price_per_hour: the instance's price (else the offer's).
    :param saved_seconds: the cold start a warm start saves (boot, pulls, staging); the type's own boot time from
        the catalog is the floor of its boot part, measured by the caller.
    :param idle_seconds: how long it would stay stopped.
    """
    idle_hours = max(idle_seconds, 0.0) / 3600.0
    if offer is None or not bool(offer.raw.get("stoppable")):
        what = offer.type if offer is not None else "its type"
        return BreakEven(False, False, 0.0, 0.0, idle_hours, f"{what} cannot be stopped (not stoppable): deleting")
    price = price_per_hour if price_per_hour is not None else offer.price_per_hour
    disk = round(disk_dollars_per_hour(offer) * idle_hours, 6)
    warm = round(price * max(saved_seconds, 0.0) / 3600.0, 6)
    stop = disk < warm
    message = (
        f"{'stopping' if stop else 'deleting'}: the disk stopped for {idle_hours:.2f} h costs ${disk:.4f}, "
        f"{'less' if stop else 'not less'} than the ${warm:.4f} of GPU time ({saved_seconds:.0f} s of boot, pulls "
        f"and staging at ${price:.2f}/h) a warm start saves"
    )
    return BreakEven(stop, True, disk, warm, idle_hours, message)


def saved_seconds(
    *, boot_seconds: float, pull_seconds: float, stage_seconds: float, catalog_boot_seconds: float | None
) -> float:
    """The cold start a warm start saves: boot (at least the type's catalog boot time), image pulls and staging."""
    boot = max(boot_seconds, catalog_boot_seconds or 0.0)
    return round(boot + max(pull_seconds, 0.0) + max(stage_seconds, 0.0), 3)


def expected_idle_seconds(*, now: float, next_run_at: float | None, max_idle: float) -> float:
    """How long a stopped instance would wait: until the DAG's next scheduled run (when the timetable gives one
    within ``max_idle``), else ``max_idle`` (after which the janitor deletes it anyway)."""
    if next_run_at is None or next_run_at <= now:
        return max_idle
    return min(next_run_at - now, max_idle)


def reuse_key_value(key: Any) -> str | None:
    """A rendered ``reuse_key``: ``None`` when empty (also ``"None"``, an unset template's rendering, as every other
    parameter reads it: :func:`~airflow_provider_brev.core.values.is_empty`); otherwise printable text, at most 200
    characters."""
    if is_empty(key):
        return None
    text = str(key).strip()
    if len(text) > 200 or not text.isprintable():
        raise BrevInvalidInputError(f"Invalid reuse_key {key!r}: use printable text of at most 200 characters.")
    return text
