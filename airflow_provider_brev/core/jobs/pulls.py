"""Background image pulls, pure: one detached job per image and instance, and what its state means.

A step that runs a container starts its image's ``docker pull`` as a detached job (:mod:`.scripts`' launcher, the
same as a step's own command) before its inputs sync, and waits for it only after the sync; the first step on an
instance also starts the pulls of the images later steps on that instance declare, once its own image is there.
Nothing here runs a process: the driver is :mod:`airflow_provider_brev.jobs.pulls`.

One job per image and instance
    The job id is derived from the image reference alone (:func:`pull_job`), under its own base directory
    (:data:`PULL_BASE_DIR`), so the launcher's ``mkdir`` guard is a per-image lock: concurrent steps and retries
    that start the pull of one image find the job already there (``existing``) and start nothing. A job that
    finished with exit code 0 is the image's done-marker: no later step pulls that image again. A pull that is
    still running is waited for, never restarted.

What a start finds (:func:`pull_start`)
    ``started`` (this call launched it), ``running`` (someone else's pull: wait for it), ``done`` (pulled before),
    or ``restart``: the earlier pull failed, was killed or was lost (a reboot): its directory is removed and the
    pull starts again -- a failed prefetch costs the step that needs the image one more pull, never its run.

What a wait finds (:func:`pull_outcome`)
    ``wait`` while it runs; ``done`` on exit code 0; ``failed`` otherwise (the step raises
    :class:`~airflow_provider_brev.exceptions.BrevImagePullError` with the pull's last log line).
"""

from __future__ import annotations

import hashlib
import shlex
from typing import TYPE_CHECKING, Literal

from airflow_provider_brev.core.jobs.handle import FINISHED, RUNNING, RemoteJob

if TYPE_CHECKING:
    from airflow_provider_brev.core.jobs.remote import LaunchResult, PollResult

#: Where the pull jobs live on the instance (relative to ``$HOME``), apart from the steps' own jobs.
PULL_BASE_DIR = ".airflow-brev/pulls"

PullStart = Literal["started", "running", "done", "restart"]
PullOutcome = Literal["wait", "done", "failed"]


def pull_job(image: str) -> RemoteJob:
    """The one pull job of ``image`` on an instance (the same id for every step, try and worker)."""
    return RemoteJob(f"pull-{hashlib.sha256(image.encode('utf-8')).hexdigest()[:24]}", PULL_BASE_DIR)


def pull_command(image: str) -> str:
    """The job's command: ``docker pull <image>`` (the registry login happened before, with the key on stdin)."""
    return f"docker pull {shlex.quote(image)}"


def pull_start(launch: LaunchResult) -> PullStart:
    """What a launch of the pull job found (see the module doc)."""
    if launch.launched:
        return "started"
    existing = launch.existing
    if existing is None:
        return "restart"
    if existing.state == RUNNING:
        return "running"
    if existing.state == FINISHED and existing.exit_code == 0:
        return "done"
    return "restart"


def pull_outcome(poll: PollResult) -> PullOutcome:
    """What a poll of the pull job means for the step that needs the image (see the module doc)."""
    if poll.state == RUNNING:
        return "wait"
    if poll.state == FINISHED and poll.exit_code == 0:
        return "done"
    return "failed"


def next_poll_delay(previous: float, *, first: float = 0.2, longest: float = 5.0) -> float:
    """Seconds before the next poll of a pull: short at first (a pull of a present image takes a second), then
    doubling up to ``longest`` (a multi-GB pull takes minutes; each poll is one ``brev exec``)."""
    return first if previous <= 0 else min(previous * 2, longest)
