"""Recovering a step's lost instance: every decision, without I/O.

A step (:class:`~airflow_provider_brev.operators.exec.BrevExecOperator` and the TAO operators) whose instance is
gone re-creates it under the same name with the spec its create task recorded, re-syncs its inputs and runs its
command again. The service that does the I/O is :mod:`airflow_provider_brev.instances.recovery`; it asks this module:

* :func:`may_be_lost` -- could this error mean the instance is gone? (a cheap filter: a command's own failure, a
  bad input or a deadline never does; the listing then decides);
* :func:`diagnose_loss` -- given the error, what ``brev ls`` says about the instance and whether it still answers
  a probe: :data:`LOST_MISSING` (not listed, or DELETING), :data:`LOST_FAILURE` (FAILURE), :data:`LOST_UNREACHABLE`
  (RUNNING but unreachable past the failure budget), :data:`LOST_REPLACED` (gone, and another instance -- another
  id -- now holds its name), or ``None`` (not lost: the original error stands);
* :func:`decide_recovery` -- recover, or give up with which message (budget spent, adopted instance, no record,
  the instance expired and the janitor deleted it, the name taken by someone else);
* :func:`recoveries_used` -- the count so far, from the task state store and the XCom fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.identity import REPLACED, identity_verdict
from airflow_provider_brev.core.protocol.output import STATUS_DELETING, STATUS_FAILURE, STATUS_RUNNING, BrevInstance
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevCommandError,
    BrevInstanceFailedError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevJobLostError,
    BrevProcessStartError,
    BrevTransferError,
    BrevTransientError,
    retry_policy,
)

if TYPE_CHECKING:
    from collections.abc import Collection

#: :func:`diagnose_loss` verdicts.
LOST_MISSING = "missing"
LOST_FAILURE = "failure"
LOST_UNREACHABLE = "unreachable"
LOST_REPLACED = "replaced"

#: Event status of the remote-job trigger when following failed in a way that may mean the instance is gone (the
#: worker confirms with ``brev ls`` and recovers).
EVENT_INSTANCE_LOST = "instance_lost"

#: :attr:`RecoveryDecision.action` values.
RECOVER = "recover"
GIVE_UP = "give_up"

DEFAULT_MAX_INSTANCE_RECOVERIES = 2

#: Errors that may mean the instance is gone (the listing decides); anything else is never a loss.
_SUSPECTS = (
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInstanceFailedError,
    BrevTransientError,
    BrevTransferError,
    BrevCLIError,
)


def may_be_lost(error: BaseException) -> bool:
    """Whether ``error`` could mean the step's instance is gone (never a command's own failure, a bad input, a
    failure no retry can fix, a timeout, an authentication problem, or a process this machine could not start)."""
    if isinstance(error, BrevCommandError | BrevProcessStartError) or retry_policy(error) == "never":
        return False
    return isinstance(error, _SUSPECTS)


def diagnose_loss(
    error: BaseException,
    instance: BrevInstance | None,
    *,
    reachable: bool | None = None,
    known_ids: Collection[str] = (),
) -> str | None:
    """Whether the step's instance is lost, given the error that stopped the step.

    :param error: what stopped the step (a poll, a launch, a sync ...).
    :param instance: what ``brev ls`` lists under the instance's name (``None``: not listed).
    :param reachable: whether the instance answered a probe just now (``None``: not probed).
    :param known_ids: the ids the DAG run recorded for the name (empty: not known, the name decides).
    :return: :data:`LOST_MISSING`, :data:`LOST_FAILURE`, :data:`LOST_UNREACHABLE`, :data:`LOST_REPLACED` or ``None``
        (not lost).
    """
    if not may_be_lost(error):
        return None
    if instance is not None and identity_verdict(instance, known_ids) == REPLACED:
        return LOST_REPLACED
    if instance is None or instance.status == STATUS_DELETING:
        return LOST_MISSING
    if instance.status == STATUS_FAILURE or instance.build_status == "CREATE_FAILED":
        return LOST_FAILURE
    unreachable_error = isinstance(error, BrevTransientError) and not isinstance(error, BrevJobLostError)
    if instance.status == STATUS_RUNNING and unreachable_error and reachable is False:
        return LOST_UNREACHABLE
    return None


def needs_probe(error: BaseException, instance: BrevInstance | None, known_ids: Collection[str] = ()) -> bool:
    """Whether :func:`diagnose_loss` needs the ``reachable`` answer (a RUNNING instance after a transient error)."""
    return (
        may_be_lost(error)
        and instance is not None
        and identity_verdict(instance, known_ids) != REPLACED
        and instance.status == STATUS_RUNNING
        and isinstance(error, BrevTransientError)
        and not isinstance(error, BrevJobLostError)
    )


@dataclass(frozen=True)
class RecoveryDecision:
    """What to do about a lost instance.

    :param action: :data:`RECOVER` or :data:`GIVE_UP` (raise ``BrevInstanceLostError`` with ``message``).
    :param message: the log line (recover) or the error message (give up).
    :param number: the number of this recovery (1-based; recover only).
    """

    action: str
    message: str
    number: int = 0


def describe_loss(loss: str) -> str:
    return {
        LOST_MISSING: "is gone (deleted, not listed by brev ls)",
        LOST_FAILURE: "is in FAILURE",
        LOST_UNREACHABLE: "is RUNNING but unreachable past its failure budget",
        LOST_REPLACED: "is gone, and another instance now holds its name",
    }.get(loss, loss)


def decide_recovery(
    *,
    name: str,
    loss: str,
    owned: bool | None,
    ephemeral: bool,
    used: int,
    budget: int,
    lost_at: datetime,
    create_task_id: str | None = None,
    expires_at: datetime | None = None,
) -> RecoveryDecision:
    """Recover (re-create the instance under the same name and spec) or give up.

    :param name: the instance.
    :param loss: the :func:`diagnose_loss` verdict.
    :param owned: what the create task recorded (``True`` owned, ``False`` adopted, ``None`` no record).
    :param ephemeral: the step created the instance itself (its own request is the record).
    :param used: recoveries this task instance already made (across tries).
    :param budget: ``max_instance_recoveries``.
    :param lost_at: when the loss was noticed (UTC).
    :param create_task_id: the create task named explicitly, if any (for the message).
    :param expires_at: the expiry in a provider-managed name (``max_lifetime``): an expired instance is the
        janitor's, never re-created under its old expiry.
    """
    when = lost_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    what = f"Instance {name!r} {describe_loss(loss)} (noticed at {when})"
    if loss == LOST_REPLACED:
        return RecoveryDecision(
            GIVE_UP,
            f"{what}: it was created by someone else after this DAG run's instance was lost, so the provider "
            "neither uses nor deletes it, and cannot re-create its own under the taken name. Choose another "
            "instance name, or let the DAG derive one (omit instance_name).",
        )
    if expires_at is not None and lost_at >= expires_at:
        expiry = expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return RecoveryDecision(
            GIVE_UP,
            f"{what}. Its name says it expired at {expiry} (max_lifetime): the janitor deletes expired instances, "
            "so the provider does not re-create it under its old expiry. Raise max_lifetime for steps that run "
            "longer.",
        )
    if not ephemeral and owned is None:
        where = f"task {create_task_id!r}" if create_task_id else "any upstream task"
        return RecoveryDecision(
            GIVE_UP,
            f"{what}, and no create task record names it ({where} has no XCom 'brev_instance' for it), so it "
            "cannot be re-created. To enable recovery, create the instance with BrevCreateInstanceOperator upstream "
            "of this task (e.g. instance_name=create.output), or pass create_task_id=<its task id>; or use the "
            "ephemeral mode (gpu=... instead of instance_name).",
        )
    if not ephemeral and not owned:
        return RecoveryDecision(
            GIVE_UP,
            f"{what}. It was adopted (adopt_existing=True), not created by this DAG run, so the provider does not "
            "re-create it: restore it yourself, or let the DAG create its own instance.",
        )
    if used >= budget:
        return RecoveryDecision(
            GIVE_UP,
            f"{what}; max_instance_recoveries={budget} already used by this task ({used} re-creation(s)): giving "
            "up. Nothing is left running by this task; raise max_instance_recoveries to allow more.",
        )
    number = used + 1
    return RecoveryDecision(
        RECOVER, f"instance {name} lost at {when}; re-created, recovery {number}/{budget}", number=number
    )


def recoveries_used(*values: Any) -> int:
    """The recoveries counted so far: the largest count among the records given (task state store, XCom);
    anything unreadable counts as 0."""
    best = 0
    for value in values:
        count = value.get("count") if isinstance(value, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > best:
            best = count
    return best


def validate_budget(value: Any) -> int:
    """``max_instance_recoveries`` as a non-negative int (raises :class:`BrevInvalidInputError`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BrevInvalidInputError(f"max_instance_recoveries must be a non-negative integer, got {value!r}.")
    return value
