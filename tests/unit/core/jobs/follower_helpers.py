"""Test helpers shared by ``core/jobs/test_attempts.py``, ``core/jobs/test_follower.py``, ``core/jobs/test_handle.py``,
``core/jobs/test_scripts.py`` (one definition, imported by each)."""

from __future__ import annotations

from airflow_provider_brev.core.jobs.handle import RemoteJob
from airflow_provider_brev.core.jobs.remote import PollResult

JOB = RemoteJob("job-1")


def _poll(state="running", size=0, chunk=b"", offset=0, rc=None):
    return PollResult(state, rc, size, 1, chunk, offset)
