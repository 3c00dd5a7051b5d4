"""What a Lepton job's state means for a step (pure).

Lepton reports a job's ``status.state`` (``leptonai.api.v2.types.job.LeptonJobState``); a step only needs to know
which of a few *phases* it is in. :func:`job_phase` maps every state the SDK knows (and an absent job) onto them;
:func:`earlier_job_verdict` says what a try does about a job an earlier try (or the same try, before its worker was
lost) submitted, with the verdicts of :mod:`airflow_provider_brev.core.jobs.attempts`.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_brev.core.jobs.attempts import COLLECT, IGNORE, REATTACH, RELAUNCH, SUPERSEDED

#: Waiting for resources in its node group (the queue limit applies).
QUEUED = "queued"
#: Scheduled: its container is being created or restarted (``max_failure_retry``).
STARTING = "starting"
RUNNING = "running"
#: Ended by itself, every completion succeeded.
SUCCEEDED = "succeeded"
#: Ended by itself with a failure (after its ``max_failure_retry`` restarts).
FAILED = "failed"
#: Ended because it was stopped or deleted (by the provider's kill, or by someone else).
STOPPED = "stopped"
#: The API has no such job (never submitted, or removed after ``ttl_seconds_after_finished``).
MISSING = "missing"
#: A state this provider does not know: followed like a running job.
UNKNOWN = "unknown"

_PHASES = {
    "Queueing": QUEUED,
    "Awaiting": QUEUED,
    "PendingRetry": STARTING,
    "Starting": STARTING,
    "Restarting": STARTING,
    "Running": RUNNING,
    "Completed": SUCCEEDED,
    "Failed": FAILED,
    "Stopped": STOPPED,
    "Stopping": STOPPED,
    "Deleting": STOPPED,
    "Deleted": STOPPED,
    "Terminating": STOPPED,
}
#: Phases in which the job will not run again.
ENDED = frozenset({SUCCEEDED, FAILED, STOPPED, MISSING})
#: Phases in which the job still holds (or waits for) resources.
ALIVE = frozenset({QUEUED, STARTING, RUNNING, UNKNOWN})


def job_phase(job: dict[str, Any] | None) -> str:
    """The phase of a job as the API returned it (``None``: no such job). An ``Archived`` job ended: it
    succeeded when every completion did."""
    if job is None:
        return MISSING
    status = job.get("status") or {}
    state = str(status.get("state") or "")
    if state == "Archived":
        completions = int((job.get("spec") or {}).get("completions") or 1)
        return SUCCEEDED if int(status.get("succeeded") or 0) >= completions else FAILED
    return _PHASES.get(state, UNKNOWN if state else STARTING)


def earlier_job_verdict(phase: str, *, collectable: bool = True) -> str:
    """What to do about a job an earlier try submitted: :data:`REATTACH` while it is alive (never submit a second
    one), :data:`COLLECT` its success when its try is of this generation (:data:`SUPERSEDED` otherwise: the task
    was cleared), :data:`RELAUNCH` when it failed or was stopped, :data:`IGNORE` when there is none."""
    if phase in ALIVE:
        return REATTACH
    if phase == SUCCEEDED:
        return COLLECT if collectable else SUPERSEDED
    if phase in (FAILED, STOPPED):
        return RELAUNCH
    return IGNORE
