"""Bytes to lines, pure: the incremental splitter and bounded collector shared by the process drivers.

No I/O: :mod:`airflow_provider_brev.hooks.process` feeds it what it reads from a ``brev`` process, and the
remote-job protocol (:mod:`airflow_provider_brev.core.jobs.remote`) feeds it decoded log bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

LineCallback = Callable[[str], None]

READ_CHUNK = 64 * 1024
#: A "line" longer than this is flushed in pieces (a remote process may print without newlines).
MAX_LINE = 256 * 1024
#: Cap on captured stdout for JSON-producing commands.
MAX_CAPTURE = 64 * 1024 * 1024
TAIL_LINES = 200


def squash_carriage_returns(line: str) -> str:
    """Keep what a terminal would show for a progress-bar line: the text after the last ``\\r``."""
    return line.rstrip("\r").rpartition("\r")[2]


def utf8_boundary(data: bytes | bytearray, limit: int) -> int:
    """The largest cut ``<= limit`` that does not split a UTF-8 character (``limit`` itself for other bytes).

    A piece of an over-long line then decodes without U+FFFD at the cut.
    """
    for cut in range(limit, max(limit - 4, 0), -1):  # a character is at most 4 bytes; a piece is never empty
        if (data[cut] & 0xC0) != 0x80:  # not a continuation byte: a character starts here
            return cut
    return limit


class LineSplitter:
    """Incremental bytes → lines splitter with a bound on line length."""

    def __init__(self, on_line: LineCallback) -> None:
        self._buffer = bytearray()
        self._on_line = on_line

    def feed(self, chunk: bytes) -> None:
        self._buffer.extend(chunk)
        while True:
            index = self._buffer.find(b"\n")
            if index < 0:
                break
            raw = bytes(self._buffer[:index])
            del self._buffer[: index + 1]
            self._emit(raw)
        while len(self._buffer) > MAX_LINE:
            cut = utf8_boundary(self._buffer, MAX_LINE)
            raw = bytes(self._buffer[:cut])
            del self._buffer[:cut]
            self._emit(raw)

    def close(self) -> None:
        if self._buffer:
            raw = bytes(self._buffer)
            self._buffer.clear()
            self._emit(raw)

    def _emit(self, raw: bytes) -> None:
        self._on_line(squash_carriage_returns(raw.decode("utf-8", errors="replace")))


@dataclass
class ProcessResult:
    """What a finished ``brev`` call produced.

    ``stdout`` is complete when the call was made with ``capture_stdout=True`` and otherwise holds the last
    :data:`TAIL_LINES` lines; ``stderr`` always holds the last lines.
    """

    exit_code: int
    stdout_lines: list[str] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)
    timed_out: bool = False
    duration: float = 0.0
    #: Wall-clock time (``time.time()``) the process was started.
    started_at: float = 0.0

    @property
    def stdout(self) -> str:
        return "\n".join(self.stdout_lines)

    @property
    def stderr(self) -> str:
        return "\n".join(self.stderr_lines)


class Collector:
    """Where one stream's lines go: all of them (``capture``, capped) or a tail, and the caller's callback.

    :param capture: keep every line (up to :data:`MAX_CAPTURE` characters) instead of the last :data:`TAIL_LINES`.
    :param on_line: called with each line kept.
    :param keep: decides which lines belong in the output at all (``None``: every line).
    """

    def __init__(self, capture: bool, on_line: LineCallback | None, keep: Callable[[str], bool] | None = None) -> None:
        self.capture = capture
        self.lines: deque[str] | list[str] = [] if capture else deque(maxlen=TAIL_LINES)
        self.size = 0
        self.on_line = on_line
        self.keep = keep

    def __call__(self, line: str) -> None:
        if self.keep is not None and not self.keep(line):
            return
        if self.capture:
            self.size += len(line) + 1
            if self.size > MAX_CAPTURE:
                raise OverflowError("brev printed more output than expected")
        self.lines.append(line)
        if self.on_line is not None:
            self.on_line(line)
