"""Following a detached remote job: one sans-I/O state machine for the worker and the triggerer.

Every decision of following a job is made here, once, without any I/O (the style of ``h11``): the caller asks
:meth:`JobFollower.next_action` what to do at time ``now`` -- :class:`PollJob`, :class:`KillJob`, :class:`Wait`,
or stop with :class:`JobDone` / :class:`GiveUp` -- performs it, and feeds the answer back
(:meth:`JobFollower.receive_poll`, :meth:`JobFollower.receive_kill`, :meth:`JobFollower.receive_error`). The
machine decides:

* which log lines are new and when the whole log has been drained (a poll reports the state *before* reading
  the log, so ``finished`` plus a drained offset means nothing was dropped);
* whether to poll again at once (more log is waiting), wait ``poll_interval``, or back off after a failed call;
* whether the failure budget (``max_poll_failures`` *consecutive* transient failures) is spent;
* whether the absolute deadline passed (then the job is killed once and followed until it ends);
* whether the step's outputs are due to be synced while the job runs (:class:`SyncOutputs`: every
  ``sync_interval`` seconds, and as soon as a log line shows a new checkpoint);
* what the outcome is, and which error a non-successful outcome means (:func:`outcome_error`).

Which job a try follows (its own, or an earlier try's) is :mod:`airflow_provider_brev.cli.jobs.attempts`.

The drivers, sync for the worker and async for the triggerer, live in
:mod:`airflow_provider_brev.utils.job_runner`; they only do I/O.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_brev.cli.jobs.remote import (
    DEFAULT_MAX_BYTES,
    FINISHED,
    LogLineAssembler,
    PollResult,
)
from airflow_provider_brev.exceptions import BrevError, BrevJobLostError, BrevTimeoutError, retry_policy

#: Outcome states beyond the job's own (``finished``/``lost``/``missing``).
TIMED_OUT = "timeout"
#: Not an end: the async driver stops following so the worker can sync the step's outputs (then follows again).
SYNC_DUE = "sync_due"
#: Longest back-off between failed polls, in seconds.
MAX_BACKOFF = 60.0

#: A log record for the caller to emit: ``(logging level, message)``.
Note = tuple[int, str]


@dataclass
class JobOutcome:
    """How a followed job ended (JSON-serialisable through :meth:`to_dict`).

    :param state: ``finished``, ``lost``, ``missing`` or :data:`TIMED_OUT`.
    :param exit_code: the job's exit code (only when it finished).
    :param last_line: the last non-empty log line.
    :param offset: bytes of log shown.
    """

    state: str
    exit_code: int | None
    last_line: str
    offset: int

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "exit_code": self.exit_code, "last_line": self.last_line, "offset": self.offset}

    @property
    def collected(self) -> bool:
        """The job will not run again and its result has been read."""
        return self.state in (FINISHED, TIMED_OUT)

    @property
    def succeeded(self) -> bool:
        """The job finished by itself with exit code 0 (a retry may collect it instead of running it again)."""
        return self.state == FINISHED and self.exit_code == 0


def outcome_error(outcome: JobOutcome, instance_name: str, job_id: str) -> BrevError | None:
    """The error a job outcome means, or ``None`` when it finished with an exit code (judged by the caller)."""
    if outcome.state == TIMED_OUT:
        return BrevTimeoutError(
            f"The command on {instance_name!r} did not finish within its timeout and was killed (job {job_id})."
        )
    if outcome.state != FINISHED or outcome.exit_code is None:
        return BrevJobLostError(
            f"Job {job_id} on {instance_name!r} is {outcome.state}: its process died without an exit code "
            "(instance rebooted, OOM killer, or instance replaced). A retry relaunches it."
        )
    return None


# ------------------------------------------------------------------------------------------------ actions


@dataclass(frozen=True)
class PollJob:
    """Poll the job: its state and the log from ``offset`` (at most ``max_bytes``)."""

    offset: int
    max_bytes: int


@dataclass(frozen=True)
class KillJob:
    """Kill the job (its deadline passed); then keep following it until it has ended."""


@dataclass(frozen=True)
class Wait:
    """Sleep ``seconds`` before asking again."""

    seconds: float


@dataclass(frozen=True)
class SyncOutputs:
    """Sync the step's outputs now (the interval passed or a new checkpoint appeared); then answer with
    :meth:`JobFollower.receive_synced`."""


@dataclass(frozen=True)
class JobDone:
    """The job ended and its whole log was read."""

    outcome: JobOutcome


@dataclass(frozen=True)
class GiveUp:
    """Stop following: raise ``error`` (the failure budget is spent, or the error is not transient)."""

    error: BaseException


Action = PollJob | KillJob | SyncOutputs | Wait | JobDone | GiveUp


@dataclass(frozen=True)
class FollowPolicy:
    """How to follow a job.

    :param poll_interval: seconds between polls while the job prints nothing new; the back-off after the n-th
        consecutive failed call is ``n * poll_interval`` (at most :data:`MAX_BACKOFF`).
    :param max_bytes: maximum log bytes fetched per poll.
    :param max_poll_failures: consecutive failed calls tolerated; one more gives up.
    :param deadline: absolute deadline (epoch seconds) or ``None``; past it the job is killed.
    :param progress_regex: a regex with two groups ``(done, total)``; matching lines are also reported as a
        percentage.
    :param sync_interval: seconds between output syncs while the job runs (``None``: no periodic sync).
    :param checkpoint_regex: with ``sync_interval``, a log line matching it (a new checkpoint) makes a sync due
        at once.
    """

    poll_interval: float = 5.0
    max_bytes: int = DEFAULT_MAX_BYTES
    max_poll_failures: int = 30
    deadline: float | None = None
    progress_regex: str | None = None
    sync_interval: float | None = None
    checkpoint_regex: str | None = None


# -------------------------------------------------------------------------------------------------- machine


class JobFollower:
    """The state machine of following one job (see the module docstring for the protocol).

    :param policy: intervals, budget, deadline.
    :param instance_name: the instance (for log lines: ``[<instance>] <line>``).
    :param job_id: the job's id (for messages).
    :param offset: byte offset already shown (resume point after a deferral or a re-attach).
    :param last_line: the last non-empty line shown so far.
    :param next_sync_at: when the next periodic output sync is due (epoch seconds); default: ``sync_interval``
        after the first :meth:`next_action`.
    """

    def __init__(
        self,
        policy: FollowPolicy,
        *,
        instance_name: str,
        job_id: str,
        offset: int = 0,
        last_line: str = "",
        next_sync_at: float | None = None,
    ) -> None:
        self.policy = policy
        self.instance_name = instance_name
        self.job_id = job_id
        self.offset = offset
        self.last_line = last_line
        self.timed_out = False
        self.failures = 0
        self.next_sync_at = next_sync_at
        self.checkpoint_seen = False
        self._progress_re = re.compile(policy.progress_regex) if policy.progress_regex else None
        self._checkpoint_re = re.compile(policy.checkpoint_regex) if policy.checkpoint_regex else None
        self._last_percent: int | None = None
        self._assembler = LogLineAssembler()
        self._notes: list[Note] = []
        self._wait: float | None = None
        self._in_flight: PollJob | KillJob | SyncOutputs | None = None
        self._final: JobDone | GiveUp | None = None

    # -- asking ------------------------------------------------------------------------------------
    def next_action(self, now: float) -> Action:
        """What to do at time ``now`` (epoch seconds)."""
        if self._final is not None:
            return self._final
        if self._in_flight is not None:
            raise RuntimeError(f"{self._in_flight!r} is still waiting for its answer")
        deadline = self.policy.deadline
        if self.policy.sync_interval is not None and self.next_sync_at is None:
            self.next_sync_at = now + float(self.policy.sync_interval)
        if self.sync_due(now):
            self._wait = None  # syncing takes the place of the wait
            self._in_flight = SyncOutputs()
            return self._in_flight
        if self._wait is not None:
            seconds, self._wait = self._wait, None
            for limit in (None if self.timed_out else deadline, self.next_sync_at):
                if limit is not None:
                    seconds = min(seconds, max(0.0, limit - now))
            return Wait(seconds)
        if deadline is not None and not self.timed_out and now >= deadline:
            self.timed_out = True
            self._note(logging.WARNING, f"Deadline passed: killing job {self.job_id} on {self.instance_name}.")
            self._in_flight = KillJob()
        else:
            self._in_flight = PollJob(self.offset, self.policy.max_bytes)
        return self._in_flight

    def sync_due(self, now: float) -> bool:
        """Whether the step's outputs should be synced at ``now``: periodic sync on, the job not being killed,
        and either the interval passed or a new checkpoint appeared in the log since the last sync."""
        deadline = self.policy.deadline
        if self.policy.sync_interval is None or self.timed_out or (deadline is not None and now >= deadline):
            return False
        return self.checkpoint_seen or (self.next_sync_at is not None and now >= self.next_sync_at)

    def take_notes(self) -> list[Note]:
        """The log records decided since the last call, in order."""
        notes, self._notes = self._notes, []
        return notes

    # -- answering ---------------------------------------------------------------------------------
    def receive_poll(self, poll: PollResult) -> None:
        """The answer to :class:`PollJob`."""
        self._answered(PollJob)
        self.failures = 0
        lines = self._assembler.feed(poll.chunk)
        self.offset = poll.next_offset
        if poll.complete:
            lines += self._assembler.flush()
        for line in lines:
            self._note(logging.INFO, f"[{self.instance_name}] {line}")
            if line.strip():
                self.last_line = line
            if progress := self._progress(line):
                self._note(logging.INFO, f"Job {self.job_id} {progress}")
            if self._checkpoint_re is not None and self._checkpoint_re.search(line) and not poll.complete:
                self.checkpoint_seen = True
        if poll.complete:
            state = TIMED_OUT if self.timed_out else poll.state
            exit_code = poll.exit_code if poll.state == FINISHED else None
            self._final = JobDone(JobOutcome(state, exit_code, self.last_line, self.offset))
        elif self.offset >= poll.log_size:  # nothing more waiting: poll again after the interval
            self._wait = float(self.policy.poll_interval)

    def receive_synced(self, now: float) -> None:
        """The answer to :class:`SyncOutputs` (whatever the sync achieved: its failures are the caller's to log);
        the next periodic sync is due ``sync_interval`` after ``now``."""
        self._answered(SyncOutputs)
        self.checkpoint_seen = False
        self.next_sync_at = now + float(self.policy.sync_interval or 0.0)

    def receive_kill(self, result: str) -> None:
        """The answer to :class:`KillJob` (what the kill command reported)."""
        self._answered(KillJob)
        self.failures = 0
        self._note(logging.INFO, f"Job {self.job_id}: {result}.")

    def receive_error(self, error: BaseException) -> None:
        """The call for the last action failed with ``error``."""
        failed = self._in_flight
        self._in_flight = None
        if isinstance(failed, KillJob):
            self.timed_out = False  # the kill is tried again at the next step
        if retry_policy(error) != "hook":
            self._final = GiveUp(error)
            return
        self.failures += 1
        if self.failures > int(self.policy.max_poll_failures):
            self._final = GiveUp(error)
            return
        what = "Kill" if isinstance(failed, KillJob) else "Poll"
        self._note(
            logging.WARNING,
            f"{what} {self.failures} of job {self.job_id} failed ({error}); the job keeps running, retrying.",
        )
        self._wait = min(float(self.policy.poll_interval) * self.failures, MAX_BACKOFF)

    # -- internals ---------------------------------------------------------------------------------
    def _answered(self, kind: type[PollJob] | type[KillJob] | type[SyncOutputs]) -> None:
        if not isinstance(self._in_flight, kind):
            raise RuntimeError(f"Got the answer to {kind.__name__} while waiting for {self._in_flight!r}")
        self._in_flight = None

    def _note(self, level: int, message: str) -> None:
        self._notes.append((level, message))

    def _progress(self, line: str) -> str | None:
        """A "progress: N% (a/b)" message when ``line`` advances the progress regex's ``(done, total)``."""
        if self._progress_re is None:
            return None
        match = self._progress_re.search(line)
        if not match:
            return None
        try:
            done, total = int(match.group(1)), int(match.group(2))
        except (IndexError, ValueError):
            return None
        if total <= 0:
            return None
        percent = max(0, min(100, round(100 * done / total)))
        if percent == self._last_percent:
            return None
        self._last_percent = percent
        return f"progress: {percent}% ({done}/{total})"
