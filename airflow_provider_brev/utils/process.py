"""Running the ``brev`` executable: line streaming with bounded memory, sync and async.

Shared by :class:`~airflow_provider_brev.hooks.brev.BrevHook` (sync, on workers) and the triggers (async,
on the triggerer). Both:

* close stdin (``/dev/null``): create/exec/delete/stop/start read instance names from a non-TTY stdin
  and would block on an inherited open pipe;
* start the CLI in its own process group, so a timeout or ``on_kill`` kills ``brev`` *and* its ``ssh``;
* split output into lines as it arrives (carriage-return progress bars squashed to their final state),
  hand each line to a callback, and keep only a bounded tail unless the caller asks for the whole stdout
  (``ls --json`` / ``search --json``), which is capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

LineCallback = Callable[[str], None]

READ_CHUNK = 64 * 1024
#: A "line" longer than this is flushed in pieces (a remote process may print without newlines).
MAX_LINE = 256 * 1024
#: Cap on captured stdout for JSON-producing commands.
MAX_CAPTURE = 64 * 1024 * 1024
TAIL_LINES = 200
KILL_GRACE_SECONDS = 3.0


def squash_carriage_returns(line: str) -> str:
    """Keep what a terminal would show for a progress-bar line: the text after the last ``\\r``."""
    if "\r" not in line:
        return line
    parts = [part for part in line.split("\r") if part]
    return parts[-1] if parts else ""


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
            raw = bytes(self._buffer[:MAX_LINE])
            del self._buffer[:MAX_LINE]
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

    @property
    def stdout(self) -> str:
        return "\n".join(self.stdout_lines)

    @property
    def stderr(self) -> str:
        return "\n".join(self.stderr_lines)


class _Collector:
    def __init__(self, capture: bool, on_line: LineCallback | None) -> None:
        self.capture = capture
        self.lines: deque[str] | list[str] = [] if capture else deque(maxlen=TAIL_LINES)
        self.size = 0
        self.on_line = on_line

    def __call__(self, line: str) -> None:
        if self.capture:
            self.size += len(line) + 1
            if self.size > MAX_CAPTURE:
                raise OverflowError("brev printed more output than expected")
        self.lines.append(line)
        if self.on_line is not None:
            self.on_line(line)


def _kill_group(proc_pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc_pid, sig)


def run_process(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None,
    timeout: float | None,
    capture_stdout: bool = False,
    on_stdout: LineCallback | None = None,
    on_stderr: LineCallback | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> ProcessResult:
    """Run ``argv`` (stdin closed, own process group), streaming lines to the callbacks."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    if on_start is not None:
        on_start(proc)
    out = _Collector(capture_stdout, on_stdout)
    err = _Collector(False, on_stderr)
    assert proc.stdout is not None and proc.stderr is not None
    splitters: dict[int, LineSplitter] = {
        proc.stdout.fileno(): LineSplitter(out),
        proc.stderr.fileno(): LineSplitter(err),
    }
    deadline = None if timeout is None else started + timeout
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in splitters:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(timeout=wait if wait is None else min(wait, 1.0)):
                    try:
                        chunk = os.read(key.fd, READ_CHUNK)
                    except BlockingIOError:
                        continue
                    if chunk:
                        splitters[key.fd].feed(chunk)
                    else:
                        selector.unregister(key.fd)
                        splitters[key.fd].close()
        except BaseException:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if timed_out:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
        for splitter in splitters.values():
            splitter.close()
    exit_code = proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return ProcessResult(
        exit_code=exit_code,
        stdout_lines=list(out.lines),
        stderr_lines=list(err.lines),
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )


async def arun_process(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None,
    timeout: float | None,
    capture_stdout: bool = False,
    on_stdout: LineCallback | None = None,
    on_stderr: LineCallback | None = None,
) -> ProcessResult:
    """Async twin of :func:`run_process` (``asyncio.create_subprocess_exec``), for triggers."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    out = _Collector(capture_stdout, on_stdout)
    err = _Collector(False, on_stderr)

    async def pump(reader: asyncio.StreamReader | None, splitter: LineSplitter) -> None:
        assert reader is not None
        while True:
            chunk = await reader.read(READ_CHUNK)
            if not chunk:
                splitter.close()
                return
            splitter.feed(chunk)

    pumps = asyncio.gather(pump(proc.stdout, LineSplitter(out)), pump(proc.stderr, LineSplitter(err)))
    timed_out = False
    try:
        await asyncio.wait_for(pumps, timeout=timeout)
    except TimeoutError:
        timed_out = True
    except BaseException:
        _kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await proc.wait()
        raise
    if timed_out:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_SECONDS)
        except TimeoutError:
            _kill_group(proc.pid, signal.SIGKILL)
    exit_code = await proc.wait()
    return ProcessResult(
        exit_code=exit_code,
        stdout_lines=list(out.lines),
        stderr_lines=list(err.lines),
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )
