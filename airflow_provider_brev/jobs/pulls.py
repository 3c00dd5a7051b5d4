"""Background image pulls on an instance: start them, wait for the one a step needs (the rules:
:mod:`airflow_provider_brev.core.jobs.pulls`).

:func:`start_pull` launches an image's pull job (detached, at most one per image and instance; a failed or lost
earlier pull is removed and started again); :func:`await_pull` follows it until it ended and raises
:class:`~airflow_provider_brev.exceptions.BrevImagePullError` when it failed or outlived ``pull_timeout`` (the pull
is then stopped: nothing keeps running for a step that gave up). The pull's output goes to the task log at DEBUG.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.jobs.pulls import (
    PullStart,
    next_poll_delay,
    pull_command,
    pull_job,
    pull_outcome,
    pull_start,
)
from airflow_provider_brev.exceptions import BrevImagePullError, BrevTaskKilledError

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.hooks.brev import BrevHook


def start_pull(hook: BrevHook, name: str, image: str, log: Any) -> PullStart:
    """Start the background pull of ``image`` on ``name`` unless it runs or succeeded there already; returns what
    the start found (``restart`` is reported after the pull was started again)."""
    job = pull_job(image)
    found = pull_start(hook.launch_job(name, job, pull_command(image)))
    if found == "restart":  # failed, killed or lost earlier: start it again
        hook.cleanup_job(name, job)
        again = pull_start(hook.launch_job(name, job, pull_command(image)))
        log.info("The earlier pull of %s on %s did not succeed: pulling it again (%s).", image, name, again)
        return "restart"
    log.info("Image %s on %s: %s.", image, name, _SAID[found])
    return found


_SAID = {
    "started": "pulling it in the background",
    "running": "another step is pulling it already",
    "done": "pulled before, on this instance",
}


def await_pull(hook: BrevHook, name: str, image: str, *, timeout: float, log: Any, killed: Callable[[], bool]) -> float:
    """Wait until the background pull of ``image`` on ``name`` ended; returns the seconds waited.

    :raises BrevImagePullError: the pull failed (its last line is quoted), or it did not end within ``timeout``.
    :raises BrevTaskKilledError: the task was killed while it waited.
    """
    job, started, delay, offset, last = pull_job(image), time.monotonic(), 0.0, 0, ""
    while True:
        poll = hook.poll_job(name, job, offset=offset, wait=delay)  # waits on the instance for the pull's end
        for line in poll.chunk.decode("utf-8", "replace").splitlines():
            log.debug("docker pull: %s", line)
            last = line.strip() or last
        offset = poll.next_offset
        outcome = pull_outcome(poll)
        if outcome == "done" and poll.complete:
            return round(time.monotonic() - started, 3)
        if outcome == "failed" and poll.complete:
            raise BrevImagePullError(f"Pulling {image} on {name} failed: {last or poll.state}")
        if killed():
            raise BrevTaskKilledError(f"The task was killed while waiting for the pull of {image}.")
        if time.monotonic() - started > timeout:
            hook.kill_job(name, job, grace_seconds=1)
            raise BrevImagePullError(f"Pulling {image} on {name} did not finish within pull_timeout ({timeout:.0f} s).")
        delay = next_poll_delay(delay) if outcome == "wait" else 0.0
