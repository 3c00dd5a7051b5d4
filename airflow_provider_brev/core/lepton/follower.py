"""Following a Lepton job: one sans-I/O state machine for the worker and the triggerer (pure).

The machine has the one shape of :mod:`airflow_provider_brev.core.protocol.machine`: a driver
(:mod:`airflow_provider_brev.hooks.driver`) asks :meth:`LeptonJobFollower.next_action`, performs the calls
:class:`PollLeptonJob` (the job and its log from a timestamp on: a :class:`LeptonJobPoll`) and
:class:`StopLeptonJob`, and answers them. The machine decides:

* which log lines are new (the log is read by timestamp; lines of the cursor's own timestamp already shown are
  skipped), how they are shown (secret fragments redacted where the follower knows them -- the worker --, then
  progress bars squashed to what a terminal shows, as a Brev job's lines are) and which line is the agent's result
  (:mod:`.report`, not shown);
* when the job waited in its node group's queue past ``queue_timeout``: it is stopped and the follow fails with
  :class:`~airflow_provider_brev.exceptions.LeptonResourcesUnavailableError`;
* when the absolute deadline passed: the job is stopped once and followed until it ended (:data:`TIMED_OUT`);
* when the job ended and its log was read to the end (the agent's result line, or a grace of a few polls: the
  log may trail the state), and what the outcome is (:class:`LeptonOutcome`, :func:`outcome_error`);
* how many consecutive transient failures are tolerated, and the back-off between them;
* how long Lepton must keep an ended job for all this (:func:`ttl_floor`; a shorter ``ttl_seconds_after_finished``
  is refused before anything is submitted, :func:`check_ttl`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.lepton.report import JobReport, parse_result, report_from_dict
from airflow_provider_brev.core.lepton.spec import DEFAULT_TTL_SECONDS
from airflow_provider_brev.core.lepton.states import (
    ENDED,
    FAILED,
    MISSING,
    QUEUED,
    RUNNING,
    STARTING,
    STOPPED,
    SUCCEEDED,
    UNKNOWN,
    job_phase,
)
from airflow_provider_brev.core.protocol.lines import squash_carriage_returns
from airflow_provider_brev.core.protocol.machine import Call, Done, Fail, Failed, Sleep, StepMachine
from airflow_provider_brev.core.secrets import redact
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevTimeoutError,
    LeptonJobFailedError,
    LeptonJobLostError,
    LeptonResourcesUnavailableError,
    LeptonTTLTooShortError,
    retry_policy,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The outcome of a job stopped at its deadline.
TIMED_OUT = "timeout"
#: Longest back-off between failed calls, in seconds.
MAX_BACKOFF = 30.0
#: Polls after the job ended without its result line before the step stops waiting for the log.
DRAIN_POLLS = 3
#: The longest wait between those polls (shorter when ``poll_interval`` is).
DRAIN_WAIT = 2.0
#: What :func:`ttl_floor` adds for slow API answers and a transient failure or two, in seconds.
TTL_MARGIN_SECONDS = 60.0
#: Lines of the log's end kept in the outcome (the job and its log are removed ``ttl_seconds_after_finished``
#: after it ended: the step keeps what it needs to explain a failure).
TAIL_LINES = 40
NS = 1_000_000_000


@dataclass(frozen=True)
class PollLeptonJob(Call):
    """Call: the job (``GET /jobs/<id>``) and its log entries from ``since_ns`` on; the answer is a
    :class:`LeptonJobPoll`."""

    since_ns: int


@dataclass(frozen=True)
class StopLeptonJob(Call):
    """Call: stop the job (its deadline passed, or it queued too long); the answer is ``True`` (stopped) or
    ``False`` (it had ended already)."""


@dataclass(frozen=True)
class LeptonJobPoll:
    """The answer to :class:`PollLeptonJob`.

    :param job: the job as the API returned it (``None``: there is no such job).
    :param entries: ``(timestamp_ns, line)`` log entries from the asked timestamp on, oldest first.
    :param complete: ``False`` when the log answer was capped (more entries wait: poll again at once).
    """

    job: dict[str, Any] | None
    entries: list[tuple[int, str]] = field(default_factory=list)
    complete: bool = True


@dataclass(frozen=True)
class LeptonFollowPolicy:
    """How to follow a job.

    :param poll_interval: seconds between polls.
    :param max_poll_failures: consecutive transient failures tolerated; one more gives up.
    :param deadline: absolute deadline (epoch seconds) or ``None``; past it the job is stopped.
    :param queue_timeout: seconds the job may wait in the queue (``None``: no limit).
    """

    poll_interval: float = 5.0
    max_poll_failures: int = 30
    deadline: float | None = None
    queue_timeout: float | None = None


@dataclass
class LeptonOutcome:
    """How a followed job ended (JSON-serialisable through :meth:`to_dict`).

    :param phase: a phase of :mod:`.states` (``succeeded``, ``failed``, ``stopped``, ``missing``) or
        :data:`TIMED_OUT`.
    :param state: Lepton's own last state (``Completed``, ``Failed`` ...), ``""`` when missing.
    :param last_line: the last non-empty log line.
    :param tail: the last :data:`TAIL_LINES` lines of the log.
    :param report: the agent's result (``None`` when its line never came).
    :param seconds: how long the follower saw the job ``boot`` (starting: scheduled, its container being created)
        and ``work`` (running, until it ended), by polls -- its billed time as this try saw it (queued time is not
        billed; a job first seen ended has none).
    """

    phase: str
    state: str
    last_line: str
    tail: list[str]
    report: JobReport | None
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "state": self.state,
            "last_line": self.last_line,
            "tail": list(self.tail),
            "report": self.report.to_dict() if self.report else None,
            "seconds": dict(self.seconds),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LeptonOutcome:
        return cls(
            phase=str(data["phase"]),
            state=str(data.get("state", "")),
            last_line=str(data.get("last_line", "")),
            tail=[str(line) for line in data.get("tail", [])],
            report=report_from_dict(data.get("report")),
            seconds={str(k): float(v) for k, v in (data.get("seconds") or {}).items()},
        )

    def summary(self, job: str) -> str:
        """The step's one line on how the job ended: its state, exit code, time and data."""
        code = "no exit code reported" if self.report is None else f"exit code {self.report.exit_code}"
        times = [
            f"{self.seconds[p]:.1f} s {w}" for p, w in (("boot", "starting"), ("work", "running")) if p in self.seconds
        ]
        line = f"Lepton job {job} ended ({self.state or self.phase}, {code})"
        line += f" after {', '.join(times)}" if times else ""
        report = self.report
        if report is not None and (report.downloaded or report.uploaded or report.upload_failures):
            line += f"; {report.downloaded} input file(s) downloaded, {report.uploaded} output file(s) uploaded"
            line += f", {len(report.upload_failures)} failed" if report.upload_failures else ""
        return line + "."

    @property
    def exit_code(self) -> int | None:
        return self.report.exit_code if self.report else None

    def redacted(self, fragments: Sequence[str]) -> LeptonOutcome:
        """This outcome with ``fragments`` (:func:`~airflow_provider_brev.core.secrets.redaction_fragments`) redacted
        from its log lines and its report: what may go to XCom and into an error."""
        report = self.report
        if report is not None:
            report = dataclasses.replace(report, report=[redact(line, fragments) for line in report.report])
        return dataclasses.replace(
            self,
            last_line=redact(self.last_line, fragments),
            tail=[redact(line, fragments) for line in self.tail],
            report=report,
        )

    @property
    def collected(self) -> bool:
        """The step is done with the job (the engine forgets its handle): every outcome the follower returns is of
        an ended job, or of one stopped at its deadline (``JobOutcome.collected`` says the same of a Brev job)."""
        return True


def outcome_error(outcome: LeptonOutcome, job: str) -> BrevError | None:
    """The error an outcome means, or ``None`` when the agent reported the command's exit code (the workload
    judges it)."""
    tail = "\n".join(outcome.tail[-10:])
    if outcome.phase == TIMED_OUT:
        return BrevTimeoutError(f"Lepton job {job} did not finish within its timeout and was stopped.")
    if outcome.report is not None:
        return None
    if outcome.phase == MISSING:
        return LeptonJobLostError(f"Lepton job {job} is gone (deleted, or removed after its TTL): a retry submits it.")
    if outcome.phase == STOPPED:
        return LeptonJobLostError(
            f"Lepton job {job} was stopped by someone else ({outcome.state}): a retry submits it."
        )
    if outcome.phase == FAILED:
        return LeptonJobFailedError(
            f"Lepton job {job} failed before its command reported an exit code ({outcome.state})"
            + (f"; the end of its log:\n{tail}" if tail else ".")
        )
    return LeptonJobLostError(f"Lepton job {job} ended ({outcome.state}) without its result line: a retry submits it.")


def ttl_floor(poll_interval: float, *, deferral_settle: float = 0.0) -> int:
    """The shortest ``ttl_seconds_after_finished`` (whole seconds) with which a step still reads how its job ended:
    the job may end just after a poll (``poll_interval``), its log may trail its state (:data:`DRAIN_POLLS` more
    polls, :data:`DRAIN_WAIT` apart at most), a deferred step's trigger may start only once Airflow has settled the
    deferral (``deferral_settle``: ``[brev] deferral_settle_seconds``), and :data:`TTL_MARGIN_SECONDS` on top.

    :param poll_interval: seconds between polls.
    :param deferral_settle: the deferral's settling time when the step defers, else 0.
    """
    drain = DRAIN_POLLS * min(poll_interval, DRAIN_WAIT)
    return math.ceil(poll_interval + drain + deferral_settle + TTL_MARGIN_SECONDS)


def check_ttl(ttl_seconds: int, *, poll_interval: float, deferral_settle: float = 0.0) -> None:
    """Raise :class:`~airflow_provider_brev.exceptions.LeptonTTLTooShortError` when ``ttl_seconds`` is below
    :func:`ttl_floor`, saying what to set.

    :param ttl_seconds: the job's ``ttl_seconds_after_finished``.
    :param poll_interval: seconds between polls.
    :param deferral_settle: the deferral's settling time when the step defers, else 0.
    """
    floor = ttl_floor(poll_interval, deferral_settle=deferral_settle)
    if ttl_seconds >= floor:
        return
    parts = [
        f"poll_interval {poll_interval:g} s",
        f"{DRAIN_POLLS} polls for the log's end, {min(poll_interval, DRAIN_WAIT):g} s apart",
        *([f"the deferral's settling time {deferral_settle:g} s"] if deferral_settle else []),
        f"a margin of {TTL_MARGIN_SECONDS:g} s",
    ]
    raise LeptonTTLTooShortError(
        f"ttl_seconds_after_finished={ttl_seconds} is shorter than the {floor} s the step needs to read how its "
        f"Lepton job ended before Lepton removes it ({' + '.join(parts)}): set ttl_seconds_after_finished to at "
        f"least {floor} (default {DEFAULT_TTL_SECONDS}), or lower poll_interval. Nothing was submitted."
    )


class LeptonJobFollower(StepMachine[LeptonOutcome]):
    """The state machine of following one Lepton job (see the module docstring).

    :param policy: interval, budget, deadline, queue limit.
    :param job: the job's name (log prefix, messages).
    :param since_ns: where its log is read from (a resumed follower passes its cursor).
    :param skip: lines of ``since_ns`` itself already shown.
    :param last_line: the last non-empty line shown so far.
    :param tail: the log's end so far.
    :param queued_since: when the job was first seen queued (epoch seconds), across deferrals.
    :param redact_fragments: secret fragments to redact from every line shown (the worker's; a trigger knows none -- no
        secret is in its kwargs -- and relies on the job's agent, which redacts the same fragments first).
    """

    def __init__(
        self,
        policy: LeptonFollowPolicy,
        *,
        job: str,
        since_ns: int,
        skip: int = 0,
        last_line: str = "",
        tail: list[str] | None = None,
        queued_since: float | None = None,
        redact_fragments: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.policy = policy
        self.redact_fragments = tuple(redact_fragments)
        self.job = job
        self.cursor_ns = int(since_ns)
        self.skip = int(skip)
        self.last_line = last_line
        self.tail: deque[str] = deque(tail or [], maxlen=TAIL_LINES)
        self.queued_since = queued_since
        self.report: JobReport | None = None
        self.failures = 0
        self.stop_reason: str | None = None
        self.stop_sent = False
        self.drain_polls = 0
        self.state = ""
        self.seen: dict[str, float] = {}  # when a phase was first seen (epoch seconds): starting, running, ended
        self.polled_at: float | None = None  # the last poll's answer (epoch seconds)
        self._wait: float | None = None
        self._told_queued = False

    # -- asking ------------------------------------------------------------------------------------
    def _decide(self, now: float) -> Call | Sleep | Done[LeptonOutcome] | Fail:
        if self._wait is not None:  # a back-off after a failed call (a failed stop too), or the poll interval
            wait, self._wait = self._wait, None
            if wait > 0:
                return Sleep(self._clamp(wait, now))
        if self.stop_reason and not self.stop_sent:
            return StopLeptonJob()
        return PollLeptonJob(self.cursor_ns)

    def _clamp(self, wait: float, now: float) -> float:
        limits = [wait]
        if self.policy.deadline is not None and not self.stop_reason:
            limits.append(max(self.policy.deadline - now, 0.05))
        if self.queued_since is not None and self.policy.queue_timeout is not None and not self.stop_reason:
            limits.append(max(self.queued_since + self.policy.queue_timeout - now, 0.05))
        return min(limits)

    # -- answers -----------------------------------------------------------------------------------
    def _receive(self, call: Call, outcome: object, now: float) -> None:
        if isinstance(outcome, Failed):
            self._failed(call, outcome.error)
            return
        self.failures = 0
        if isinstance(call, StopLeptonJob):
            self.stop_sent = True
            self._emit(logging.WARNING, f"Stopped Lepton job {self.job} ({self.stop_reason}).")
            if self.stop_reason == "queue":
                self._finish(Fail(self._queue_error()))
            return
        assert isinstance(outcome, LeptonJobPoll)
        self._take_log(outcome.entries)
        phase = job_phase(outcome.job)
        self.state = str(((outcome.job or {}).get("status") or {}).get("state") or "")
        self._saw(phase, now)
        if not outcome.complete:
            self._wait = 0.0
            return
        if phase in ENDED:
            self._ended(phase)
            return
        self._watch_queue(phase, now)
        if self.policy.deadline is not None and now >= self.policy.deadline and not self.stop_reason:
            self.stop_reason = "deadline"
            self._emit(logging.WARNING, f"Lepton job {self.job} reached its deadline: stopping it.")
        if self.stop_reason and not self.stop_sent:
            return  # the stop is the next call, at once
        self._wait = self.policy.poll_interval

    def _failed(self, call: Call, error: BaseException) -> None:
        if retry_policy(error) != "hook":
            if isinstance(call, StopLeptonJob) and self.stop_reason == "deadline":
                self._finish(Done(self._outcome(TIMED_OUT)))  # could not stop it: report the timeout anyway
                return
            self._finish(Fail(error))
            return
        self.failures += 1
        if self.failures > self.policy.max_poll_failures:
            self._finish(Fail(error))
            return
        self._wait = min(self.failures * self.policy.poll_interval, MAX_BACKOFF)
        self._emit(
            logging.WARNING,
            f"Following Lepton job {self.job}: transient failure {self.failures}/{self.policy.max_poll_failures} "
            f"({error}); retrying in {self._wait:.1f} s.",
        )

    def _take_log(self, entries: list[tuple[int, str]]) -> None:
        at_cursor = 0  # lines of this answer at the cursor's timestamp; the first ``skip`` were shown before
        for ts, line in entries:
            ts = int(ts)
            if ts < self.cursor_ns:
                continue
            if ts == self.cursor_ns:
                at_cursor += 1
                if at_cursor <= self.skip:
                    continue
                self.skip = at_cursor
            else:
                self.cursor_ns, self.skip, at_cursor = ts, 1, 1
            self._show(line.rstrip("\n"))

    def _show(self, line: str) -> None:
        report = parse_result(line)
        if report is not None:
            self.report = report
            return
        text = squash_carriage_returns(redact(line, self.redact_fragments))
        self.tail.append(text)
        if text.strip():
            self.last_line = text
        self._emit(logging.INFO, f"[{self.job}] {text}")

    def _saw(self, phase: str, now: float) -> None:
        """Remember when the job was first seen starting, running (a state unknown to the provider counts) and
        ended: its billed time (:attr:`LeptonOutcome.seconds`)."""
        seen = {STARTING: "starting", RUNNING: "running", UNKNOWN: "running"}.get(phase)
        seen = "ended" if phase in ENDED else seen
        if seen is not None:
            self.seen.setdefault(seen, now)
        self.polled_at = now

    def _billed(self) -> dict[str, float]:
        """``boot``: first seen starting until first seen running (or ended); ``work``: first seen running until
        first seen ended (or the last poll: a job the step could not stop at its deadline)."""
        seen, billed = self.seen, {}
        end = seen.get("ended", self.polled_at or 0.0)
        if "starting" in seen:
            billed["boot"] = round(max(seen.get("running", end) - seen["starting"], 0.0), 3)
        if "running" in seen:
            billed["work"] = round(max(end - seen["running"], 0.0), 3)
        return billed

    def _watch_queue(self, phase: str, now: float) -> None:
        if phase != QUEUED:
            self.queued_since = None
            self._told_queued = False
            return
        if self.queued_since is None:
            self.queued_since = now
        if not self._told_queued:
            self._told_queued = True
            self._emit(logging.INFO, f"Lepton job {self.job} is queued, waiting for resources in its node group.")
        limit = self.policy.queue_timeout
        if limit is not None and now - self.queued_since >= limit and not self.stop_reason:
            self.stop_reason = "queue"
            self._emit(logging.WARNING, f"Lepton job {self.job} waited {limit:.0f} s in the queue: stopping it.")

    def _ended(self, phase: str) -> None:
        # a "queue" stop never gets here: the stop is the next call, and its answer ends the follow
        if self.report is None and phase != MISSING and self.drain_polls < DRAIN_POLLS:
            self.drain_polls += 1  # the log may trail the state: read it a few more times
            self._wait = min(self.policy.poll_interval, DRAIN_WAIT)
            return
        self._finish(Done(self._outcome(TIMED_OUT if self.stop_reason == "deadline" else phase)))

    def _queue_error(self) -> LeptonResourcesUnavailableError:
        return LeptonResourcesUnavailableError(
            f"Lepton job {self.job} waited longer than queue_timeout ({self.policy.queue_timeout:.0f} s) for "
            "resources and was stopped: no free capacity in its node group for its shape. Retry later, raise its "
            "priority, or use another node group or shape."
        )

    def _outcome(self, phase: str) -> LeptonOutcome:
        return LeptonOutcome(phase, self.state, self.last_line, list(self.tail), self.report, self._billed())

    def resume_state(self) -> dict[str, Any]:
        """What a follower resumed elsewhere needs (a trigger's kwargs)."""
        return {
            "since_ns": self.cursor_ns,
            "skip": self.skip,
            "last_line": self.last_line,
            "tail": list(self.tail),
            "queued_since": self.queued_since,
        }


__all__ = [
    "NS",
    "SUCCEEDED",
    "TIMED_OUT",
    "LeptonFollowPolicy",
    "LeptonJobFollower",
    "LeptonJobPoll",
    "LeptonOutcome",
    "PollLeptonJob",
    "StopLeptonJob",
    "check_ttl",
    "outcome_error",
    "ttl_floor",
]
