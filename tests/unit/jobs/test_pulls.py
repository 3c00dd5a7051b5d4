"""Unit tests of ``airflow_provider_brev/jobs/pulls.py``."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_brev.core.jobs.handle import RUNNING
from airflow_provider_brev.core.jobs.pulls import pull_job
from airflow_provider_brev.core.jobs.remote import PollResult
from airflow_provider_brev.exceptions import BrevImagePullError, BrevTaskKilledError
from airflow_provider_brev.jobs.pulls import await_pull
from unit.core.jobs.pulls_helpers import PYT


class PullHook:
    """The two calls :func:`await_pull` makes, answered as a pull that never ends (the I/O boundary only)."""

    def __init__(self) -> None:
        self.killed: list[str] = []

    def poll_job(self, name, job, *, offset, wait=0.0):
        return PollResult(state=RUNNING, exit_code=None, log_size=5, pid=7, chunk=b"layer", offset=offset)

    def kill_job(self, name, job, *, grace_seconds):
        self.killed.append(job.job_id)
        return "killed"


def test_a_pull_that_outlives_pull_timeout_is_stopped_and_fails_the_step():
    hook = PullHook()
    with pytest.raises(BrevImagePullError, match=r"did not finish within pull_timeout \(0 s\)"):
        await_pull(hook, "box", PYT, timeout=0, log=logging.getLogger("t"), killed=lambda: False)
    assert hook.killed == [pull_job(PYT).job_id]


def test_a_killed_task_stops_waiting_and_leaves_the_shared_pull_running():
    hook = PullHook()
    with pytest.raises(BrevTaskKilledError, match="killed while waiting for the pull"):
        await_pull(hook, "box", PYT, timeout=60, log=logging.getLogger("t"), killed=lambda: True)
    assert hook.killed == []
