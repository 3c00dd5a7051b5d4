"""scripts/cpu_load.py, which loads the machine for the suite's run under busy-loops, stops its loops and its command
when it is killed, not only when its command ends: a load left behind slows every later run on the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu_load.py"


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_killing_the_script_stops_its_loops_and_its_command(signum: int) -> None:
    script = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--", "sleep", "600"], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        assert script.stdout is not None
        announced = script.stdout.readline()  # printed once the loops run, before the command starts
        loops = int(announced.split()[1])
        assert loops == 2 * (os.cpu_count() or 1)
        started = children(script.pid)
        while len(started) < loops + 1:  # the command (sleep) starts right after the announcement
            started = children(script.pid)
        script.send_signal(signum)
        assert script.wait(timeout=60) == 128 + signum
        assert [pid for pid in started if alive(pid)] == []
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
