"""Test helpers shared by ``core/jobs/test_handle.py``, ``core/jobs/test_pulls.py``, ``core/jobs/test_remote.py``,
``core/tao/test_command.py``, ``jobs/test_pulls.py`` (one definition, imported by each)."""

from __future__ import annotations

from airflow_provider_brev.core.jobs.remote import PollResult

PYT = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


DS = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services"


def poll(state: str, exit_code: int | None = None) -> PollResult:
    return PollResult(state=state, exit_code=exit_code, log_size=0, pid=None)
