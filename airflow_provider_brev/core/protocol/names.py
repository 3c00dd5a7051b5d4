"""Instance names: validation (Brev's own rules) and the provider's owner-prefixed, expiring default names.

Brev has no labels, tags or creation time in ``brev ls --json``, so ownership and expiry live in the name:

``<prefix>-<slug>-<hash8>-x<YYYYMMDDHHMM>``

* ``prefix`` marks instances this provider created (default ``afbrev``); the janitor never touches others;
* ``slug`` is a readable, truncated form of ``dag_id``/``task_id``;
* ``hash8`` is derived from dag id, run id, task id and map index (not the try number), so a retry or a
  cleared task computes the same name and adopts the instance instead of creating a second one;
* ``x<YYYYMMDDHHMM>`` is the UTC expiry after which the janitor may delete the instance.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from airflow_provider_brev.exceptions import BrevInvalidInputError

MAX_NAME_LENGTH = 63
DEFAULT_OWNER_PREFIX = "afbrev"
DEFAULT_MAX_LIFETIME = timedelta(hours=24)
"""How long after its run the janitor may consider a created instance expired: 24 hours."""
_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{1,11}$")
_EXPIRY_FORMAT = "%Y%m%d%H%M"
_MANAGED_RE = re.compile(
    r"^(?P<prefix>[a-z][a-z0-9]{1,11})-(?P<slug>[a-z0-9-]*?)-?(?P<hash>[0-9a-f]{8})-x(?P<expiry>\d{12})$"
)


def validate_instance_name(name: object) -> str:
    """Return ``name`` if Brev accepts it, else raise :class:`BrevInvalidInputError` saying why.

    Same rules as the CLI (``pkg/names/validate.go``): 1-63 characters, starting with a letter or digit,
    then letters, digits, ``-``, ``_`` or ``.``.
    """
    if not isinstance(name, str) or not name:
        raise BrevInvalidInputError("The instance name is empty: pass instance_name or let the operator derive one.")
    if len(name) > MAX_NAME_LENGTH:
        raise BrevInvalidInputError(
            f"Instance name {name!r} is {len(name)} characters long; Brev allows at most {MAX_NAME_LENGTH}."
        )
    if not _NAME_RE.match(name):
        raise BrevInvalidInputError(
            f"Invalid instance name {name!r}: it must start with a letter or digit and contain only letters, "
            "digits, hyphens, underscores and dots."
        )
    return name


def _slug(text: str) -> str:
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


def validate_owner_prefix(prefix: str) -> str:
    if not _PREFIX_RE.match(prefix or ""):
        raise BrevInvalidInputError(
            f"Invalid owner prefix {prefix!r}: use 2-12 lowercase letters/digits starting with a letter."
        )
    return prefix


def expiry_minute(expires_at: datetime) -> datetime:
    """``expires_at`` (UTC) rounded up to the whole minute a name can hold."""
    utc = expires_at.astimezone(UTC)
    whole = utc.replace(second=0, microsecond=0)
    return whole if whole == utc else whole + timedelta(minutes=1)


def name_digest(*, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The 8 hex digits a managed name carries for the task that derives it (sha256 of its four parts)."""
    return hashlib.sha256(f"{dag_id}\x00{run_id}\x00{task_id}\x00{map_index}".encode()).hexdigest()[:8]


def managed_instance_name(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    expires_at: datetime,
    map_index: int = -1,
    prefix: str = DEFAULT_OWNER_PREFIX,
) -> str:
    """A deterministic, valid (≤ 63 chars) name that carries the owner prefix and the expiry.

    The name holds the expiry to the minute, rounded *up*: an instance never expires before ``expires_at``
    (rounding down would let the janitor delete it up to 59 s early, and at once for a lifetime under a minute).
    """
    validate_owner_prefix(prefix)
    digest = name_digest(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)
    expiry = expiry_minute(expires_at).strftime(_EXPIRY_FORMAT)
    fixed = len(prefix) + 1 + 1 + len(digest) + 2 + len(expiry)  # prefix- slug - hash -x expiry
    room = MAX_NAME_LENGTH - fixed
    slug = _slug(f"{dag_id}-{task_id}")[:room].strip("-")
    name = f"{prefix}-{slug}-{digest}-x{expiry}" if slug else f"{prefix}-{digest}-x{expiry}"
    return validate_instance_name(name)


@dataclass(frozen=True)
class ManagedName:
    """The parts of a name made by :func:`managed_instance_name`."""

    prefix: str
    slug: str
    digest: str
    expires_at: datetime

    def is_expired(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.expires_at


def parse_managed_name(name: str) -> ManagedName | None:
    """Parse a provider-made name, or return ``None`` for any other name (never guess)."""
    match = _MANAGED_RE.match(name or "")
    if not match:
        return None
    try:
        expires = datetime.strptime(match.group("expiry"), _EXPIRY_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return ManagedName(
        prefix=match.group("prefix"), slug=match.group("slug"), digest=match.group("hash"), expires_at=expires
    )
