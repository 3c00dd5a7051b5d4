"""The janitor's decisions: which listed instance is deleted, kept or ignored, and why (pure).

One function, :func:`plan_sweep`, decides for the janitor operator
(:class:`~airflow_provider_brev.operators.janitor.BrevSweepInstancesOperator`) and for ``airflow brev sweep``
(:mod:`airflow_provider_brev.commands`) alike; :mod:`airflow_provider_brev.utils.sweep` carries the plan out.

* An instance recorded for warm reuse (:mod:`airflow_provider_brev.cli.instances.reuse`) is judged by its record
  (:func:`~airflow_provider_brev.cli.instances.reuse.janitor_verdict`), not by its name's expiry: a reused instance
  outlives the run that named it. A record whose instance is gone, or whose name another id holds, is forgotten.
* Any other instance is the janitor's only when its name parses as a managed name with the owner prefix
  (:func:`~airflow_provider_brev.cli.protocol.names.parse_managed_name`); it is deleted once its expiry is before the
  cutoff (now less the grace period), unless it is already DELETING. Every other name is ignored.
* Deletions run recorded instances first, then the managed ones oldest expiry first, so a sweep cut short removes
  the longest-leaked instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_provider_brev.cli.instances.reuse import DROP, STATE_STOPPED, janitor_verdict
from airflow_provider_brev.cli.instances.reuse import KEEP as RECORD_KEEP
from airflow_provider_brev.cli.protocol.names import parse_managed_name
from airflow_provider_brev.cli.protocol.output import STATUS_DELETING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_provider_brev.cli.instances.reuse import ReuseEntry
    from airflow_provider_brev.cli.protocol.output import BrevInstance

# What the janitor does with a listed instance.
DELETE = "delete"
KEEP = "keep"
IGNORE = "ignore"
ALREADY_DELETING = "already_deleting"


@dataclass(frozen=True)
class SweepVerdict:
    """The janitor's decision on one listed instance.

    :param instance: the instance as ``brev ls`` listed it (deleted by its id).
    :param action: :data:`DELETE`, :data:`KEEP`, :data:`IGNORE` or :data:`ALREADY_DELETING`.
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
    """Every listed instance's verdict, and the reuse records to forget.

    :param verdicts: one per listed instance: recorded ones first (by key), then the others by name.
    :param forget: ``(key, entry)`` of each reuse record whose instance is gone or another id holds its name.
    """

    verdicts: list[SweepVerdict] = field(default_factory=list)
    forget: list[tuple[str, ReuseEntry]] = field(default_factory=list)

    def deletions(self) -> list[SweepVerdict]:
        """The verdicts to carry out, in order: recorded instances first, then managed names by expiry."""
        recorded = [v for v in self.verdicts if v.action == DELETE and v.reuse_key is not None]
        named = [v for v in self.verdicts if v.action == DELETE and v.reuse_key is None]
        named.sort(key=lambda v: (v.expires_at or datetime.min.replace(tzinfo=UTC), v.instance.name))
        return recorded + named

    def of(self, action: str) -> list[SweepVerdict]:
        """The verdicts with ``action``, in plan order."""
        return [v for v in self.verdicts if v.action == action]


def _recorded_verdict(key: str, entry: ReuseEntry, live: BrevInstance, verdict: str) -> SweepVerdict:
    until = datetime.fromtimestamp(entry.expires_at(), UTC)
    when = until.isoformat(timespec="minutes")
    if verdict == RECORD_KEEP:
        reason = f"reuse key {key!r}, {entry.state}, until {when}"
        return SweepVerdict(live, KEEP, reason, until, key, managed=True)
    why = "stopped longer than its max_idle" if entry.state == STATE_STOPPED else "in use past max_lifetime"
    return SweepVerdict(live, DELETE, f"reuse key {key!r}: {why} ({when})", until, key, managed=True)


def plan_sweep(
    instances: Sequence[BrevInstance],
    *,
    prefix: str,
    cutoff: datetime,
    records: Mapping[str, Sequence[ReuseEntry]],
    now: datetime,
) -> SweepPlan:
    """What the janitor does with each of ``instances`` (module docstring).

    :param instances: what ``brev ls`` listed.
    :param prefix: the owner prefix of the managed names to sweep.
    :param cutoff: a managed name expired before it is deleted (now less the grace period).
    :param records: the warm-reuse records (reuse key -> entries).
    :param now: the time reuse records are judged at.
    """
    plan = SweepPlan()
    handled: set[str] = set()
    for key, entries in sorted(records.items()):
        for entry in entries:
            live = next((i for i in instances if i.name == entry.name), None)
            verdict = janitor_verdict(entry, live, now.timestamp())
            if verdict == DROP or live is None:
                plan.forget.append((key, entry))
                continue
            handled.add(live.id)
            plan.verdicts.append(_recorded_verdict(key, entry, live, verdict))
    for instance in sorted(instances, key=lambda i: i.name):
        if instance.id in handled:
            continue
        managed = parse_managed_name(instance.name)
        if managed is None or managed.prefix != prefix:
            reason = f"not a managed name with prefix {prefix!r}"
            plan.verdicts.append(SweepVerdict(instance, IGNORE, reason))
            continue
        expires = managed.expires_at
        if instance.status == STATUS_DELETING:
            reason = f"already DELETING (expires {expires.isoformat()})"
            plan.verdicts.append(SweepVerdict(instance, ALREADY_DELETING, reason, expires, managed=True))
        elif not managed.is_expired(cutoff):
            plan.verdicts.append(SweepVerdict(instance, KEEP, f"expires {expires.isoformat()}", expires, managed=True))
        else:
            plan.verdicts.append(
                SweepVerdict(instance, DELETE, f"expired {expires.isoformat()}", expires, managed=True)
            )
    return plan
