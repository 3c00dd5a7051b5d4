from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time

import pytest

from airflow_provider_brev.core.protocol.environment import AgentAnnouncement
from airflow_provider_brev.hooks.process import arun_process, run_process
from unit.core.protocol.environment_helpers import _wait_gone


def test_streams_lines_in_order_and_keeps_a_bounded_tail():
    seen = []
    result = run_process(
        [sys.executable, "-c", "import sys\nfor i in range(5000): print(i)\nprint('err', file=sys.stderr)"],
        env=None,
        timeout=30,
        on_stdout=seen.append,
    )
    assert result.exit_code == 0
    assert seen == [str(i) for i in range(5000)]
    assert len(result.stdout_lines) == 200
    assert result.stdout_lines[-1] == "4999"
    assert result.stderr_lines == ["err"]


def test_stdin_is_closed_so_reading_it_does_not_block():
    result = run_process([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"], env=None, timeout=10)
    assert result.stdout_lines == ["''"]


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    result = run_process(["bash", "-c", script], env=None, timeout=1)
    assert result.timed_out
    assert time.monotonic() - started < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # the grandchild may linger as a zombie of init for a moment; poll for its disappearance
        with open(f"/proc/{child}/stat") as fh:
            if fh.read().split()[2] == "Z":
                break
    else:
        raise AssertionError("grandchild survived the timeout")


def test_long_lines_are_split_not_buffered_forever():
    result = run_process([sys.executable, "-c", "print('x' * 600000)"], env=None, timeout=10, capture_stdout=True)
    assert sum(len(line) for line in result.stdout_lines) == 600000
    assert max(len(line) for line in result.stdout_lines) <= 256 * 1024


def test_async_runner_matches_sync():
    async def main():
        return await arun_process(["bash", "-c", "echo a; echo b >&2; exit 4"], env=None, timeout=10)

    result = asyncio.run(main())
    assert (result.exit_code, result.stdout_lines, result.stderr_lines) == (4, ["a"], ["b"])


def test_async_runner_timeout():
    async def main():
        return await arun_process(["sleep", "20"], env=None, timeout=0.5)

    started = time.monotonic()
    result = asyncio.run(main())
    assert result.timed_out
    assert time.monotonic() - started < 8


def _own_session_child(pidfile, *, ignore_sigterm: bool = False) -> str:
    """A shell whose child leaves the process group (``setsid``) holding stdout and stderr open for 30 s."""
    trap = "trap '' TERM; " if ignore_sigterm else ""
    return f"setsid sleep 30 & echo $! > {pidfile}; {trap}echo started; sleep 30"


def _stop(pidfile) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_async_timeout_ends_even_when_a_descendant_outside_the_group_holds_the_pipes(tmp_path):
    """Python 3.11's ``Process.wait()`` also waits for the pipes: a trigger's timed-out call whose ``brev`` needed
    SIGKILL used to wait as long as such a descendant lived (30 s here); like the sync runner it waits for the
    process only."""
    pidfile = tmp_path / "child.pid"

    async def main():
        script = _own_session_child(pidfile, ignore_sigterm=True)  # SIGTERM's grace runs out: SIGKILL, then the wait
        run = arun_process(["bash", "-c", script], env=None, timeout=0.5)
        return await asyncio.wait_for(run, timeout=20)

    try:
        result = asyncio.run(main())
    finally:
        _stop(pidfile)
    assert result.timed_out and result.stdout_lines == ["started"]
    assert result.exit_code != 0


def test_a_cancelled_async_call_ends_even_when_a_descendant_outside_the_group_holds_the_pipes(tmp_path):
    """A trigger cancelled (triggerer shutdown, user kill) mid-call returns promptly, its ``brev`` killed."""
    pidfile = tmp_path / "child.pid"

    async def main():
        started = asyncio.Event()
        call = asyncio.ensure_future(
            arun_process(
                ["bash", "-c", _own_session_child(pidfile)],
                env=None,
                timeout=60,
                on_stdout=lambda line: started.set(),
            )
        )
        await asyncio.wait_for(started.wait(), timeout=20)
        call.cancel()
        done, _ = await asyncio.wait([call], timeout=20)
        return done

    try:
        done = asyncio.run(main())
    finally:
        _stop(pidfile)
    assert done, "the cancelled call was still waiting"
    assert next(iter(done)).cancelled()


def _v0_6_319_exec(agent: str) -> list[str]:
    """What v0.6.319's exec runs: a daemonised agent (running when announced, as ``ssh-agent -s`` does), its
    announcement, then the remote command's output."""
    daemonise = f"setsid {agent} 60 </dev/null >/dev/null 2>&1 & until [ $(cat /proc/$!/comm) = ssh-agent ]; do :; done"
    return ["bash", "-c", f"{daemonise}; echo Agent pid $!; echo remote; echo done"]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_the_announced_agent_is_stopped_and_kept_out_of_the_output(fake_agent, driver):
    watch = AgentAnnouncement()
    seen: list[str] = []
    kwargs = {"env": None, "timeout": 10, "on_stdout": seen.append, "announcement": watch}
    if driver == "sync":
        result = run_process(_v0_6_319_exec(fake_agent), **kwargs)
    else:
        result = asyncio.run(arun_process(_v0_6_319_exec(fake_agent), **kwargs))
    assert result.exit_code == 0
    assert seen == result.stdout_lines == ["remote", "done"]
    assert watch.pid is not None and _wait_gone(watch.pid)
