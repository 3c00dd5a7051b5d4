"""Following a detached remote job: one sans-I/O state machine for the worker and the triggerer.

Every decision of following a job is made here, once, without any I/O, in the one machine shape of
:mod:`airflow_provider_brev.core.protocol.machine` (the style of ``h11``): a driver asks
:meth:`JobFollower.next_action` what to do at time ``now`` -- the calls :class:`PollJob`, :class:`KillJob`,
:class:`SyncOutputs`, or ``Sleep``, ``Emit`` (a log line), ``Done`` (a :class:`JobOutcome`) or ``Fail`` -- performs
it, and answers a call with :meth:`JobFollower.receive` (a :class:`PollResult`, the kill's result word,
:class:`Synced`, or ``Failed``). The machine decides:

* which log lines are new and when the whole log has been drained (a poll reports the state *before* reading
  the log, so ``finished`` plus a drained offset means nothing was dropped);
* whether to poll again at once (more log is waiting), wait ``poll_interval`` -- on the instance, for the job to
  end (:attr:`PollJob.wait`, at most :data:`~airflow_provider_brev.core.jobs.handle.MAX_POLL_WAIT`; the rest of a
  longer interval on the driver), so that the end of a job is seen at once -- or back off after a failed call;
* whether the failure budget (``max_poll_failures`` *consecutive* transient failures) is spent -- a call that could
  not even start a process on this machine (:class:`~airflow_provider_brev.exceptions.BrevProcessStartError`:
  descriptors or processes exhausted) never spends it: it says nothing about the job, so following goes on with
  back-off;
* whether the absolute deadline passed (then the job is killed once and followed until it ends);
* whether the step's outputs are due to be synced while the job runs (:class:`SyncOutputs`: every
  ``sync_interval`` seconds, and as soon as a log line shows a new checkpoint);
* what the outcome is, and which error a non-successful outcome means (:func:`outcome_error`).

Which job a try follows (its own, or an earlier try's) is :mod:`airflow_provider_brev.core.jobs.attempts`.

:mod:`airflow_provider_brev.jobs.runner` runs it with the generic sync (worker) and async (triggerer) drivers
of :mod:`airflow_provider_brev.hooks.driver`; they only do I/O.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_brev.core.jobs.handle import MAX_POLL_WAIT
from airflow_provider_brev.core.jobs.remote import (
    DEFAULT_MAX_BYTES,
    FINISHED,
    LogLineAssembler,
    PollResult,
)
from airflow_provider_brev.core.protocol.machine import Call, Done, Fail, Failed, Sleep, StepMachine
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevJobLostError,
    BrevProcessStartError,
    BrevTimeoutError,
    retry_policy,
)

#: Outcome states beyond the job's own (``finished``/``lost``/``missing``).
TIMED_OUT = "timeout"
#: Not an end: the async driver stops following so the worker can sync the step's outputs (then follows again).
SYNC_DUE = "sync_due"
#: What starts every line of the job's own output in the task log: short, so the line stays on screen (the instance
#: is named once, in the "Launched job ... on <instance>" line before it).
REMOTE_LINE_PREFIX = "[remote] "
#: Longest back-off between failed polls, in seconds.
MAX_BACKOFF = 60.0


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
class PollJob(Call):
    """Call: poll the job, its state and the log from ``offset`` (at most ``max_bytes``), after waiting on the
    instance up to ``wait`` seconds for the job to end; the answer is a :class:`PollResult`."""

    offset: int
    max_bytes: int
    wait: float = 0.0


@dataclass(frozen=True)
class KillJob(Call):
    """Call: kill the job (its deadline passed), then keep following it until it has ended; the answer is what
    the kill command reported (a word)."""


@dataclass(frozen=True)
class SyncOutputs(Call):
    """Call: sync the step's outputs now (the interval passed or a new checkpoint appeared); the answer is
    :class:`Synced`."""


@dataclass(frozen=True)
class Synced:
    """The answer to :class:`SyncOutputs`.

    :param deferred: the driver cannot sync here (the triggerer holds no AWS credentials): following ends with a
        :data:`SYNC_DUE` outcome, the place to resume from once the worker has synced.
    """

    deferred: bool = False


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


class JobFollower(StepMachine[JobOutcome]):
    """The state machine of following one job (see the module docstring for the protocol).

    :param policy: intervals, budget, deadline.
    :param instance_name: the instance (for messages; the job's lines are shown as ``[remote] <line>``).
    :param job_id: the job's id (for messages).
    :param offset: byte offset already shown (resume point after a deferral or a re-attach).
    :param last_line: the last non-empty line shown so far.
    :param next_sync_at: when the next periodic output sync is due (epoch seconds); default: ``sync_interval``
        after the first :meth:`next_action`.
    :param hold_first: the first poll already waits on the instance for the job's end, as every later one does (the
        triggerer: its first poll was put off already, and one poll at the start is cheaper than two); by default the
        first poll reads at once.
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
        hold_first: bool = False,
    ) -> None:
        super().__init__()
        self.policy = policy
        self.instance_name = instance_name
        self.job_id = job_id
        self.offset = offset
        self.last_line = last_line
        self.timed_out = False
        self.failures = 0
        #: consecutive calls that could not start a process on this machine (never spend ``failures``)
        self.start_failures = 0
        self.next_sync_at = next_sync_at
        self.checkpoint_seen = False
        self._progress_re = re.compile(policy.progress_regex) if policy.progress_regex else None
        self._checkpoint_re = re.compile(policy.checkpoint_regex) if policy.checkpoint_regex else None
        self._last_percent: int | None = None
        self._assembler = LogLineAssembler()
        self._wait: float | None = None  # seconds to sleep on the driver before the next call
        # seconds the next poll waits on the instance for the job's end
        self._hold: float | None = min(float(policy.poll_interval), MAX_POLL_WAIT) if hold_first else None

    # -- asking ------------------------------------------------------------------------------------
    def _decide(self, now: float) -> Call | Sleep | Done[JobOutcome] | Fail:
        deadline = self.policy.deadline
        if self.policy.sync_interval is not None and self.next_sync_at is None:
            self.next_sync_at = now + float(self.policy.sync_interval)
        if self.sync_due(now):
            self._wait = self._hold = None  # syncing takes the place of the wait
            return SyncOutputs()
        if self._wait is not None:
            seconds, self._wait = self._wait, None
            return Sleep(self._until_due(seconds, now))
        if deadline is not None and not self.timed_out and now >= deadline:
            self.timed_out = True
            self._emit(logging.WARNING, f"Deadline passed: killing job {self.job_id} on {self.instance_name}.")
            return KillJob()
        hold, self._hold = self._hold or 0.0, None
        return PollJob(self.offset, self.policy.max_bytes, self._until_due(hold, now))

    def _until_due(self, seconds: float, now: float) -> float:
        """``seconds``, cut short by the deadline (unless the job is being killed) and the next output sync."""
        for limit in (None if self.timed_out else self.policy.deadline, self.next_sync_at):
            if limit is not None:
                seconds = min(seconds, max(0.0, limit - now))
        return seconds

    def sync_due(self, now: float) -> bool:
        """Whether the step's outputs should be synced at ``now``: periodic sync on, the job not being killed,
        and either the interval passed or a new checkpoint appeared in the log since the last sync."""
        deadline = self.policy.deadline
        if self.policy.sync_interval is None or self.timed_out or (deadline is not None and now >= deadline):
            return False
        return self.checkpoint_seen or (self.next_sync_at is not None and now >= self.next_sync_at)

    # -- answering ---------------------------------------------------------------------------------
    def _receive(self, call: Call, outcome: object, now: float) -> None:
        if isinstance(outcome, Failed):
            self._failed(call, outcome.error)
            return
        expected = {PollResult: PollJob, str: KillJob, Synced: SyncOutputs}.get(type(outcome))
        if expected is None or not isinstance(call, expected):
            kind = expected.__name__ if expected is not None else type(outcome).__name__
            raise RuntimeError(f"Got the answer to {kind} while waiting for {call!r}")
        if isinstance(outcome, PollResult):
            self._polled(outcome)
        elif isinstance(outcome, Synced):
            self._synced(outcome, now)
        else:
            self.failures = 0
            self._emit(logging.INFO, f"Job {self.job_id}: {outcome}.")

    def _polled(self, poll: PollResult) -> None:
        self.failures = self.start_failures = 0
        lines = self._assembler.feed(poll.chunk)
        self.offset = poll.next_offset
        if poll.complete:
            lines += self._assembler.flush()
        for line in lines:
            self._emit(logging.INFO, f"{REMOTE_LINE_PREFIX}{line}")
            if line.strip():
                self.last_line = line
            if progress := self._progress(line):
                self._emit(logging.INFO, f"Job {self.job_id} {progress}")
            if self._checkpoint_re is not None and self._checkpoint_re.search(line) and not poll.complete:
                self.checkpoint_seen = True
        if poll.complete:
            state = TIMED_OUT if self.timed_out else poll.state
            exit_code = poll.exit_code if poll.state == FINISHED else None
            self._finish(Done(JobOutcome(state, exit_code, self.last_line, self.offset)))
        elif self.offset >= poll.log_size:  # nothing more waiting: the next poll waits for the job's end
            interval = float(self.policy.poll_interval)
            self._hold = min(interval, MAX_POLL_WAIT)
            self._wait = interval - self._hold or None  # the rest of a long interval, on the driver

    def _synced(self, synced: Synced, now: float) -> None:
        """Whatever the sync achieved (its failures are the caller's to log), the next periodic sync is due
        ``sync_interval`` after ``now``; a deferred sync ends following with :data:`SYNC_DUE`."""
        if synced.deferred:
            self._finish(Done(JobOutcome(SYNC_DUE, None, self.last_line, self.offset)))
            return
        self.checkpoint_seen = False
        self.next_sync_at = now + float(self.policy.sync_interval or 0.0)

    def _failed(self, failed: Call, error: BaseException) -> None:
        """The call for the last action failed with ``error``."""
        if isinstance(failed, KillJob):
            self.timed_out = False  # the kill is tried again at the next step
        what = "Kill" if isinstance(failed, KillJob) else "Poll"
        self._hold = None
        if isinstance(error, BrevProcessStartError):  # this machine's fault: says nothing about the job
            self.start_failures += 1
            self._wait = min(float(self.policy.poll_interval) * self.start_failures, MAX_BACKOFF)
            self._emit(
                logging.WARNING,
                f"{what} of job {self.job_id} could not start a process here ({error}); the job keeps running, "
                f"retrying in {self._wait:.0f} s.",
            )
            return
        if retry_policy(error) != "hook":
            self._finish(Fail(error))
            return
        self.start_failures = 0
        self.failures += 1
        if self.failures > int(self.policy.max_poll_failures):
            self._finish(Fail(error))
            return
        self._emit(
            logging.WARNING,
            f"{what} {self.failures} of job {self.job_id} failed ({error}); the job keeps running, retrying.",
        )
        self._wait = min(float(self.policy.poll_interval) * self.failures, MAX_BACKOFF)

    # -- internals ---------------------------------------------------------------------------------
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
