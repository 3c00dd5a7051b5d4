"""Unit tests of ``airflow_provider_brev/jobs/runner.py``."""

from __future__ import annotations

import logging

from airflow_provider_brev.core.jobs.follower import REMOTE_LINE_PREFIX, FollowPolicy
from airflow_provider_brev.core.jobs.remote import FINISHED
from airflow_provider_brev.jobs.runner import JobRunner
from unit.job_runner_helpers import JOB, NAME, FakeClock, FakeJobHook, Records, lines_of


def test_resume_from_an_offset_shows_only_the_rest():
    clock = FakeClock()
    hook = FakeJobHook(log=lines_of(5), clock=clock)
    offset = len(lines_of(3))
    handler = Records()
    logger = logging.getLogger("test.job_runner.resume")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    runner = JobRunner(hook, NAME, JOB, FollowPolicy(), logger, offset=offset, last_line="line 3", clock=lambda: 0)
    outcome = runner.follow(sleep=clock.sleep)
    assert [m for _, m in handler.records] == [f"{REMOTE_LINE_PREFIX}line 4", f"{REMOTE_LINE_PREFIX}line 5"]
    assert hook.calls[0][1] == offset
    assert (outcome.state, outcome.offset, outcome.last_line) == (FINISHED, len(lines_of(5)), "line 5")
