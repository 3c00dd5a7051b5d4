"""Running the ``brev`` executable: line streaming with bounded memory, sync and async.

Shared by :class:`~airflow_provider_brev.hooks.brev.BrevHook` (sync, on workers) and the triggers (async,
on the triggerer). Both:

* close stdin (``/dev/null``): create/exec/delete/stop/start read instance names from a non-TTY stdin
  and would block on an inherited open pipe;
* start the CLI in its own process group, so a timeout or ``on_kill`` kills ``brev`` *and* its ``ssh``;
* split output into lines as it arrives (carriage-return progress bars squashed to their final state),
  hand each line to a callback, and keep only a bounded tail unless the caller asks for the whole stdout
  (``ls --json`` / ``search --json``), which is capped;
* given an :class:`~airflow_provider_brev.core.protocol.environment.AgentAnnouncement` (``brev exec`` of v0.6.317 -
  v0.6.319), keep the CLI's ``Agent pid N`` line out of the output and stop that ``ssh-agent`` once the call ended
  (:func:`stop_announced_agent`; why, in :mod:`airflow_provider_brev.core.protocol.environment`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import subprocess
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.environment import AgentAnnouncement, is_announced_agent
from airflow_provider_brev.core.protocol.lines import READ_CHUNK, Collector, LineCallback, LineSplitter, ProcessResult
from airflow_provider_brev.core.protocol.spawn import start_error

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_provider_brev.exceptions import BrevError

__all__ = [
    "LineCallback",
    "ProcessResult",
    "arun_process",
    "loop_process_slots",
    "run_process",
    "stop_announced_agent",
]

KILL_GRACE_SECONDS = 3.0


def _kill_group(proc_pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc_pid, sig)


async def _reaped(proc: asyncio.subprocess.Process) -> int:
    """The exit code of a process whose group was signalled, waiting at most :data:`KILL_GRACE_SECONDS`.

    On Python 3.11 ``Process.wait()`` returns only once the process has exited *and* its pipes are closed; a
    descendant that left the process group (its own session) can hold them open for as long as it lives, and a
    cancelled trigger would wait for it. The sync runner waits for the process alone; so does this.
    """
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_SECONDS)
    transport = getattr(proc, "_transport", None)  # asyncio has no public close: stop reading the held pipes
    if transport is not None:
        transport.close()
    return proc.returncode if proc.returncode is not None else -signal.SIGKILL


def _started_at(pid: int) -> float:
    """When process ``pid`` started (wall clock): boot time plus its start in clock ticks (``/proc``)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22, starttime
    boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    return float(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def stop_announced_agent(announcement: AgentAnnouncement | None, call_started: float) -> bool:
    """Stop (SIGTERM) the ``ssh-agent`` a ``brev exec`` announced, if it is one of this user's started during the
    call (:func:`~airflow_provider_brev.core.protocol.environment.is_announced_agent`); returns whether it was.
    Without ``/proc`` (not Linux) nothing is stopped: what the PID is cannot be told.

    :param announcement: the call's announcement watch (``None``: the call announces none).
    :param call_started: when the call started (wall clock).
    """
    if announcement is None or announcement.pid is None:
        return False
    pid = announcement.pid
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        uid_line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line[:4] == "Uid:")
        owner, started = int(uid_line.split()[1]), _started_at(pid)
    except (OSError, ValueError, IndexError, StopIteration):
        return False  # already gone, or no /proc
    if not is_announced_agent(name, owner, started, user=os.getuid(), call_started=call_started):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
        return True
    return False


def start_failed(argv: Sequence[str], err: OSError) -> BrevError:
    """The typed error of a process start that failed (the CLI missing, or this machine out of descriptors,
    processes or memory: :func:`~airflow_provider_brev.core.protocol.spawn.start_error`), shared by both drivers."""
    return start_error(argv[0], err.errno, err.strerror or str(err))


def run_process(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None,
    timeout: float | None,
    capture_stdout: bool = False,
    on_stdout: LineCallback | None = None,
    on_stderr: LineCallback | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    announcement: AgentAnnouncement | None = None,
) -> ProcessResult:
    """Run ``argv`` (stdin closed, own process group), streaming lines to the callbacks (``announcement``: the
    ``Agent pid N`` line of a v0.6.317 - v0.6.319 exec is kept out and that agent stopped at the end)."""
    started_at = time.time()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as spawn_error:
        raise start_failed(argv, spawn_error) from None
    if on_start is not None:
        on_start(proc)
    out = Collector(capture_stdout, on_stdout, announcement.keep if announcement else None)
    err = Collector(False, on_stderr)
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
            stop_announced_agent(announcement, started_at)
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
    stop_announced_agent(announcement, started_at)
    return ProcessResult(
        exit_code=exit_code,
        stdout_lines=list(out.lines),
        stderr_lines=list(err.lines),
        timed_out=timed_out,
        duration=time.monotonic() - started,
        started_at=started_at,
    )


#: Each event loop's process slots (:func:`loop_process_slots`); gone with their loop.
_LOOP_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def loop_process_slots(cap: int) -> asyncio.Semaphore | None:
    """The running event loop's slots for concurrent processes, shared by every caller of :func:`arun_process` in it
    (the triggers of one triggerer): made with ``cap`` slots by the first call in the loop; ``None`` when ``cap`` is 0
    (no cap).

    :param cap: the most processes alive at once in this loop (``[brev] triggerer_max_processes``).
    """
    if cap <= 0:
        return None
    loop = asyncio.get_running_loop()
    slots = _LOOP_SLOTS.get(loop)
    if slots is None:
        slots = _LOOP_SLOTS[loop] = asyncio.Semaphore(cap)
    return slots


async def arun_process(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None,
    timeout: float | None,
    capture_stdout: bool = False,
    on_stdout: LineCallback | None = None,
    on_stderr: LineCallback | None = None,
    announcement: AgentAnnouncement | None = None,
    slots: asyncio.Semaphore | None = None,
) -> ProcessResult:
    """Async twin of :func:`run_process` (``asyncio.create_subprocess_exec``), for triggers.

    :param slots: the loop's process slots (:func:`loop_process_slots`): the process starts once one is free and
        holds it until it has been reaped (``timeout`` counts from the start, not from the wait for a slot).
    """
    kwargs = {"env": env, "timeout": timeout, "capture_stdout": capture_stdout, "on_stdout": on_stdout}
    if slots is None:
        return await _arun_process(argv, on_stderr=on_stderr, announcement=announcement, **kwargs)  # type: ignore[arg-type]
    async with slots:
        return await _arun_process(argv, on_stderr=on_stderr, announcement=announcement, **kwargs)  # type: ignore[arg-type]


async def _arun_process(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None,
    timeout: float | None,
    capture_stdout: bool,
    on_stdout: LineCallback | None,
    on_stderr: LineCallback | None,
    announcement: AgentAnnouncement | None,
) -> ProcessResult:
    started_at = time.time()
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as spawn_error:
        raise start_failed(argv, spawn_error) from None
    out = Collector(capture_stdout, on_stdout, announcement.keep if announcement else None)
    err = Collector(False, on_stderr)

    async def pump(reader: asyncio.StreamReader | None, splitter: LineSplitter) -> None:
        assert reader is not None
        while True:
            chunk = await reader.read(READ_CHUNK)
            if not chunk:
                splitter.close()
                return
            splitter.feed(chunk)

    splitters = (LineSplitter(out), LineSplitter(err))
    pumps = asyncio.gather(pump(proc.stdout, splitters[0]), pump(proc.stderr, splitters[1]))
    timed_out = False
    try:
        await asyncio.wait_for(pumps, timeout=timeout)
    except TimeoutError:
        timed_out = True
    except BaseException:
        if pumps.done() and not pumps.cancelled():
            pumps.exception()  # retrieved: a cancelled pump is not reported as an error nobody saw
        _kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await _reaped(proc)
        stop_announced_agent(announcement, started_at)
        raise
    if timed_out:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_SECONDS)
        except TimeoutError:
            _kill_group(proc.pid, signal.SIGKILL)
        for splitter in splitters:  # like the sync runner: the last partial line is not lost
            splitter.close()
        exit_code = await _reaped(proc)
    else:
        exit_code = await proc.wait()  # both pipes reached EOF
    stop_announced_agent(announcement, started_at)
    return ProcessResult(
        exit_code=exit_code,
        stdout_lines=list(out.lines),
        stderr_lines=list(err.lines),
        timed_out=timed_out,
        duration=time.monotonic() - started,
        started_at=started_at,
    )
