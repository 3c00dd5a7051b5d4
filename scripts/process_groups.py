"""Process-group helpers shared by ``make airflow`` (scripts/airflow_local.py) and the deployment test
(deployment/processes.py). Standard library only: the deployment test's bootstrap stage imports it too."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


def marked_pids(marker: str, value: str) -> list[int]:
    """PIDs of live (non-zombie) processes whose environment carries ``marker=value`` (Linux ``/proc``).

    :param marker: the environment variable every process of a run carries.
    :param value: this run's value of it.
    """
    needle = f"{marker}={value}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as st:
                if st.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue  # a zombie waiting for its parent runs nothing
            pids.append(int(entry))
        except OSError:
            continue
    return pids


def stop_groups(procs: Mapping[str, subprocess.Popen], graces: Iterable[float] = (20.0,)) -> list[str]:
    """SIGTERM every process's group (once per grace period, waiting up to that long), then SIGKILL the groups.

    :param procs: the started processes by name, each the leader of its own process group.
    :param graces: seconds to wait after each round of SIGTERM (a second round helps stragglers).
    :return: the names that were still running after the last grace period.
    """
    for grace in graces:
        for proc in procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    stragglers = []
    for name, proc in procs.items():
        if proc.poll() is None:
            stragglers.append(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # also reaches forked children left in the group
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    return stragglers
