"""The generic drivers (``hooks/driver.py``) over every machine of the pure core (``core/protocol/machine.py``).

Table-driven: each row is a machine and a script of answers to its calls (a value, or an exception the call
raises). The same script runs through the sync driver and the async driver, on a fake clock that only sleeping
advances; what each driver did (the calls it performed, the sleeps, the log records) and how it ended (result or
error) must be identical, and as expected. The drivers' own rules (what reaches the machine as ``Failed``, the
interruption hook, the shared ``_settle``) are pinned below the table.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_brev.core.instances import readiness
from airflow_provider_brev.core.instances.readiness import (
    CHECK_OUTLIVED,
    STAGE_MISSING,
    STAGE_PROVISIONING,
    STAGE_READY,
    STAGE_SSH,
    CheckReadiness,
    ListInstance,
    ReadinessCheck,
    ReadinessWait,
    RunProbe,
    probe_readiness,
    readiness_from_status,
)
from airflow_provider_brev.core.jobs.follower import (
    SYNC_DUE,
    FollowPolicy,
    JobFollower,
    JobOutcome,
    KillJob,
    PollJob,
    Synced,
    SyncOutputs,
)
from airflow_provider_brev.core.jobs.remote import FINISHED, RUNNING, PollResult
from airflow_provider_brev.core.protocol.invocation import EnsureLogin, Invocation, RunCli
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Call, Done, Emit, Fail, StepMachine
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLINotFoundError,
    BrevConnectionLostError,
    BrevInstanceNotFoundError,
    BrevTaskKilledError,
    BrevTimeoutError,
    BrevTransientError,
)
from airflow_provider_brev.hooks.driver import _GO_ON, _settle, adrive, drive

START = 1_000.0
LOGGED_OUT = ProcessResult(
    1, ["no oauth found for token", "You are currently logged out, would you like to log in? [Y/n]: "], ["EOF"]
)
OK = ProcessResult(0, ['{"workspaces": []}'])
NOT_FOUND = ProcessResult(1, [], ["instance with id/name gone-1 not found"])
RUNNING_READY = BrevInstance("w-1", "id-1", "RUNNING", build_status="COMPLETED", shell_status="READY")
DEPLOYING = BrevInstance("w-1", "id-1", "DEPLOYING")


@pytest.fixture(autouse=True)
def _fixed_nonce(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both drivers' probes carry the same nonce, so their traces compare equal."""
    monkeypatch.setattr(readiness, "new_nonce", lambda: "brev-ready-0123456789abcdef")


def _echo(call: Call) -> ProcessResult:
    """A probe that worked: it echoes its nonce (``echo 'brev-ready-…'; exit 0``)."""
    assert isinstance(call, RunProbe)
    return ProcessResult(0, [call.command.split()[1].rstrip(";").strip("'")])


@dataclass
class Run:
    """What one driver did with one machine."""

    trace: list[Any] = field(default_factory=list)
    result: Any = None
    error: tuple[type, str] | None = None


class Recorder:
    """The logger and the fake clock of one run."""

    def __init__(self, run: Run) -> None:
        self.run, self.now = run, START

    def log(self, level: int, event: Any, *args: Any) -> None:
        self.run.trace.append(("log", level, event % args))

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.run.trace.append(("sleep", round(seconds, 6)))
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def _answer(script: list[Any], call: Call, run: Run, recorder: Recorder) -> Any:
    run.trace.append(("call", call))
    if isinstance(call, PollJob):  # the poll waited on the instance for the job's end
        recorder.now += call.wait
    answer = script.pop(0)
    if callable(answer) and not isinstance(answer, type):
        answer = answer(call)
    if isinstance(answer, tuple) and answer and answer[0] == "after":  # ("after", seconds, answer): a slow call
        recorder.now += answer[1]
        answer = answer[2]
    if isinstance(answer, BaseException):
        raise answer
    return answer


def _run(make: Any, script: list[Any], mode: str) -> Run:
    run, script = Run(), list(script)
    recorder = Recorder(run)
    machine = make()
    try:
        if mode == "sync":
            run.result = drive(
                machine,
                lambda call: _answer(script, call, run, recorder),
                log=recorder,
                clock=lambda: recorder.now,
                sleep=recorder.sleep,
            )
        else:

            async def perform(call: Call) -> Any:
                return _answer(script, call, run, recorder)

            run.result = asyncio.run(
                adrive(machine, perform, log=recorder, clock=lambda: recorder.now, sleep=recorder.asleep)
            )
    except Exception as err:
        run.error = (type(err), str(err))
    assert not script, f"answers left over: {script!r}"
    return run


def _calls(run: Run) -> list[Any]:
    return [entry[1] for entry in run.trace if entry[0] == "call"]


def _invocation(**kwargs: Any) -> Any:
    return lambda: Invocation("ls", **{"timeout": 10.0, "authenticated": True, "can_login": True, **kwargs})


def _wait(**kwargs: Any) -> Any:
    return lambda: ReadinessWait("w-1", **{"deadline": START + 10, "poll_interval": 1.0, "now": START, **kwargs})


def _follower(**policy: Any) -> Any:
    return lambda: JobFollower(FollowPolicy(**{"poll_interval": 2.0, **policy}), instance_name="w-1", job_id="j")


MAX_BYTES = FollowPolicy().max_bytes
#: A job that prints nothing, polled every 2 s until 3 s: at once, then waiting on the instance 2 s, then 1 s.
_POLLS_TO_3S = [PollJob(0, MAX_BYTES), PollJob(0, MAX_BYTES, 2.0), PollJob(0, MAX_BYTES, 1.0)]


def _poll(state: str = RUNNING, chunk: bytes = b"", offset: int = 0, size: int | None = None) -> PollResult:
    exit_code = 0 if state == FINISHED else None
    return PollResult(state, exit_code, offset + len(chunk) if size is None else size, 1, chunk, offset)


# (id, machine factory, script of answers, expected calls, expected result or error type)
SCENARIOS = [
    ("call-ok", _invocation(), [None, OK], [EnsureLogin(), RunCli()], OK),
    ("call-unauthenticated", _invocation(authenticated=False), [OK], [RunCli()], OK),
    (
        "call-relogin-once",
        _invocation(),
        [None, LOGGED_OUT, None, OK],
        [EnsureLogin(), RunCli(), EnsureLogin(force=True, failed_since=0.0), RunCli()],
        OK,
    ),
    ("call-logged-out-twice", _invocation(), [None, LOGGED_OUT, None, LOGGED_OUT], None, BrevAuthError),
    ("call-classified", _invocation(), [None, NOT_FOUND], [EnsureLogin(), RunCli()], BrevInstanceNotFoundError),
    ("call-unchecked", _invocation(check=False), [None, NOT_FOUND], [EnsureLogin(), RunCli()], NOT_FOUND),
    ("call-timeout", _invocation(), [None, ProcessResult(-9, timed_out=True)], None, BrevTimeoutError),
    ("call-login-fails", _invocation(), [BrevAuthError("bad token")], [EnsureLogin()], BrevAuthError),
    (
        "call-cannot-start",
        _invocation(),
        [None, BrevCLINotFoundError("Could not start 'brev'")],
        [EnsureLogin(), RunCli()],
        BrevCLINotFoundError,
    ),
    ("check-missing", lambda: ReadinessCheck("w-1"), [None], [ListInstance()], STAGE_MISSING),
    ("check-deploying", lambda: ReadinessCheck("w-1"), [DEPLOYING], [ListInstance()], STAGE_PROVISIONING),
    ("check-ready", lambda: ReadinessCheck("w-1"), [RUNNING_READY, _echo], None, STAGE_READY),
    (
        "check-probe-times-out",
        lambda: ReadinessCheck("w-1"),
        [RUNNING_READY, BrevTimeoutError("slow exec")],
        None,
        STAGE_SSH,
    ),
    ("check-probe-fails", lambda: ReadinessCheck("w-1"), [RUNNING_READY, BrevAuthError("no")], None, BrevAuthError),
    ("check-listing-fails", lambda: ReadinessCheck("w-1"), [BrevTransientError("502")], None, BrevTransientError),
    (
        "wait-ready",
        _wait(),
        [
            ("after", 0.25, readiness_from_status("w-1", DEPLOYING)),
            probe_readiness("w-1", RUNNING_READY, True, STAGE_READY),
        ],
        [CheckReadiness(10.0, 10.0), CheckReadiness(9.0, 9.0)],
        "ready",
    ),
    (
        "wait-transient-then-ready",
        _wait(),
        [BrevTransientError("502"), probe_readiness("w-1", RUNNING_READY, True, STAGE_READY)],
        None,
        "ready",
    ),
    (
        "wait-times-out",
        _wait(deadline=START + 3),
        [readiness_from_status("w-1", DEPLOYING)] * 3,
        [CheckReadiness(3.0, 3.0), CheckReadiness(2.0, 2.0), CheckReadiness(1.0, 1.0)],
        "timeout",
    ),
    ("wait-check-outlived", _wait(), [("after", 10.0, CHECK_OUTLIVED)], [CheckReadiness(10.0, 10.0)], "timeout"),
    ("wait-fails", _wait(), [BrevAuthError("logged out")], None, BrevAuthError),
    (
        "wait-budget-spent",
        _wait(max_failures=2),
        [BrevTransientError("502"), BrevTransientError("503")],
        None,
        BrevTransientError,
    ),
    (
        "follow-drains",
        _follower(),
        [_poll(chunk=b"a\nb"), _poll(FINISHED, b"\nc\n", offset=3)],
        [PollJob(0, MAX_BYTES), PollJob(3, MAX_BYTES, 2.0)],  # all of it read: the next poll waits on the instance
        FINISHED,
    ),
    (
        "follow-deadline-kills",
        _follower(deadline=START + 3),
        [_poll(), _poll(), _poll(), "terminated", _poll(FINISHED, b"x\n")],
        # later polls wait on the instance up to the deadline (2 s, then 1), then the kill, then for its end
        [*_POLLS_TO_3S, KillJob(), PollJob(0, MAX_BYTES, 2.0)],
        "timeout",
    ),
    (
        "follow-sync-deferred",
        _follower(sync_interval=3.0),
        [_poll(), _poll(), _poll(), Synced(deferred=True)],
        [*_POLLS_TO_3S, SyncOutputs()],
        SYNC_DUE,
    ),
    (
        "follow-sync-done",
        _follower(sync_interval=3.0),
        [_poll(), _poll(), _poll(), Synced(), _poll(FINISHED)],
        [*_POLLS_TO_3S, SyncOutputs(), PollJob(0, MAX_BYTES)],  # a sync takes the place of the wait
        FINISHED,
    ),
    (
        "follow-budget-spent",
        _follower(max_poll_failures=1),
        [BrevConnectionLostError("drop 1"), BrevConnectionLostError("drop 2")],
        None,
        BrevConnectionLostError,
    ),
]


def _scenario(name: str) -> tuple[Any, list[Any]]:
    """The machine factory and the script of the scenario called ``name``."""
    row = next(row for row in SCENARIOS if row[0] == name)
    return row[1], row[2]


def _verdict(result: Any) -> Any:
    """What a result is compared by: a readiness by stage, a wait by its action, a job by its state."""
    if isinstance(result, JobOutcome):
        return result.state
    return getattr(result, "stage", None) or getattr(result, "action", None) or result


@pytest.mark.parametrize(
    ("make", "script", "calls", "expected"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS]
)
def test_the_sync_and_the_async_driver_do_the_same(make, script, calls, expected):
    sync, async_ = _run(make, script, "sync"), _run(make, script, "async")
    assert sync.trace == async_.trace
    assert sync.error == async_.error
    assert (sync.result is None) == (async_.result is None)
    if sync.result is not None:
        assert sync.result == async_.result or _verdict(sync.result) == _verdict(async_.result)
    if calls is not None:
        assert _calls(sync) == calls
    if isinstance(expected, type):
        assert sync.error is not None and sync.error[0] is expected
    else:
        assert sync.error is None and _verdict(sync.result) == expected


def test_the_wait_sleeps_at_a_fixed_rate_and_logs_each_new_stage():
    run = _run(*_scenario("wait-ready"), "sync")
    deploying = readiness_from_status("w-1", DEPLOYING)
    assert run.trace[1:3] == [("log", logging.INFO, f"Readiness of w-1: {deploying.message}"), ("sleep", 0.75)]
    assert run.result.took == "Instance w-1 is ready after 1 s."


def test_the_follower_emits_every_line_in_order():
    run = _run(*_scenario("follow-drains"), "async")
    lines = [entry[2] for entry in run.trace if entry[0] == "log"]
    assert lines == ["[remote] a", "[remote] b", "[remote] c"]
    assert run.result == JobOutcome(FINISHED, 0, "c", 6)


# ------------------------------------------------------------------------------------------- driver rules


class _Scripted(StepMachine[str]):
    """A machine that asks for one call and ends with what it got (or fails with it)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[object] = []

    def _decide(self, now: float) -> Any:
        return Call()

    def _receive(self, call: Call, outcome: object, now: float) -> None:
        self.received.append(outcome)
        self._emit(logging.INFO, "got it")
        self._finish(Done("ok"))


def test_only_brev_errors_reach_the_machine():
    machine = _Scripted()

    def boom(call: Call) -> object:
        raise KeyError("not a Brev error")

    with pytest.raises(KeyError):
        drive(machine, boom)
    assert machine.received == []

    def transient(call: Call) -> object:
        raise BrevTransientError("502")

    machine = _Scripted()
    assert drive(machine, transient) == "ok"
    assert [type(outcome.error) for outcome in machine.received] == [BrevTransientError]


def test_an_interruption_stops_either_driver_before_the_next_action():
    killed = BrevTaskKilledError("killed")
    asked: list[int] = []

    def interrupted() -> BaseException | None:
        asked.append(1)
        return killed if len(asked) > 1 else None

    machine = _Scripted()
    with pytest.raises(BrevTaskKilledError):
        drive(machine, lambda call: "answer", interrupted=interrupted)
    assert machine.received == ["answer"] and len(asked) == 2
    asked.clear()

    async def perform(call: Call) -> object:
        return "answer"

    with pytest.raises(BrevTaskKilledError):
        asyncio.run(adrive(_Scripted(), perform, interrupted=interrupted))


def test_records_without_a_logger_are_dropped_and_ends_are_settled_alike():
    assert drive(_Scripted(), lambda call: "x") == "ok"  # log=None: the Emit is dropped
    assert _settle(Emit(logging.INFO, "m"), None) is _GO_ON
    assert _settle(Done(0), None) == 0
    with pytest.raises(ValueError, match="bad"):
        _settle(Fail(ValueError("bad")), None)


def test_the_base_machine_keeps_its_end_and_refuses_answers_out_of_turn():
    machine = _Scripted()
    with pytest.raises(RuntimeError, match="no call was waiting"):
        machine.receive("early", 0.0)
    assert machine.next_action(0.0) == Call()
    with pytest.raises(RuntimeError, match="still waiting"):
        machine.next_action(0.0)
    machine.receive("x", 0.0)
    assert machine.next_action(0.0) == Emit(logging.INFO, "got it")  # records come before the end
    assert machine.next_action(0.0) == Done("ok")
    assert machine.next_action(5.0) == Done("ok")


def test_records_decided_with_an_action_come_before_it():
    follower = JobFollower(FollowPolicy(deadline=START), instance_name="w-1", job_id="j")
    assert follower.next_action(START) == Emit(logging.WARNING, "Deadline passed: killing job j on w-1.")
    assert follower.next_action(START) == KillJob()
