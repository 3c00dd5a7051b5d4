"""Test helpers shared by ``core/jobs/test_follower_drivers.py``, ``core/jobs/test_remote.py``,
``jobs/test_runner.py``, ``triggers/test_brev.py`` (one definition, imported by each)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from airflow_provider_brev.core.jobs.follower import TIMED_OUT, FollowPolicy, JobOutcome
from airflow_provider_brev.core.jobs.remote import FINISHED, KILLED_EXIT_CODE, LOST, RUNNING, PollResult, RemoteJob
from airflow_provider_brev.exceptions import BrevAuthError, BrevConnectionLostError
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
