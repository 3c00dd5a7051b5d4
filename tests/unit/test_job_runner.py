"""The one job runner: its sync (worker) and async (triggerer) drivers make the same decisions.

The subject is :class:`~airflow_provider_brev.jobs.runner.JobRunner` and the pure
:class:`~airflow_provider_brev.core.jobs.follower.JobFollower` behind it. The hook is replaced by a small model of
one remote job (its log grows per poll, it finishes, is lost or is killed, some polls drop the connection), and
the clock by a fake one that ``sleep`` advances, so deadlines are exact and nothing really sleeps. Each scenario
runs through both drivers against the same model; calls, sleeps, log records and outcome must be identical. The
end-to-end behaviour against the simulator is in tests/integration/test_exec_dags.py and tests/chaos.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import pytest
from machine_steps import step

from airflow_provider_brev.core.jobs.follower import (
    MAX_BACKOFF,
    REMOTE_LINE_PREFIX,
    SYNC_DUE,
    TIMED_OUT,
    FollowPolicy,
    JobFollower,
    JobOutcome,
    KillJob,
    PollJob,
    Synced,
    SyncOutputs,
    outcome_error,
)
from airflow_provider_brev.core.jobs.remote import (
    FINISHED,
    KILLED_EXIT_CODE,
    LOST,
    MISSING,
    RUNNING,
    PollResult,
    RemoteJob,
)
from airflow_provider_brev.core.protocol.machine import Failed, Sleep
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevConnectionLostError,
    BrevJobLostError,
    BrevTimeoutError,
)
from airflow_provider_brev.jobs.runner import JobRunner

START = 1_000_000.0
NAME = "inst-1"
JOB = RemoteJob("dag-task-0123456789-t1")


@dataclass
class FakeClock:
    now: float = START

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


@dataclass
class FakeJobHook:
    """A remote job as the hook's poll/kill methods see it (sync and async twins answer alike).

    :param log: the job's whole output.
    :param grow: bytes of log that appear per poll while the job runs.
    :param ends_at_poll: the poll (1-based, failed ones counted) from which the job has ended; ``None``: never.
    :param exit_code: its exit code when it ends (``None``: it is ``lost``).
    :param drops: polls that lose the connection.
    :param error: raised by every poll instead (a non-transient failure).
    """

    log: bytes
    grow: int = 1 << 30
    ends_at_poll: int | None = 1
    exit_code: int | None = 0
    drops: frozenset[int] = frozenset()
    error: Exception | None = None
    clock: FakeClock = field(default_factory=FakeClock)
    calls: list[tuple] = field(default_factory=list)
    polls: int = 0
    killed: bool = False

    def poll_job(self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = 1, wait: float = 0.0) -> PollResult:
        assert (name, job) == (NAME, JOB)
        self.polls += 1
        self.clock.now += wait  # the job runs through the whole wait (it ends only at a poll: ``ends_at_poll``)
        self.calls.append(("poll", offset, max_bytes, self.clock.now))  # when the state was read
        if self.error is not None:
            raise self.error
        if self.polls in self.drops:
            raise BrevConnectionLostError(f"ssh dropped on poll {self.polls}", command="exec")
        ended = self.killed or (self.ends_at_poll is not None and self.polls >= self.ends_at_poll)
        size = len(self.log) if ended else min(len(self.log), self.polls * self.grow)
        if self.killed:
            state, exit_code = FINISHED, KILLED_EXIT_CODE
        elif ended:
            state, exit_code = (FINISHED, self.exit_code) if self.exit_code is not None else (LOST, None)
        else:
            state, exit_code = RUNNING, None
        chunk = self.log[offset : min(size, offset + max_bytes)]
        return PollResult(state=state, exit_code=exit_code, log_size=size, pid=42, chunk=chunk, offset=offset)

    async def apoll_job(
        self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = 1, wait: float = 0.0
    ) -> PollResult:
        return self.poll_job(name, job, offset=offset, max_bytes=max_bytes, wait=wait)

    def kill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = 10, timeout: float = 60) -> str:
        self.calls.append(("kill", self.clock.now))
        self.killed = True
        return "killed"

    async def akill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = 10, timeout: float = 60) -> str:
        return self.kill_job(name, job, grace_seconds=grace_seconds, timeout=timeout)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))


def lines_of(n: int, prefix: str = "line") -> bytes:
    return b"".join(f"{prefix} {i}\n".encode() for i in range(1, n + 1))


@dataclass(frozen=True)
class Scenario:
    id: str
    hook: dict
    policy: dict = field(default_factory=dict)
    state: str | None = None  # expected outcome state, or
    raises: type[Exception] | None = None  # the error following gives up with
    exit_code: int | None = None
    expect_lines: int = 3


SCENARIOS = [
    Scenario("finishes-ok", {"log": lines_of(3), "ends_at_poll": 3, "grow": 8}, state=FINISHED, exit_code=0),
    Scenario("non-zero-exit", {"log": lines_of(3), "ends_at_poll": 2, "exit_code": 3}, state=FINISHED, exit_code=3),
    Scenario(
        "transient-errors-within-budget",
        {"log": lines_of(3), "ends_at_poll": 5, "grow": 6, "drops": frozenset({2, 3, 4})},
        {"max_poll_failures": 3},
        state=FINISHED,
        exit_code=0,
    ),
    Scenario(
        "transient-errors-beyond-budget",
        {"log": lines_of(3), "ends_at_poll": 9, "grow": 6, "drops": frozenset({2, 3, 4})},
        {"max_poll_failures": 2},
        raises=BrevConnectionLostError,
        expect_lines=0,
    ),
    Scenario(
        "non-transient-error-gives-up-at-once",
        {"log": b"", "error": BrevAuthError("logged out")},
        raises=BrevAuthError,
        expect_lines=0,
    ),
    Scenario(
        "deadline-kills",
        {"log": lines_of(3), "ends_at_poll": None, "grow": 6},
        {"deadline": START + 7.5},
        state=TIMED_OUT,
        exit_code=KILLED_EXIT_CODE,
    ),
    Scenario("job-lost", {"log": lines_of(3), "ends_at_poll": 2, "exit_code": None}, state=LOST, exit_code=None),
    Scenario(
        "large-log-drained-in-several-polls",
        {"log": lines_of(2000), "ends_at_poll": 1},
        {"max_bytes": 1000},
        state=FINISHED,
        exit_code=0,
        expect_lines=2000,
    ),
    Scenario(
        "progress-and-partial-last-line",
        {"log": b"Epoch 1/4\nEpoch 2/4\nEpoch 4/4\nno newline at the end", "ends_at_poll": 2, "grow": 10},
        {"progress_regex": r"Epoch (\d+)/(\d+)"},
        state=FINISHED,
        exit_code=0,
        expect_lines=4,
    ),
]


def drive(scenario: Scenario, mode: str) -> dict:
    clock = FakeClock()
    hook = FakeJobHook(clock=clock, **scenario.hook)
    policy = FollowPolicy(**{"poll_interval": 2.0, "max_bytes": 1 << 20, **scenario.policy})
    logger = logging.getLogger(f"test.job_runner.{mode}.{scenario.id}")
    logger.propagate = False
    handler = Records()
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    runner = JobRunner(hook, NAME, JOB, policy, logger, clock=lambda: clock.now)
    outcome: JobOutcome | None = None
    error: Exception | None = None
    try:
        if mode == "sync":
            outcome = runner.follow(sleep=clock.sleep)
        else:
            outcome = asyncio.run(runner.afollow(sleep=clock.asleep))
    except Exception as err:
        error = err
    return {
        "outcome": outcome,
        "error": (type(error), str(error)) if error else None,
        "calls": hook.calls,
        "records": handler.records,
        "offset": runner.offset,
        "end": clock.now,
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_sync_and_async_drivers_decide_alike(scenario):
    sync, async_ = drive(scenario, "sync"), drive(scenario, "async")
    assert sync == async_

    shown = [m.removeprefix(REMOTE_LINE_PREFIX) for _, m in sync["records"] if m.startswith(REMOTE_LINE_PREFIX)]
    assert len(shown) == scenario.expect_lines
    log = scenario.hook["log"].decode()
    assert "\n".join(shown) == log.rstrip("\n")[: len("\n".join(shown))]  # in order, none lost, none repeated
    if scenario.raises is not None:
        assert sync["outcome"] is None
        assert sync["error"][0] is scenario.raises
        return
    outcome = sync["outcome"]
    assert (outcome.state, outcome.exit_code) == (scenario.state, scenario.exit_code)
    assert outcome.offset == len(scenario.hook["log"])  # the whole log was drained
    assert outcome.last_line == shown[-1]


def test_retries_back_off_and_the_budget_resets_after_a_good_poll():
    result = drive(SCENARIOS[2], "sync")
    times = [call[-1] - START for call in result["calls"]]
    # poll 1 ok (wait 2), polls 2-4 drop (back-off 2, 4, 6), poll 5 ok and final
    assert times == [0.0, 2.0, 4.0, 8.0, 14.0]
    warnings = [message for level, message in result["records"] if level == logging.WARNING]
    assert [w.split(" of job")[0] for w in warnings] == ["Poll 1", "Poll 2", "Poll 3"]
    assert all("the job keeps running, retrying" in w for w in warnings)


def test_giving_up_keeps_the_error_and_warns_within_the_budget_only():
    result = drive(SCENARIOS[3], "async")
    assert result["error"] == (BrevConnectionLostError, "ssh dropped on poll 4")
    assert len([r for r in result["records"] if r[0] == logging.WARNING]) == 2


def test_deadline_kills_once_at_the_deadline_then_drains():
    result = drive(SCENARIOS[5], "sync")
    kills = [call for call in result["calls"] if call[0] == "kill"]
    assert kills == [("kill", START + 7.5)]  # the wait before it was cut short to the deadline
    assert result["calls"][-1][0] == "poll"  # the log was read after the kill
    assert (logging.WARNING, f"Deadline passed: killing job {JOB.job_id} on {NAME}.") in result["records"]
    assert isinstance(outcome_error(result["outcome"], NAME, JOB.job_id), BrevTimeoutError)


def test_large_log_is_drained_without_sleeping():
    result = drive(SCENARIOS[7], "sync")
    assert len(result["calls"]) > 5
    assert result["end"] == START  # every poll came at once: more log was waiting
    assert [call[1] for call in result["calls"]] == sorted({call[1] for call in result["calls"]})


def test_progress_is_reported_once_per_percentage():
    result = drive(SCENARIOS[8], "sync")
    progress = [message for _, message in result["records"] if "progress:" in message]
    assert progress == [f"Job {JOB.job_id} progress: {p}" for p in ("25% (1/4)", "50% (2/4)", "100% (4/4)")]
    assert result["outcome"].last_line == "no newline at the end"


def test_resume_from_an_offset_shows_only_the_rest():
    clock = FakeClock()
    hook = FakeJobHook(log=lines_of(5), clock=clock)
    offset = len(lines_of(3))
    handler = Records()
    logger = logging.getLogger("test.job_runner.resume")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    runner = JobRunner(hook, NAME, JOB, FollowPolicy(), logger, offset=offset, last_line="line 3", clock=lambda: 0)
    outcome = runner.follow(sleep=clock.sleep)
    assert [m for _, m in handler.records] == [f"{REMOTE_LINE_PREFIX}line 4", f"{REMOTE_LINE_PREFIX}line 5"]
    assert hook.calls[0][1] == offset
    assert (outcome.state, outcome.offset, outcome.last_line) == (FINISHED, len(lines_of(5)), "line 5")


def test_the_machine_refuses_answers_out_of_turn():
    machine = JobFollower(FollowPolicy(), instance_name=NAME, job_id=JOB.job_id)
    action = machine.next_action(START)
    assert action == PollJob(0, FollowPolicy().max_bytes)
    with pytest.raises(RuntimeError, match="still waiting"):
        machine.next_action(START)
    with pytest.raises(RuntimeError, match="KillJob"):
        machine.receive("killed", START)


def test_a_failed_kill_is_retried_within_the_budget():
    machine = JobFollower(FollowPolicy(deadline=START, poll_interval=1), instance_name=NAME, job_id=JOB.job_id)
    notes: list[tuple[int, str]] = []
    assert step(machine, START, notes) == KillJob()
    machine.receive(Failed(BrevConnectionLostError("drop")), START)
    assert step(machine, START, notes) == Sleep(0.0)  # the deadline already passed: no back-off wait
    assert step(machine, START, notes) == KillJob()
    assert [message.split(" of job")[0].split(":")[0] for _, message in notes] == [
        "Deadline passed",
        "Kill 1",
        "Deadline passed",
    ]


def test_backoff_is_capped():
    machine = JobFollower(FollowPolicy(poll_interval=50, max_poll_failures=5), instance_name=NAME, job_id="j")
    waits = []
    for _ in range(3):
        step(machine, START)
        machine.receive(Failed(BrevConnectionLostError("drop")), START)
        waits.append(step(machine, START).seconds)
    assert waits == [50.0, MAX_BACKOFF, MAX_BACKOFF]


@pytest.mark.parametrize(
    ("outcome", "error"),
    [
        (JobOutcome(FINISHED, 0, "", 0), None),
        (JobOutcome(FINISHED, 7, "", 0), None),
        (JobOutcome(TIMED_OUT, 143, "", 0), BrevTimeoutError),
        (JobOutcome(LOST, None, "", 0), BrevJobLostError),
        (JobOutcome(MISSING, None, "", 0), BrevJobLostError),
    ],
)
def test_outcome_errors(outcome, error):
    found = outcome_error(outcome, NAME, JOB.job_id)
    assert (type(found) if found else None) is error
    assert outcome.collected == (outcome.state in (FINISHED, TIMED_OUT))
    assert outcome.succeeded == (outcome.state == FINISHED and outcome.exit_code == 0)


def test_the_trigger_follows_with_the_policy_the_worker_uses():
    from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger

    policy = FollowPolicy(
        poll_interval=0.5,
        max_bytes=1234,
        max_poll_failures=7,
        deadline=START,
        progress_regex="x",
        sync_interval=30.0,
        checkpoint_regex="ckpt",
    )
    trigger = BrevRemoteJobTrigger.for_policy(instance_name=NAME, job=JOB.to_dict(), policy=policy)
    assert trigger.policy == policy
    _, kwargs = trigger.serialize()
    assert BrevRemoteJobTrigger(**kwargs).policy == policy


# ------------------------------------------------------------------------------------------ output syncs


def follow_with_syncs(hook: FakeJobHook, policy: FollowPolicy, mode: str, clock: FakeClock) -> tuple:
    """Follow until the end (sync: ``on_sync`` records each sync) or the first ``sync_due`` (async)."""
    logger = logging.getLogger(f"test.job_runner.sync.{mode}")
    logger.handlers[:] = [Records()]
    logger.propagate = False
    runner = JobRunner(hook, NAME, JOB, policy, logger, clock=lambda: clock.now)
    synced: list[tuple[float, int]] = []
    if mode == "sync":
        outcome = runner.follow(sleep=clock.sleep, on_sync=lambda: synced.append((clock.now, runner.offset)))
    else:
        outcome = asyncio.run(runner.afollow(sleep=clock.asleep))
    return outcome, synced


def test_outputs_sync_every_interval_while_the_job_runs():
    clock = FakeClock()
    hook = FakeJobHook(log=lines_of(40), grow=8, ends_at_poll=20, clock=clock)
    outcome, synced = follow_with_syncs(hook, FollowPolicy(poll_interval=2.0, sync_interval=10.0), "sync", clock)
    assert outcome.state == FINISHED and outcome.offset == len(lines_of(40))
    assert [t - START for t, _ in synced] == [10.0, 20.0, 30.0]  # the waits were cut to the due time
    # a poll waits on the instance up to the due sync, and the first poll after a sync does not wait; the job ends
    # at its 20th poll (32 s) and no sync follows its end
    assert [call[-1] - START for call in hook.calls if call[-1] - START >= 28] == [28.0, 30.0, 30.0, 32.0]


def test_the_async_driver_stops_where_the_sync_driver_syncs():
    policy = FollowPolicy(poll_interval=2.0, sync_interval=10.0)
    clocks = FakeClock(), FakeClock()
    hooks = [FakeJobHook(log=lines_of(40), grow=8, ends_at_poll=20, clock=c) for c in clocks]
    _, synced = follow_with_syncs(hooks[0], policy, "sync", clocks[0])
    stopped, _ = follow_with_syncs(hooks[1], policy, "async", clocks[1])
    assert stopped.state == SYNC_DUE and stopped.exit_code is None and not stopped.collected
    assert (clocks[1].now, stopped.offset) == synced[0]
    assert hooks[1].calls == hooks[0].calls[: len(hooks[1].calls)]


def test_a_checkpoint_line_makes_a_sync_due_at_once():
    log = b"Epoch 1/3\nSaved checkpoint: /results/train/model_epoch_000_step_00010.pth\nEpoch 2/3\n"
    clock = FakeClock()
    hook = FakeJobHook(log=log, grow=74, ends_at_poll=4, clock=clock)  # poll 1 ends with the checkpoint line
    policy = FollowPolicy(poll_interval=2.0, sync_interval=3600.0, checkpoint_regex=r"Saved checkpoint")
    outcome, synced = follow_with_syncs(hook, policy, "sync", clock)
    assert outcome.state == FINISHED
    assert synced == [(START, 74)]  # right after the poll that showed the checkpoint, before any wait


@pytest.mark.parametrize(
    ("policy", "next_sync_at", "checkpoint_seen", "now", "due"),
    [
        ({}, START, True, START, False),  # no periodic sync configured
        ({"sync_interval": 10.0}, START + 10, False, START + 9.9, False),
        ({"sync_interval": 10.0}, START + 10, False, START + 10, True),
        ({"sync_interval": 10.0}, START + 10, True, START, True),  # a new checkpoint
        ({"sync_interval": 10.0, "deadline": START + 5}, START + 10, True, START + 5, False),  # being killed
    ],
)
def test_sync_due_decisions(policy, next_sync_at, checkpoint_seen, now, due):
    machine = JobFollower(FollowPolicy(**policy), instance_name=NAME, job_id="j", next_sync_at=next_sync_at)
    machine.checkpoint_seen = checkpoint_seen
    assert machine.sync_due(now) is due


def test_a_sync_is_answered_and_schedules_the_next():
    machine = JobFollower(FollowPolicy(sync_interval=10.0), instance_name=NAME, job_id="j", next_sync_at=START)
    assert machine.next_action(START) == SyncOutputs()
    with pytest.raises(RuntimeError, match="SyncOutputs"):
        machine.receive("killed", START + 3)
    machine = JobFollower(FollowPolicy(sync_interval=10.0), instance_name=NAME, job_id="j", next_sync_at=START)
    assert machine.next_action(START) == SyncOutputs()
    machine.receive(Synced(), START + 3)
    assert machine.next_sync_at == START + 13
    assert isinstance(machine.next_action(START + 3), PollJob)
    machine.receive(PollResult(state=RUNNING, exit_code=None, log_size=0, pid=1), START + 3)
    # the poll interval, waited on the instance and not cut: the sync is 9 s away
    assert machine.next_action(START + 4) == PollJob(0, FollowPolicy().max_bytes, 5.0)
