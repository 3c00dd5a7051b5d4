"""One poll per instance for every job the triggers of one event loop follow (hooks/job_polls.py), against the
simulator: real ``brev exec`` calls, real detached jobs."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import psutil
import pytest
from integration.chaos.chaos_helpers import await_until

from airflow_provider_brev.core.jobs.follower import FollowPolicy
from airflow_provider_brev.core.jobs.remote import RemoteJob
from airflow_provider_brev.hooks.job_polls import loop_polls, shared_poll
from airflow_provider_brev.jobs.runner import JobRunner


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, event, *args, **kw) -> None:
        self.lines.append(event % args if args else event)

    warning = info

    def log(self, level, event, *args, **kw) -> None:
        self.info(event, *args)


@pytest.fixture
def hook(brev_sim, monkeypatch):
    from airflow_provider_brev.hooks.brev import BrevHook

    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.create_instance_directly("box", ready=True)
    return BrevHook(retry_delay=0.05, log_cli_output=False)


class CountingHook:
    """The hook, counting the followers' poll requests (each would have been one ``brev exec``)."""

    def __init__(self, hook) -> None:
        self.hook, self.requests = hook, 0

    async def apoll_job(self, name, job, **kwargs):
        self.requests += 1
        return await self.hook.apoll_job(name, job, **kwargs)

    def __getattr__(self, name):
        return getattr(self.hook, name)


def _polls(sim) -> list[str]:
    """The scripts of the job polls the simulator ran (one or many jobs)."""
    return [
        c["argv"][-1]
        for c in sim.calls("exec")
        if "BREV_JOB_STATUS" in c["argv"][-1] and "job_run" not in c["argv"][-1] and "__BJ_OFFSET" in c["argv"][-1]
    ]


def _held_on_the_instance(sim, needle: str) -> bool:
    """Whether a poll's own command (not the ``brev exec`` that sent it) runs in the simulator's sandbox."""
    for pid in sim.processes():
        try:
            argv = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        if argv[:2] == ["bash", "-c"] and needle in argv[-1]:
            return True
    return False


def test_jobs_on_one_instance_share_each_poll_and_each_sees_its_own_log(brev_sim, hook):
    jobs = [RemoteJob(f"shared-{i}") for i in range(6)]
    for index, job in enumerate(jobs):
        hook.launch_job("box", job, f"until [ -e gate ]; do sleep 0.05; done; echo job {index} done; exit {index}")
    counting = CountingHook(hook)
    logs = [_Log() for _ in jobs]
    policy = FollowPolicy(poll_interval=1.0)

    async def main():
        runners = [JobRunner(counting, "box", job, policy, log) for job, log in zip(jobs, logs, strict=True)]
        follows = [asyncio.create_task(runner.afollow()) for runner in runners]
        while counting.requests < 2 * len(jobs):  # every follower has been answered once and asks again
            await asyncio.sleep(0.05)
        (brev_sim.sandbox("box") / "gate").touch()
        return await asyncio.gather(*follows)

    outcomes = asyncio.run(main())
    assert [(o.state, o.exit_code) for o in outcomes] == [("finished", i) for i in range(6)]
    for index, log in enumerate(logs):
        assert f"[remote] job {index} done" in log.lines
    polls = _polls(brev_sim)
    assert any("__BJ_COUNT=6\n" in script for script in polls)  # one call for all six
    assert len(polls) * 2 <= counting.requests  # far fewer processes than the followers' polls


def test_a_poll_nobody_waits_for_is_stopped_with_its_process(brev_sim, hook):
    job = RemoteJob("long-1")
    hook.launch_job("box", job, "sleep 600")
    me = psutil.Process()

    async def main():
        runner = JobRunner(hook, "box", job, FollowPolicy(poll_interval=10.0), _Log())
        follow = asyncio.create_task(runner.afollow())
        deadline = time.monotonic() + 60
        while not me.children():  # the poll's brev: it waits on the instance up to 10 s for the job's end
            assert time.monotonic() < deadline, "no poll started"
            await asyncio.sleep(0.05)
        follow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follow
        assert loop_polls() == {}  # nothing left to serve

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 60
    # the held poll's brev was killed with its group: it ends well before the poll's 10 s wait on the instance would
    # (a killed process ends when the busy machine gets round to it; asyncio.run's closing cancels its reaping)
    deadline = time.monotonic() + 5
    while me.children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert me.children() == []
    assert brev_sim.agent_pids() == []


def test_a_fault_of_the_poll_reaches_every_waiting_follower_instead_of_leaving_them_waiting(hook):
    class BrokenHook:
        """The hook, whose ``brev exec`` fails with a fault that is not a Brev error (a bug, say)."""

        brev_conn_id = "broken"

        async def aexec_script(self, name, script, *, timeout):
            raise RuntimeError("the poll broke")

        def __getattr__(self, name):
            return getattr(hook, name)

    async def main():
        requests = [
            shared_poll(BrokenHook(), "box", RemoteJob(f"j{i}"), offset=0, max_bytes=100, wait=0.0, process_cap=4)
            for i in range(3)
        ]
        answers = await asyncio.wait_for(asyncio.gather(*requests, return_exceptions=True), timeout=30)
        assert loop_polls() == {}
        return answers

    answers = asyncio.run(main())
    assert [str(a) for a in answers] == ["the poll broke"] * 3


def test_two_followers_of_one_job_are_both_answered(brev_sim, hook):
    """Two triggers of one loop may follow the same job (a try resumed while its earlier trigger is still being
    removed): each gets an answer, neither a cancellation it did not ask for."""
    job = RemoteJob("twice-1")
    hook.launch_job("box", job, "echo one; echo two")
    assert hook.poll_job("box", job, offset=0, wait=30).state == "finished"

    async def main():
        first = shared_poll(hook, "box", job, offset=0, max_bytes=1000, wait=0.0, process_cap=4)
        second = shared_poll(hook, "box", job, offset=4, max_bytes=1000, wait=0.0, process_cap=4)
        return await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), timeout=60)

    answers = asyncio.run(main())
    assert [(a.offset, a.chunk) for a in answers] == [(0, b"one\ntwo\n"), (4, b"two\n")]


def test_a_shared_poll_delivers_each_job_its_own_redacted_lines_as_a_poll_of_its_own_does(brev_sim, hook):
    """Jobs printing their secrets, followed through one shared poll (log chunks far smaller than their logs, so
    lines are cut across polls): each job's lines are exactly those the worker's own polls show -- redacted on the
    instance, none of another job's, none lost or twice."""
    jobs = [RemoteJob(f"secret-{i}") for i in range(3)]
    secrets = [
        {
            "TOKEN": f"tok-{i}-s3cr3t",
            "NGC_API_KEY": f"nvapi-{i}KEY",
            "PEM": f"-----BEGIN-----\nline{i}body\n-----END-----",
        }
        for i in range(3)
    ]
    command = 'for n in $(seq 1 150); do echo "job $J line $n $TOKEN $NGC_API_KEY"; done; printf "%s\\n" "$PEM"; echo "$TOKEN"'
    for index, job in enumerate(jobs):
        hook.launch_job("box", job, command, env={"J": str(index)}, secret_env=secrets[index])
    policy = FollowPolicy(poll_interval=0.5, max_bytes=700)

    async def shared():
        logs = [_Log() for _ in jobs]
        runners = [JobRunner(hook, "box", job, policy, log) for job, log in zip(jobs, logs, strict=True)]
        outcomes = await asyncio.gather(*(runner.afollow() for runner in runners))
        return logs, outcomes

    shared_logs, shared_outcomes = asyncio.run(shared())
    assert any("__BJ_COUNT=3\n" in script for script in _polls(brev_sim))  # the three jobs did share polls
    for index, job in enumerate(jobs):
        own_log = _Log()
        own = JobRunner(hook, "box", job, policy, own_log).follow()  # the worker's path: poll_job, one job per call
        remote = [line for line in shared_logs[index].lines if line.startswith("[remote] ")]
        assert remote == [line for line in own_log.lines if line.startswith("[remote] ")]
        assert remote[:150] == [f"[remote] job {index} line {n} *** ***" for n in range(1, 151)]
        assert remote[150:] == ["[remote] ***"] * 4  # the PEM's three lines (each has content), then TOKEN
        assert shared_outcomes[index].to_dict() == own.to_dict()
        shown = "\n".join(shared_logs[index].lines) + repr(shared_outcomes[index].to_dict())
        for values in secrets:
            for value in values.values():
                assert value not in shown
        assert "body" not in shown


class CutHook:
    """The hook, whose ``brev exec`` answers succeed with their output cut after the first job's block (the
    connection dropped mid-answer and the CLI still exited 0)."""

    def __init__(self, hook) -> None:
        self.hook = hook

    async def aexec_script(self, name, script, *, timeout):
        result = await self.hook.aexec_script(name, script, timeout=timeout)
        end = next(i for i, line in enumerate(result.stdout_lines) if "BREV_JOB_LOG_END" in line)
        return dataclasses.replace(result, stdout_lines=result.stdout_lines[: end + 1])

    def __getattr__(self, name):
        return getattr(self.hook, name)


def test_a_poll_cut_short_shows_no_job_log_in_the_error_its_followers_log(brev_sim, hook):
    """A shared poll whose answer is cut after one job's block fails all its requests with one error, which each
    follower logs in its own task log: it says what was missing, and carries no job's log data."""
    quiet, chatty = RemoteJob("cut-quiet"), RemoteJob("cut-chatty")
    hook.launch_job("box", quiet, "echo done")
    hook.launch_job("box", chatty, "head -c 200000 /dev/zero | tr '\\0' 'a'; echo")
    for job in (quiet, chatty):
        assert hook.poll_job("box", job, offset=0, max_bytes=1, wait=30).state == "finished"
    cut = CutHook(hook)

    async def main():
        first = shared_poll(cut, "box", chatty, offset=0, max_bytes=300000, wait=0.0, process_cap=4)
        second = shared_poll(cut, "box", quiet, offset=0, max_bytes=300000, wait=0.0, process_cap=4)
        return await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), timeout=120)

    errors = asyncio.run(main())
    assert [type(error).__name__ for error in errors] == ["BrevConnectionLostError"] * 2
    for error in errors:
        assert "cut-quiet" in str(error)
        assert "YWFh" not in str(error)  # base64 of the chatty job's "aaa..."
        assert len(str(error)) < 2000


@pytest.mark.parametrize("followers", [1, 3])
def test_cancelling_every_follower_of_a_shared_poll_ends_every_process_it_started(brev_sim, hook, followers):
    """Triggers removed while their poll (one job's, or one for several) waits on the instance: its ``brev``,
    ``ssh``, the CLI's ``ssh-agent`` and the poll's command on the instance all end; the jobs keep running."""
    jobs = [RemoteJob(f"cancelled-{i}") for i in range(followers)]
    the_poll = "__BJ_COUNT=3" if followers == 3 else "__BJ_OFFSET="
    for job in jobs:
        hook.launch_job("box", job, "sleep 600")
    the_jobs = set(brev_sim.processes())  # the detached jobs, which must outlive their followers
    me = psutil.Process()

    async def main():
        runners = [JobRunner(hook, "box", job, FollowPolicy(poll_interval=10.0), _Log()) for job in jobs]
        follows = [asyncio.create_task(runner.afollow()) for runner in runners]
        await await_until(
            lambda: _held_on_the_instance(brev_sim, the_poll), timeout=60, what="the poll to wait on the instance"
        )
        for follow in follows:
            follow.cancel()
        await asyncio.gather(*follows, return_exceptions=True)
        assert loop_polls() == {}

    asyncio.run(main())
    deadline = time.monotonic() + 5  # half the poll's 10 s wait on the instance: it ended as nobody read it
    while set(brev_sim.processes()) - the_jobs and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(brev_sim.processes()) - the_jobs == set()
    assert me.children() == []
    assert brev_sim.agent_pids() == []
    assert {hook.poll_job("box", job, offset=0).state for job in jobs} == {"running"}


def test_more_jobs_than_one_poll_script_holds_are_reported_by_the_next_polls(brev_sim, hook):
    """Followers of more jobs on one instance than one poll's script can name (long job directories): every one is
    answered, by as many polls as it takes, instead of all failing with a command too long to send."""
    base = "/".join(["d" * 200] * 4)  # job directories of over 900 characters
    jobs = [RemoteJob(f"many-{i:03d}-" + "x" * 110, base_dir=base) for i in range(100)]

    async def main():
        polls = (shared_poll(hook, "box", job, offset=0, max_bytes=1000, wait=0.0, process_cap=4) for job in jobs)
        return await asyncio.wait_for(asyncio.gather(*polls, return_exceptions=True), timeout=120)

    answers = asyncio.run(main())
    assert [getattr(answer, "state", answer) for answer in answers] == ["missing"] * len(jobs)
    assert 2 <= len(_polls(brev_sim)) < len(jobs)
