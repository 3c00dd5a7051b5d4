"""Following a detached remote job's log and state: one pure state machine for the worker and the trigger.

The operator (sync) and :class:`~airflow_provider_brev.triggers.brev.BrevRemoteJobTrigger` (async) only differ
in how they call ``poll_job``; what a poll means -- which lines are new, whether the whole log has been
drained, what the outcome is -- is decided here, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_brev.cli.remote_job import FINISHED, LogLineAssembler, PollResult

#: Outcome states beyond the job's own (``finished``/``lost``/``missing``).
TIMED_OUT = "timeout"


@dataclass
class JobOutcome:
    """How a followed job ended (JSON-serialisable through :meth:`to_dict`)."""

    state: str
    exit_code: int | None
    last_line: str
    offset: int

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "exit_code": self.exit_code, "last_line": self.last_line, "offset": self.offset}


class JobFollower:
    """Turn successive :class:`PollResult` s into new log lines and, at the end, a :class:`JobOutcome`.

    :param offset: byte offset already shown (resume point after a deferral or a re-attach).
    :param last_line: the last non-empty line shown so far.
    """

    def __init__(self, offset: int = 0, last_line: str = "", progress_regex: str | None = None) -> None:
        self.offset = offset
        self.last_line = last_line
        self.timed_out = False
        self._progress_re = re.compile(progress_regex) if progress_regex else None
        self._last_percent: int | None = None
        self._poll: PollResult | None = None
        self._assembler = LogLineAssembler()

    def apply(self, poll: PollResult) -> list[str]:
        """Record a poll; return the complete lines it adds (the final partial line once the log is drained)."""
        self._poll = poll
        lines = self._assembler.feed(poll.chunk)
        self.offset = poll.next_offset
        if poll.complete:
            lines += self._assembler.flush()
        for line in reversed(lines):
            if line.strip():
                self.last_line = line
                break
        return lines

    def progress(self, line: str) -> str | None:
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

    @property
    def complete(self) -> bool:
        """The job has ended and every byte of its log has been read."""
        return self._poll is not None and self._poll.complete

    @property
    def behind(self) -> bool:
        """More log is already waiting: poll again without sleeping."""
        return self._poll is not None and self.offset < self._poll.log_size

    @property
    def running(self) -> bool:
        return self._poll is not None and not self._poll.done

    def outcome(self) -> JobOutcome:
        poll = self._poll
        if poll is None:
            raise RuntimeError("no poll yet")
        state = TIMED_OUT if self.timed_out else poll.state
        exit_code = poll.exit_code if poll.state == FINISHED else None
        return JobOutcome(state=state, exit_code=exit_code, last_line=self.last_line, offset=self.offset)
