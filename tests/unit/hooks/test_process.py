"""The local process runners (airflow_provider_brev/hooks/process.py): output, timeouts, process groups; and process
starts that fail for real (a child Python process lowers its own open-file limit until the next start fails with
EMFILE, then runs the runners; nothing is mocked)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
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


#: ``exhaust()`` lowers RLIMIT_NOFILE to the descriptors open now and fills every free number below it, so the pipes of
#: the next process start fail with EMFILE; ``restore()`` gives the limit back.
_EXHAUST = textwrap.dedent(
    """
    import os, resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fillers = []
    def exhaust():
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1, hard))
        while True:
            try:
                fillers.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                return
    def restore():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    """
)


def _child(body: str) -> dict:
    code = _EXHAUST + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_start_failing_with_emfile_is_a_transient_start_error_not_a_missing_cli():
    seen = _child(
        """
        import asyncio, json
        from airflow_provider_brev.hooks.process import arun_process, run_process
        async def outcome(run):
            exhaust()  # the loop exists already: only the process start runs out of descriptors
            try:
                await run()
                return "started"
            except Exception as err:
                return [type(err).__name__, str(err)]
            finally:
                restore()

        async def sync_run():
            run_process(["true"], env=None, timeout=10)

        seen = {"sync": asyncio.run(outcome(sync_run)),
                "async": asyncio.run(outcome(lambda: arun_process(["true"], env=None, timeout=10)))}
        print(json.dumps(seen))
        """
    )
    for name in ("sync", "async"):
        kind, message = seen[name]
        assert kind == "BrevProcessStartError", seen
        assert "EMFILE" in message
        assert "installed" not in message


def test_the_follower_rides_out_emfile_without_spending_its_failure_budget():
    """The async driver of the job follower with a budget of zero failures: the real EMFILE starts are retried with
    back-off (logged as what they are), and the job's end is read once a process can start again."""
    seen = _child(
        """
        import asyncio, json, logging
        from airflow_provider_brev.core.jobs.follower import FollowPolicy, JobFollower
        from airflow_provider_brev.core.jobs.remote import PollResult
        from airflow_provider_brev.hooks.driver import adrive
        from airflow_provider_brev.hooks.process import arun_process

        warnings = []
        class Log:
            def log(self, level, fmt, message):
                if level >= logging.WARNING:
                    warnings.append(message)
                    if len(warnings) == 2:
                        restore()  # the machine has descriptors again

        async def perform(call):
            await arun_process(["true"], env=None, timeout=10)  # fails with EMFILE while exhausted
            return PollResult(state="finished", exit_code=0, log_size=0, pid=None, offset=call.offset)

        follower = JobFollower(FollowPolicy(poll_interval=0.01, max_poll_failures=0), instance_name="box", job_id="j1")
        async def follow():
            exhaust()
            return await adrive(follower, perform, log=Log())

        outcome = asyncio.run(follow())
        print(json.dumps({"outcome": outcome.to_dict(), "warnings": warnings}))
        """
    )
    assert seen["outcome"]["state"] == "finished" and seen["outcome"]["exit_code"] == 0
    assert len(seen["warnings"]) == 2
    assert all("could not start a process" in line and "EMFILE" in line for line in seen["warnings"])
    assert not any("installed" in line for line in seen["warnings"])


def test_the_loop_caps_its_concurrent_processes():
    """Six processes through a loop's two slots: never more than two alive at once (their own clocks say so)."""
    from airflow_provider_brev.hooks.process import arun_process, loop_process_slots

    code = "import time; print(time.time()); time.sleep(0.3); print(time.time())"

    async def main() -> list[tuple[float, float]]:
        slots = loop_process_slots(2)
        assert slots is loop_process_slots(5)  # one per loop: the first call's cap
        assert loop_process_slots(0) is None  # 0: no cap
        results = await asyncio.gather(
            *(arun_process([sys.executable, "-c", code], env=None, timeout=60, slots=slots) for _ in range(6))
        )
        return [(float(r.stdout_lines[0]), float(r.stdout_lines[1])) for r in results]

    spans = asyncio.run(main())
    assert len(spans) == 6
    moments = sorted({moment for span in spans for moment in span})
    assert max(sum(1 for start, end in spans if start <= moment < end) for moment in moments) == 2
