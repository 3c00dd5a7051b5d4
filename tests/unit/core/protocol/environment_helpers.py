"""Test helpers shared by ``core/protocol/test_environment.py``, ``hooks/test_process.py`` (one definition, imported by
each)."""

from __future__ import annotations

import time


# ------------------------------------------------------------------------------------------- process driver
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)
