"""The janitor's decisions: which listed instance is deleted, kept or ignored, and why (pure).

One function, :func:`plan_sweep`, decides for the janitor operator
(:class:`~airflow_provider_brev.operators.janitor.BrevSweepInstancesOperator`) and for ``airflow brev sweep``
(:mod:`airflow_provider_brev.cli`) alike; :mod:`airflow_provider_brev.instances.sweep` carries the plan out.

* An instance recorded for warm reuse (:mod:`airflow_provider_brev.core.instances.warm_pool`), by a record that proved
  it may act (:func:`~airflow_provider_brev.core.instances.warm_pool_records.ownership_problem`), is judged by that record
  (:func:`~airflow_provider_brev.core.instances.warm_pool.janitor_verdict`), not by its name's expiry: a reused instance
  outlives the run that named it. It may be stopped (recorded stopped, found running) as well as deleted. A record
  whose instance is gone, or whose name another id holds, is forgotten.
* Any other instance (also one whose record failed the proof: the reason says so) is the janitor's only when its name parses as a managed name with the owner prefix
  (:func:`~airflow_provider_brev.core.protocol.names.parse_managed_name`); it is deleted once its expiry is before the
  cutoff (now less the grace period), unless it is already DELETING. Every other name is ignored.
* Deletions run recorded instances first, then the managed ones oldest expiry first, so a sweep cut short removes
  the longest-leaked instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from airflow_provider_brev.core.instances.warm_pool import ALREADY_DELETING as RECORD_DELETING
from airflow_provider_brev.core.instances.warm_pool import DELETE as RECORD_DELETE
from airflow_provider_brev.core.instances.warm_pool import DROP, janitor_verdict
from airflow_provider_brev.core.instances.warm_pool import KEEP as RECORD_KEEP
from airflow_provider_brev.core.instances.warm_pool import STOP as RECORD_STOP
from airflow_provider_brev.core.protocol.names import parse_managed_name
from airflow_provider_brev.core.protocol.output import STATUS_DELETING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_provider_brev.core.instances.warm_pool import RecordVerdict, ReuseEntry, Sighting
    from airflow_provider_brev.core.protocol.output import BrevInstance


@dataclass(frozen=True)
class SweepSpec:
    """A janitor task's checked parameters (built by :func:`~airflow_provider_brev.core.validation.sweep_spec`).

    :param name_prefix: the owner prefix to sweep (``None``: the connection's).
    :param grace_period: extra time after an instance's expiry before it is deleted.
    :param dry_run: only report what would be deleted or stopped.
    :param wait_for_deletion: wait until ``brev ls`` no longer lists the deleted instances.
    :param deletion_timeout: seconds to wait for that.
    :param poll_interval: seconds between listings while waiting.
    :param cli_retry_limit: attempts per ``brev`` call (``None``: the hook's).
    :param cli_retry_delay: initial backoff between them (``None``: the hook's).
    """

    name_prefix: str | None
    grace_period: timedelta
    dry_run: bool
    wait_for_deletion: bool
    deletion_timeout: float
    poll_interval: float
    cli_retry_limit: int | None
    cli_retry_delay: float | None


# What the janitor does with a listed instance.
DELETE = "delete"
STOP = "stop"
KEEP = "keep"
IGNORE = "ignore"
ALREADY_DELETING = "already_deleting"


@dataclass(frozen=True)
class SweepVerdict:
    """The janitor's decision on one listed instance.

    :param instance: the instance as ``brev ls`` listed it (deleted by its id).
    :param action: :data:`DELETE`, :data:`STOP`, :data:`KEEP`, :data:`IGNORE` or :data:`ALREADY_DELETING`.
    :param reason: why, in words (logged, and printed by ``airflow brev sweep``).
    :param expires_at: when the janitor may delete it (its name's expiry, or its reuse record's), when known.
    :param reuse_key: the reuse key it is recorded under, if any.
    :param managed: whether it is the janitor's at all (a managed name with the prefix, or a reuse record).
    """

    instance: BrevInstance
    action: str
    reason: str
    expires_at: datetime | None = None
    reuse_key: str | None = None
    managed: bool = False

    @property
    def expires(self) -> str:
        """``expires_at`` in ISO form (``""`` when unknown)."""
        return self.expires_at.isoformat() if self.expires_at is not None else ""


@dataclass(frozen=True)
class SweepPlan:
    """Every listed instance's verdict, the reuse records to forget and the sightings to keep.

    :param verdicts: one per listed instance: recorded ones first (by key), then the others by name.
    :param forget: each reuse record whose instance is gone or another id holds its name.
    :param sightings: instance id -> the sighting of a stopped-recorded instance found running, to keep until the
        next sweep (:func:`~airflow_provider_brev.core.instances.warm_pool.janitor_verdict`); any other is forgotten.
    """

    verdicts: list[SweepVerdict] = field(default_factory=list)
    forget: list[ReuseEntry] = field(default_factory=list)
    sightings: dict[str, Sighting] = field(default_factory=dict)

    def deletions(self) -> list[SweepVerdict]:
        """The verdicts to carry out, in order: recorded instances first, then managed names by expiry."""
        recorded = [v for v in self.verdicts if v.action == DELETE and v.reuse_key is not None]
        named = [v for v in self.verdicts if v.action == DELETE and v.reuse_key is None]
        named.sort(key=lambda v: (v.expires_at or datetime.min.replace(tzinfo=UTC), v.instance.name))
        return recorded + named

    def of(self, action: str) -> list[SweepVerdict]:
        """The verdicts with ``action``, in plan order."""
        return [v for v in self.verdicts if v.action == action]


_ACTIONS = {
    RECORD_KEEP: KEEP,
    RECORD_DELETE: DELETE,
    RECORD_STOP: STOP,
    RECORD_DELETING: ALREADY_DELETING,
}


def _recorded_verdict(entry: ReuseEntry, live: BrevInstance, verdict: RecordVerdict) -> SweepVerdict:
    until = datetime.fromtimestamp(verdict.until if verdict.until is not None else entry.expires_at(), UTC)
    reason = f"reuse key {entry.key!r}, {verdict.reason}"
    return SweepVerdict(live, _ACTIONS[verdict.action], reason, until, entry.key, managed=True)


def plan_sweep(
    instances: Sequence[BrevInstance],
    *,
    prefix: str,
    cutoff: datetime,
    records: Mapping[str, ReuseEntry],
    now: datetime,
    sightings: Mapping[str, Sighting] | None = None,
    unproven: Mapping[str, str] | None = None,
) -> SweepPlan:
    """What the janitor does with each of ``instances`` (module docstring).

    :param instances: what ``brev ls`` listed.
    :param prefix: the owner prefix of the managed names to sweep.
    :param cutoff: a managed name expired before it is deleted (now less the grace period).
    :param records: the warm-reuse records that proved they may act, by instance id.
    :param now: the time reuse records are judged at.
    :param sightings: the sightings earlier sweeps kept, by instance id.
    :param unproven: instance id -> why its record may not act (said in the verdict's reason).
    """
    plan = SweepPlan()
    handled: set[str] = set()
    for entry in sorted(records.values(), key=lambda e: (e.key, e.name, e.id)):
        live = next((i for i in instances if i.name == entry.name), None)
        judged = janitor_verdict(entry, live, now.timestamp(), (sightings or {}).get(entry.id))
        if judged.action == DROP or live is None:
            plan.forget.append(entry)
            continue
        handled.add(live.id)
        if judged.sighting is not None:
            plan.sightings[live.id] = judged.sighting
        plan.verdicts.append(_recorded_verdict(entry, live, judged))
    for instance in sorted(instances, key=lambda i: i.name):
        if instance.id in handled:
            continue
        verdict = _named_verdict(instance, prefix, cutoff)
        why = (unproven or {}).get(instance.id)
        plan.verdicts.append(
            replace(verdict, reason=f"{verdict.reason}; its reuse record is ignored: {why}") if why else verdict
        )
    return plan


def _named_verdict(instance: BrevInstance, prefix: str, cutoff: datetime) -> SweepVerdict:
    """An instance without a record that may act: judged by its name."""
    managed = parse_managed_name(instance.name)
    if managed is None or managed.prefix != prefix:
        return SweepVerdict(instance, IGNORE, f"not a managed name with prefix {prefix!r}")
    expires = managed.expires_at
    if instance.status == STATUS_DELETING:
        reason = f"already DELETING (expires {expires.isoformat()})"
        return SweepVerdict(instance, ALREADY_DELETING, reason, expires, managed=True)
    if not managed.is_expired(cutoff):
        return SweepVerdict(instance, KEEP, f"expires {expires.isoformat()}", expires, managed=True)
    return SweepVerdict(instance, DELETE, f"expired {expires.isoformat()}", expires, managed=True)
