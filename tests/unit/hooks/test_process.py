"""Process starts that fail for real (hooks/process.py): a child Python process lowers its own open-file limit until
the next start fails with EMFILE, then runs the runners; nothing is mocked."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

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
