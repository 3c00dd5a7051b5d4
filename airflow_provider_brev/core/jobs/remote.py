"""Detached jobs on a Brev instance: what their scripts report, parsed; and the one import point for them.

A long job (hours of GPU training) must not depend on the Airflow worker or on one ``ssh`` session. Each
``build_*`` function returns one command string for ``brev exec <instance> "<command>"`` (remote side: bash on
Ubuntu); each ``parse_*`` function reads what it printed; nothing here runs a process.

Remote layout, one directory per job (``<base_dir>/<job_id>``, ``base_dir`` relative to ``$HOME`` unless
absolute; the directory is private, mode 700)::

    job.sh      the job script (user command quoted inside; plain env values may appear, secrets never)
    log         combined stdout + stderr of the job
    pid         pid of the job's process-group (and session) leader, written by the launcher
    launched    "<boot_id> <epoch>" written right after the launch; a poll after a reboot reports ``lost``
    exit_code   the exit code, written atomically (tmp file + ``mv``) when the job ends
    killed      written by the kill command

Design points (compare the SSH provider's ``SSHRemoteJobOperator``):

* ``mkdir <job dir>`` is the atomic launch guard; a second launch of the same job id starts nothing and
  reports the existing job (:func:`generate_job_id` is deterministic per try, so a retried worker reattaches).
* Every command exits 0: the released CLI re-runs any command whose ssh exits non-zero. Results travel in
  ``BREV_JOB_*`` marker lines on stdout instead.
* A poll reports the state *before* reading the log, so ``finished`` guarantees that the log is complete up to
  the reported size; callers drain by byte offset until :attr:`PollResult.complete` (no dropped tail).
* Secret values go in a separate file (:func:`build_secret_env_file`) that the job sources and deletes; only
  its path appears in a command string.
* Every value reaches a script through the quoted header of
  :func:`~airflow_provider_brev.core.protocol.remote_scripts.render_script` (the scripts: ``remote/job_*.sh``);
  results are marker lines of the one grammar of :mod:`airflow_provider_brev.core.protocol.markers`.

The command string is one ``ssh`` argument on the remote side; keep it under :data:`MAX_COMMAND_LENGTH`.

Modules: :mod:`~airflow_provider_brev.core.jobs.handle` (ids, handle, states, markers),
:mod:`~airflow_provider_brev.core.jobs.scripts` (the shell scripts) and this one (:class:`PollResult`,
:class:`LaunchResult`, the parsers, :class:`LogLineAssembler`); every public name of the three is importable
from here.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.core.jobs.handle import (
    CLEANED_MARKER,
    DEFAULT_BASE_DIR,
    DEFAULT_MAX_BYTES,
    EXISTS_MARKER,
    FINISHED,
    KILLED_EXIT_CODE,
    KILLED_MARKER,
    LAUNCH_FAILED_MARKER,
    LAUNCHED_MARKER,
    LOG_BEGIN_MARKER,
    LOG_END_MARKER,
    LOST,
    MAX_COMMAND_LENGTH,
    MAX_JOB_ID_LENGTH,
    MISSING,
    RUNNING,
    SETUP_FAILED_EXIT_CODE,
    STATES,
    STATUS_MARKER,
    TERMINATED_EXIT_CODE,
    RemoteJob,
    generate_job_id,
    job_id_prefix,
)
from airflow_provider_brev.core.jobs.scripts import (
    build_cleanup_command,
    build_kill_command,
    build_launch_command,
    build_poll_command,
    build_secret_env_file,
)
from airflow_provider_brev.core.protocol.lines import LineSplitter
from airflow_provider_brev.core.protocol.markers import (
    JOB_CLEANED,
    JOB_EXISTS,
    JOB_KILLED,
    JOB_LAUNCH_FAILED,
    JOB_LAUNCHED,
    JOB_LOG_BEGIN,
    JOB_LOG_END,
    JOB_STATUS,
    Marker,
    marker_word,
    parse_marker,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "CLEANED_MARKER",
    "DEFAULT_BASE_DIR",
    "DEFAULT_MAX_BYTES",
    "EXISTS_MARKER",
    "FINISHED",
    "KILLED_EXIT_CODE",
    "KILLED_MARKER",
    "LAUNCHED_MARKER",
    "LAUNCH_FAILED_MARKER",
    "LOG_BEGIN_MARKER",
    "LOG_END_MARKER",
    "LOST",
    "MAX_COMMAND_LENGTH",
    "MAX_JOB_ID_LENGTH",
    "MISSING",
    "RUNNING",
    "SETUP_FAILED_EXIT_CODE",
    "STATES",
    "STATUS_MARKER",
    "TERMINATED_EXIT_CODE",
    "LaunchResult",
    "LogLineAssembler",
    "PollResult",
    "RemoteJob",
    "build_cleanup_command",
    "build_kill_command",
    "build_launch_command",
    "build_poll_command",
    "build_secret_env_file",
    "generate_job_id",
    "job_id_prefix",
    "parse_cleanup_output",
    "parse_kill_output",
    "parse_launch_output",
    "parse_poll_output",
]


# ------------------------------------------------------------------------------------------------ results


@dataclass
class PollResult:
    """One poll: the job's state and the log chunk starting at ``offset``.

    ``finished`` means the log is complete up to ``log_size``: keep polling from :attr:`next_offset` until
    :attr:`complete` to get every byte.
    """

    state: str
    exit_code: int | None
    log_size: int
    pid: int | None
    chunk: bytes = b""
    offset: int = 0

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.chunk)

    @property
    def done(self) -> bool:
        """The job will not change any more (``finished``, ``lost`` or ``missing``)."""
        return self.state in (FINISHED, LOST, MISSING)

    @property
    def complete(self) -> bool:
        """Done and the whole log has been read."""
        return self.done and self.next_offset >= self.log_size


@dataclass
class LaunchResult:
    """What :func:`build_launch_command` reported.

    ``launched``: this call started the job (``pid`` is its process-group id). ``existing``: the job id already
    existed; its status (no log bytes). Both may be set when the CLI re-ran the launcher after an ssh drop.
    ``error``: nothing was started (``missing-setsid``, ``base-dir``, ``job-dir``, ``write-script``).
    """

    launched: bool
    pid: int | None = None
    existing: PollResult | None = None
    error: str | None = None


def _marker(line: str, kind: str, job_id: str) -> Marker | None:
    """The ``kind`` marker of ``job_id`` on ``line`` (:func:`~airflow_provider_brev.core.protocol.markers.parse_marker`)."""
    marker = parse_marker(line)
    if marker is None or marker.kind != kind or marker["job_id"] != job_id:
        return None
    return marker


_COUNT = re.compile(r"^\d+$")
_OPTIONAL_COUNT = re.compile(r"^(-|\d+)$")


def _status(line: str, job_id: str) -> tuple[str, int | None, int, int | None] | None:
    marker = _marker(line, JOB_STATUS, job_id)
    if marker is None:
        return None
    state, rc, size, pid = marker["state"], marker["exit_code"], marker["log_size"], marker["pid"]
    if state not in STATES or not _OPTIONAL_COUNT.match(rc) or not _COUNT.match(size) or not _OPTIONAL_COUNT.match(pid):
        return None
    return state, _optional_int(rc), int(size), _optional_int(pid)


def _optional_int(value: str) -> int | None:
    return None if value == "-" else int(value)


def parse_poll_output(stdout_lines: Sequence[str], job_id: str, offset: int) -> PollResult:
    """Parse the status block printed by :func:`build_poll_command` (or after ``BREV_JOB_EXISTS``).

    Lines around the block (auth noise before, the CLI's instance-name line after) are ignored. When the
    output holds several blocks (the CLI re-ran the command), the last complete one wins.

    :param offset: the offset passed to :func:`build_poll_command`.
    :raises ValueError: no complete status block for ``job_id``.
    """
    lines = list(stdout_lines)
    found_header = False
    for index in range(len(lines) - 1, -1, -1):
        status = _status(lines[index], job_id)
        if status is None:
            continue
        found_header = True
        chunk = _log_block(lines, index + 1)
        if chunk is None:
            continue
        state, rc, size, pid = status
        return PollResult(state=state, exit_code=rc, log_size=size, pid=pid, chunk=chunk, offset=offset)
    if found_header:
        raise ValueError(f"Truncated output from the remote job poll for {job_id!r}: the log block is incomplete.")
    raise ValueError(
        f"No '{STATUS_MARKER} {job_id}' line in the remote output; the poll command did not run "
        f"(first lines: {_outside_logs(lines)[:3]!r})."
    )


def _outside_logs(lines: list[str], limit: int = 200) -> list[str]:
    """The lines of a poll's output that are not a job's log data (an answer for several jobs may hold another
    job's log, which no error message may carry) nor the empty lines it prints while it waits, each cut to
    ``limit`` characters."""
    shown: list[str] = []
    in_log = False
    for line in lines:
        if _is(line, JOB_LOG_BEGIN) or _is(line, JOB_LOG_END):
            in_log = _is(line, JOB_LOG_BEGIN)
        elif in_log or not line:
            continue
        shown.append(line[:limit])
    return shown


def _is(line: str, kind: str) -> bool:
    marker = parse_marker(line)
    return marker is not None and marker.kind == kind


def _log_block(lines: list[str], start: int) -> bytes | None:
    begin = next((i for i in range(start, len(lines)) if _is(lines[i], JOB_LOG_BEGIN)), None)
    if begin is None:
        return None
    end = next((i for i in range(begin + 1, len(lines)) if _is(lines[i], JOB_LOG_END)), None)
    if end is None:
        return None
    encoded = "".join(line.strip() for line in lines[begin + 1 : end])
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"Corrupt log chunk in the remote job poll output: {err}") from err


def parse_launch_output(stdout_lines: Sequence[str], job_id: str) -> LaunchResult:
    """Parse what :func:`build_launch_command` printed.

    :raises ValueError: none of its markers for ``job_id`` is present.
    """
    lines = list(stdout_lines)
    result = LaunchResult(launched=False)
    for index, line in enumerate(lines):
        if (marker := _marker(line, JOB_LAUNCHED, job_id)) and _COUNT.match(marker["pid"]):
            result.launched, result.pid = True, int(marker["pid"])
        elif marker := _marker(line, JOB_LAUNCH_FAILED, job_id):
            result.error = marker["reason"]
        elif _marker(line, JOB_EXISTS, job_id):
            result.existing = parse_poll_output(lines[index + 1 :], job_id, 0)
    if result.launched or result.existing is not None:
        result.error = None
        if result.pid is None and result.existing is not None:
            result.pid = result.existing.pid
        return result
    if result.error is not None:
        return result
    raise ValueError(
        f"No '{LAUNCHED_MARKER}/{EXISTS_MARKER} {job_id}' line in the remote output; the launch command did not "
        f"run (first lines: {lines[:3]!r})."
    )


def _parse_result_marker(stdout_lines: Iterable[str], kind: str, job_id: str) -> str:
    found: str | None = None
    for line in stdout_lines:
        if marker := _marker(line, kind, job_id):
            found = marker["result"]
    if found is None:
        raise ValueError(f"No '{marker_word(kind)} {job_id}' line in the remote output.")
    return found


def parse_kill_output(stdout_lines: Iterable[str], job_id: str) -> str:
    """The result word of :func:`build_kill_command`; :raises ValueError: when absent."""
    return _parse_result_marker(stdout_lines, JOB_KILLED, job_id)


def parse_cleanup_output(stdout_lines: Iterable[str], job_id: str) -> str:
    """The result word of :func:`build_cleanup_command`; :raises ValueError: when absent."""
    return _parse_result_marker(stdout_lines, JOB_CLEANED, job_id)


# -------------------------------------------------------------------------------------------------- logs


class LogLineAssembler:
    """Turn log chunks (bytes, split anywhere) into text lines.

    UTF-8 with replacement; carriage-return progress bars keep only the text after the last ``\\r``; very long
    lines come out in pieces (:data:`~airflow_provider_brev.core.protocol.lines.MAX_LINE`).
    """

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._splitter = LineSplitter(self._lines.append)

    def feed(self, data: bytes) -> list[str]:
        """Add bytes; return the lines they completed."""
        self._splitter.feed(data)
        return self._take()

    def flush(self) -> list[str]:
        """Return the final partial line (if any)."""
        self._splitter.close()
        return self._take()

    def _take(self) -> list[str]:
        lines = self._lines[:]
        self._lines.clear()
        return lines
