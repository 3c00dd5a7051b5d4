"""Pure shell-building for *detached* jobs on a Brev instance, with a durable handle.

A long job (hours of GPU training) must not depend on the Airflow worker or on one ``ssh`` session. Each
function here returns one command string for ``brev exec <instance> "<command>"`` (remote side: bash on
Ubuntu); nothing here runs a process.

Remote layout, one directory per job (``<base_dir>/<job_id>``, ``base_dir`` relative to ``$HOME`` unless
absolute; the directory is private, mode 700)::

    job.sh      the job script (user command quoted inside; plain env values may appear, secrets never)
    log         combined stdout + stderr of the job
    pid         pid of the job's process-group (and session) leader, written by the launcher
    launched    "<boot_id> <epoch>" written right after the launch; a poll after a reboot reports ``lost``
    exit_code   the exit code, written atomically (tmp file + ``mv``) when the job ends
    killed      written by the kill command

Design points (compare ``SSHRemoteJobOperator``, reference/airflow-providers.md §4.5):

* ``mkdir <job dir>`` is the atomic launch guard; a second launch of the same job id starts nothing and
  reports the existing job (:func:`generate_job_id` is deterministic per try, so a retried worker reattaches).
* Every command exits 0: the released CLI re-runs any command whose ssh exits non-zero (reference/brev-cli.md
  §2.7). Results travel in ``BREV_JOB_*`` marker lines on stdout instead.
* A poll reports the state *before* reading the log, so ``finished`` guarantees that the log is complete up to
  the reported size; callers drain by byte offset until :attr:`PollResult.complete` (no dropped tail).
* Secret values go in a separate file (:func:`build_secret_env_file`) that the job sources and deletes; only
  its path appears in a command string.
* Every interpolated value is ``shlex.quote``-d.

The command string is one ``ssh`` argument on the remote side; keep it under :data:`MAX_COMMAND_LENGTH`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.lines import LineSplitter
from airflow_provider_brev.cli.shell import validate_env

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

DEFAULT_BASE_DIR = ".airflow-brev/jobs"
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
#: Linux limits one execve argument to 128 KiB; the whole command travels as one argument of ``bash -c``.
MAX_COMMAND_LENGTH = 100 * 1024
MAX_JOB_ID_LENGTH = 80
#: Exit code of a job whose set-up failed (secret file not loadable, ``cwd`` missing); the command did not run.
SETUP_FAILED_EXIT_CODE = 125
#: Exit code written by the kill command: the job ended on SIGTERM / needed SIGKILL.
TERMINATED_EXIT_CODE = 143
KILLED_EXIT_CODE = 137

RUNNING = "running"
FINISHED = "finished"
LOST = "lost"
MISSING = "missing"
STATES = (RUNNING, FINISHED, LOST, MISSING)

STATUS_MARKER = "BREV_JOB_STATUS"
LOG_BEGIN_MARKER = "BREV_JOB_LOG_BEGIN"
LOG_END_MARKER = "BREV_JOB_LOG_END"
LAUNCHED_MARKER = "BREV_JOB_LAUNCHED"
EXISTS_MARKER = "BREV_JOB_EXISTS"
LAUNCH_FAILED_MARKER = "BREV_JOB_LAUNCH_FAILED"
KILLED_MARKER = "BREV_JOB_KILLED"
CLEANED_MARKER = "BREV_JOB_CLEANED"

_JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_SLUG_MAX = 56
_HASH_LENGTH = 10
_FORBIDDEN_PATH_CHARS = ("'", '"', "\n", "\r", "\x00")


# --------------------------------------------------------------------------------------------------- job ids


def _slug(value: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


def job_id_prefix(*, dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The try-independent part of :func:`generate_job_id`: ``<dag-task slug>-<hash>``.

    Jobs of every try of one task instance start with ``job_id_prefix(...) + "-t"``.
    """
    slug = _slug(f"{dag_id}-{task_id}")[:_SLUG_MAX].strip("-") or "job"
    key = json.dumps([dag_id, run_id, task_id, int(map_index)], separators=(",", ":"))
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:_HASH_LENGTH]
    return f"{slug}-{digest}"


def generate_job_id(*, dag_id: str, task_id: str, run_id: str, try_number: int, map_index: int = -1) -> str:
    """A deterministic job id for one try of one task instance: ``<dag-task slug>-<hash>-t<try>``.

    The same try always gets the same id (a crashed worker's retry of that try finds its job); a new try gets a
    new id. Only ``[a-z0-9-]``, at most :data:`MAX_JOB_ID_LENGTH` characters.
    """
    if isinstance(try_number, bool) or not isinstance(try_number, int) or not 0 <= try_number < 10**10:
        raise ValueError(f"try_number must be a non-negative integer, got {try_number!r}")
    job_id = f"{job_id_prefix(dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)}-t{try_number}"
    assert len(job_id) <= MAX_JOB_ID_LENGTH
    return job_id


# ---------------------------------------------------------------------------------------------------- paths


def _check_path(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if any(char in value for char in _FORBIDDEN_PATH_CHARS):
        raise ValueError(f"{what} {value!r} must not contain quotes, newlines or NUL characters")
    return value


def _shell_path(path: str, *, relative_to_home: bool) -> str:
    """A shell word for ``path``: ``~``/``~/x`` and (optionally) relative paths resolve against ``$HOME``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:].lstrip("/")
        return f'"$HOME"/{shlex.quote(rest)}' if rest else '"$HOME"'
    if path.startswith("/") or not relative_to_home:
        return shlex.quote(path)
    return f'"$HOME"/{shlex.quote(path)}'


@dataclass(frozen=True)
class RemoteJob:
    """The durable handle of one detached job (stored in XCom via :meth:`to_dict`).

    :param job_id: letters, digits, ``_ . -`` (see :func:`generate_job_id`).
    :param base_dir: directory holding the job directories; relative to the remote ``$HOME`` unless absolute
        (``~/`` is accepted). No quotes, newlines or ``..``.
    """

    job_id: str
    base_dir: str = DEFAULT_BASE_DIR

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, str) or not _JOB_ID_RE.match(self.job_id):
            raise ValueError(f"Invalid job id {self.job_id!r}: use letters, digits, '_', '.', '-' (max 128).")
        base = _check_path(self.base_dir, "base_dir")
        if ".." in base:
            raise ValueError(f"base_dir {base!r} must not contain '..'")
        if base.startswith("~/"):
            base = base[2:]
        base = base.rstrip("/") if base.strip("/") else ""
        if not base or base in (".", "~"):
            raise ValueError(f"base_dir {self.base_dir!r} must name a directory below $HOME or / (not the root)")
        object.__setattr__(self, "base_dir", base)

    # Paths: relative to the remote $HOME unless ``base_dir`` is absolute.
    @property
    def job_dir(self) -> str:
        return f"{self.base_dir}/{self.job_id}"

    @property
    def log_path(self) -> str:
        return f"{self.job_dir}/log"

    @property
    def pid_path(self) -> str:
        return f"{self.job_dir}/pid"

    @property
    def exit_code_path(self) -> str:
        return f"{self.job_dir}/exit_code"

    @property
    def script_path(self) -> str:
        return f"{self.job_dir}/job.sh"

    @property
    def launched_path(self) -> str:
        return f"{self.job_dir}/launched"

    @property
    def killed_path(self) -> str:
        return f"{self.job_dir}/killed"

    def shell_path(self, path: str) -> str:
        """Shell word for one of this job's paths (``"$HOME"/'...'`` when relative)."""
        return _shell_path(path, relative_to_home=True)

    def to_dict(self) -> dict[str, str]:
        """JSON-serialisable handle; the path keys are informative (``from_dict`` derives them again)."""
        return {
            "job_id": self.job_id,
            "base_dir": self.base_dir,
            "job_dir": self.job_dir,
            "log_path": self.log_path,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteJob:
        if not isinstance(data, Mapping) or "job_id" not in data:
            raise ValueError(f"Not a remote job handle: {data!r}")
        return cls(job_id=str(data["job_id"]), base_dir=str(data.get("base_dir") or DEFAULT_BASE_DIR))


# ------------------------------------------------------------------------------------------ shell fragments

# The job's pid (== pgid == sid) may be reused after a reboot: ``launched`` records the boot id.
_SAME_BOOT_FN = """__bj_same_boot() {
  [ -r "$__bj_dir/launched" ] && [ -r /proc/sys/kernel/random/boot_id ] || return 0
  read -r __bj_b __bj_t < "$__bj_dir/launched"
  read -r __bj_nb < /proc/sys/kernel/random/boot_id
  [ "$__bj_b" = "$__bj_nb" ] || [ "$__bj_b" = - ] || [ -z "$__bj_b" ]
}"""

# True when the leader $1 is alive: not a zombie (an unreaped orphan still answers ``kill -0``), still leading
# its own process group, and started in this boot.
_LEADER_ALIVE_FN = """__bj_alive() {
  __bj_p=$1
  kill -0 "$__bj_p" 2>/dev/null || return 1
  if [ -r "/proc/$__bj_p/stat" ]; then
    { read -r __bj_l < "/proc/$__bj_p/stat"; } 2>/dev/null || return 1
    set -- ${__bj_l##*") "}
    case "$1" in Z|X) return 1 ;; esac
    [ "$3" = "$__bj_p" ] || return 1
  fi
  __bj_same_boot
}"""

# True while a live (non-zombie) process is in process group $1.
_GROUP_ALIVE_FN = """__bj_group_alive() {
  __bj_g=$1
  kill -0 -- "-$__bj_g" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for __bj_f in /proc/[0-9]*/stat; do
    { read -r __bj_l < "$__bj_f"; } 2>/dev/null || continue
    set -- ${__bj_l##*") "}
    if [ "$3" = "$__bj_g" ] && [ "$1" != Z ] && [ "$1" != X ]; then return 0; fi
  done
  return 1
}"""

# Reads the pid file into $__bj_pid ("-" when absent); waits up to 2 s for a launcher that is half-way.
_READ_PID = """__bj_i=0
while [ "$__bj_i" -lt 20 ] && [ ! -f "$__bj_dir/pid" ] && [ ! -f "$__bj_dir/exit_code" ]; do
  sleep 0.1; __bj_i=$((__bj_i + 1))
done
__bj_pid=-
[ -f "$__bj_dir/pid" ] && read -r __bj_pid < "$__bj_dir/pid"
case "$__bj_pid" in ''|*[!0-9]*) __bj_pid=- ;; esac"""


def _prelude(job: RemoteJob) -> list[str]:
    return [f"__bj_dir={job.shell_path(job.job_dir)}", _SAME_BOOT_FN, _LEADER_ALIVE_FN]


def _status_block(job: RemoteJob, offset: int, max_bytes: int) -> list[str]:
    """Print the status header, then log bytes ``[offset, min(size, offset + max_bytes))`` in base64.

    Liveness is sampled before the exit file is checked, and the size after: a dead leader wrote its exit file
    (if ever) before dying, and ``finished`` means the log is complete up to the printed size.
    """
    job_id = shlex.quote(job.job_id)
    return [
        "__bj_state=missing; __bj_rc=-; __bj_pid=-; __bj_size=0",
        'if [ -d "$__bj_dir" ]; then',
        _READ_PID,
        '  __bj_live=0; [ "$__bj_pid" != - ] && __bj_alive "$__bj_pid" && __bj_live=1',
        '  if [ -f "$__bj_dir/exit_code" ]; then',
        '    __bj_state=finished; read -r __bj_rc < "$__bj_dir/exit_code"',
        "    case \"$__bj_rc\" in ''|*[!0-9]*) __bj_rc=- ;; esac",
        '  elif [ "$__bj_live" = 1 ]; then __bj_state=running',
        "  else __bj_state=lost; fi",
        '  __bj_size=$(stat -c %s -- "$__bj_dir/log" 2>/dev/null) || __bj_size=0',
        "  case \"$__bj_size\" in ''|*[!0-9]*) __bj_size=0 ;; esac",
        "fi",
        f'printf \'{STATUS_MARKER} %s %s %s %s %s\\n\' {job_id} "$__bj_state" "$__bj_rc" "$__bj_size" "$__bj_pid"',
        f"printf '{LOG_BEGIN_MARKER}\\n'",
        f'__bj_n=$((__bj_size - {offset})); [ "$__bj_n" -gt {max_bytes} ] && __bj_n={max_bytes}',
        'if [ "$__bj_n" -gt 0 ]; then',
        f'  tail -c +{offset + 1} -- "$__bj_dir/log" | head -c "$__bj_n" | base64 -w 0',
        "fi",
        f"printf '\\n{LOG_END_MARKER}\\n'",
    ]


def _join(lines: Iterable[str]) -> str:
    command = "\n".join(lines)
    if len(command.encode("utf-8")) > MAX_COMMAND_LENGTH:
        raise ValueError(
            f"The remote command is longer than {MAX_COMMAND_LENGTH} bytes; put the long part in a script "
            "file on the instance and run that instead."
        )
    return command


def _check_offsets(offset: int, max_bytes: int) -> None:
    for name, value, minimum in (("offset", offset, 0), ("max_bytes", max_bytes, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


# ------------------------------------------------------------------------------------------------- launch


def _job_script(
    job: RemoteJob, command: str, *, env: Mapping[str, str], cwd: str | None, secret_env_path: str | None
) -> str:
    lines = [
        f"# Detached job {job.job_id}, written by airflow-provider-brev. Runs once; never re-launched.",
        f"__bj_dir={job.shell_path(job.job_dir)}",
        "__bj_finish() {",
        '  printf \'%s\\n\' "$1" > "$__bj_dir/exit_code.tmp" &&',
        '    mv -f -- "$__bj_dir/exit_code.tmp" "$__bj_dir/exit_code"',
        '  exit "$1"',
        "}",
    ]
    if secret_env_path is not None:
        lines += [
            f"__bj_secret={_shell_path(secret_env_path, relative_to_home=True)}",
            'if . "$__bj_secret"; then __bj_ok=1; else __bj_ok=0; fi',
            'rm -f -- "$__bj_secret"',
            'if [ "$__bj_ok" != 1 ]; then',
            "  echo 'brev-job: could not load the secret environment file; the command was not run' >&2",
            f"  __bj_finish {SETUP_FAILED_EXIT_CODE}",
            "fi",
        ]
    if cwd is not None:
        where = _shell_path(cwd, relative_to_home=False)
        lines += [
            f"if ! cd -- {where}; then",
            f"  printf 'brev-job: cannot change directory to %s; the command was not run\\n' {where} >&2",
            f"  __bj_finish {SETUP_FAILED_EXIT_CODE}",
            "fi",
        ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    lines += [f"bash -c {shlex.quote(command)} </dev/null", '__bj_finish "$?"', ""]
    return "\n".join(lines)


def build_launch_command(
    job: RemoteJob,
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    secret_env_path: str | None = None,
) -> str:
    """Start ``command`` detached (own session and process group, survives ssh), at most once per job id.

    Prints ``BREV_JOB_LAUNCHED <job_id> <pid>``; or, when the job directory already exists,
    ``BREV_JOB_EXISTS <job_id>`` followed by a status block (:func:`build_poll_command`, no log bytes); or
    ``BREV_JOB_LAUNCH_FAILED <job_id> <reason>``. Always exits 0. Parse with :func:`parse_launch_output`.

    :param command: the user's shell command, run with ``bash -c`` (stdin ``/dev/null``).
    :param env: plain environment variables (values appear in the command string and the job script).
    :param cwd: working directory (``~/`` accepted; relative paths are relative to the login directory).
        If it does not exist, the job ends with :data:`SETUP_FAILED_EXIT_CODE` and a message in the log.
    :param secret_env_path: remote file of ``export K='v'`` lines (:func:`build_secret_env_file`), relative to
        ``$HOME`` unless absolute. The job sources then deletes it; it is also deleted when nothing is launched.
    """
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must be a non-empty string")
    if "\x00" in command:
        raise ValueError("command must not contain NUL characters")
    plain_env = validate_env(env)
    for name, value in plain_env.items():
        if "\x00" in value:
            raise ValueError(f"Environment variable {name} must not contain NUL characters")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.strip() or "\x00" in cwd):
        raise ValueError(f"cwd must be a non-empty path without NUL characters, got {cwd!r}")
    if secret_env_path is not None:
        _check_path(secret_env_path, "secret_env_path")
    script = _job_script(job, command, env=plain_env, cwd=cwd, secret_env_path=secret_env_path)
    job_id = shlex.quote(job.job_id)
    drop_secret = (
        f"rm -f -- {_shell_path(secret_env_path, relative_to_home=True)}" if secret_env_path is not None else ":"
    )

    def failed(reason: str) -> str:
        return f"  {drop_secret}; printf '{LAUNCH_FAILED_MARKER} %s %s\\n' {job_id} {reason}"

    return _join(
        [
            "set +m",
            "trap '' HUP",  # an ssh drop half-way must not leave a guard without a job
            *_prelude(job),
            f"__bj_base={job.shell_path(job.base_dir)}",
            "if ! command -v setsid >/dev/null 2>&1 || ! command -v nohup >/dev/null 2>&1; then",
            failed("missing-setsid"),
            'elif ! mkdir -p -- "$__bj_base" 2>/dev/null; then',
            failed("base-dir"),
            'elif mkdir -m 700 -- "$__bj_dir" 2>/dev/null; then',
            f'  if printf \'%s\' {shlex.quote(script)} > "$__bj_dir/job.sh" && : > "$__bj_dir/log"; then',
            '    setsid nohup bash "$__bj_dir/job.sh" > "$__bj_dir/log" 2>&1 < /dev/null &',
            "    __bj_pid=$!",
            '    printf \'%s\\n\' "$__bj_pid" > "$__bj_dir/pid.tmp" && mv -f -- "$__bj_dir/pid.tmp" "$__bj_dir/pid"',
            "    __bj_boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || __bj_boot=-",
            '    printf \'%s %s\\n\' "${__bj_boot:--}" "$(date +%s)" > "$__bj_dir/launched"',
            f"    printf '{LAUNCHED_MARKER} %s %s\\n' {job_id} \"$__bj_pid\"",
            "  else",
            '    rm -rf -- "$__bj_dir"',
            failed("write-script"),
            "  fi",
            'elif [ ! -d "$__bj_dir" ]; then',
            failed("job-dir"),
            "else",
            f"  {drop_secret}",
            f"  printf '{EXISTS_MARKER} %s\\n' {job_id}",
            *_status_block(job, 0, 0),
            "fi",
            "exit 0",
        ]
    )


# --------------------------------------------------------------------------------------------------- poll


def build_poll_command(job: RemoteJob, *, offset: int, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Report the job's state and the log bytes from ``offset`` (at most ``max_bytes``), in one call.

    Output (always exit 0)::

        BREV_JOB_STATUS <job_id> <running|finished|lost|missing> <exit_code|-> <log_size> <pid|->
        BREV_JOB_LOG_BEGIN
        <base64 of the chunk, possibly empty>
        BREV_JOB_LOG_END
    """
    _check_offsets(offset, max_bytes)
    return _join([*_prelude(job), *_status_block(job, offset, max_bytes), "exit 0"])


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


def _marker_re(marker: str, job_id: str, tail: str) -> re.Pattern[str]:
    return re.compile(re.escape(marker) + " " + re.escape(job_id) + tail + r"\s*$")


def _status_re(job_id: str) -> re.Pattern[str]:
    states = "|".join(STATES)
    return _marker_re(STATUS_MARKER, job_id, rf" ({states}) (-|\d+) (\d+) (-|\d+)")


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
    header = _status_re(job_id)
    found_header = False
    for index in range(len(lines) - 1, -1, -1):
        match = header.search(lines[index])
        if not match:
            continue
        found_header = True
        chunk = _log_block(lines, index + 1)
        if chunk is None:
            continue
        state, rc, size, pid = match.groups()
        return PollResult(
            state=state,
            exit_code=_optional_int(rc),
            log_size=int(size),
            pid=_optional_int(pid),
            chunk=chunk,
            offset=offset,
        )
    if found_header:
        raise ValueError(f"Truncated output from the remote job poll for {job_id!r}: the log block is incomplete.")
    raise ValueError(
        f"No '{STATUS_MARKER} {job_id}' line in the remote output; the poll command did not run "
        f"(first lines: {lines[:3]!r})."
    )


def _log_block(lines: list[str], start: int) -> bytes | None:
    begin = next((i for i in range(start, len(lines)) if lines[i].strip() == LOG_BEGIN_MARKER), None)
    if begin is None:
        return None
    end = next((i for i in range(begin + 1, len(lines)) if lines[i].strip() == LOG_END_MARKER), None)
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
    launched = _marker_re(LAUNCHED_MARKER, job_id, r" (\d+)")
    failed = _marker_re(LAUNCH_FAILED_MARKER, job_id, r" (\S+)")
    exists = _marker_re(EXISTS_MARKER, job_id, "")
    result = LaunchResult(launched=False)
    for index, line in enumerate(lines):
        if match := launched.search(line):
            result.launched, result.pid = True, int(match.group(1))
        elif match := failed.search(line):
            result.error = match.group(1)
        elif exists.search(line):
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


# ------------------------------------------------------------------------------------------- kill, cleanup


def build_kill_command(job: RemoteJob, *, grace_seconds: float = 10) -> str:
    """SIGTERM the job's process group, SIGKILL it after ``grace_seconds``; returns within grace + ~1.5 s.

    If the job left no exit code, writes :data:`TERMINATED_EXIT_CODE` (gone after SIGTERM) or
    :data:`KILLED_EXIT_CODE` (SIGKILL needed, or nothing was alive) atomically, so later polls report
    ``finished``; a ``killed`` file records the kill. Prints ``BREV_JOB_KILLED <job_id> <result>`` with result
    ``terminated``, ``killed``, ``not-running``, ``already-finished`` or ``missing``. Always exits 0.
    """
    if isinstance(grace_seconds, bool) or not isinstance(grace_seconds, int | float) or not 0 <= grace_seconds <= 3600:
        raise ValueError(f"grace_seconds must be between 0 and 3600, got {grace_seconds!r}")
    ticks = max(1, math.ceil(grace_seconds * 10))
    whole_seconds = math.ceil(grace_seconds)
    job_id = shlex.quote(job.job_id)
    return _join(
        [
            *_prelude(job),
            _GROUP_ALIVE_FN,
            "__bj_result=missing",
            'if [ -d "$__bj_dir" ]; then',
            _READ_PID,
            '  if [ -f "$__bj_dir/exit_code" ]; then __bj_result=already-finished',
            "  else",
            f"    __bj_code={KILLED_EXIT_CODE}; __bj_result=not-running",
            '    if [ "$__bj_pid" != - ] && __bj_same_boot && __bj_group_alive "$__bj_pid"; then',
            '      kill -TERM -- "-$__bj_pid" 2>/dev/null',
            f"      __bj_i=0; __bj_end=$((${{SECONDS:-0}} + {whole_seconds}))",
            f'      while [ "$__bj_i" -lt {ticks} ] && [ "${{SECONDS:-0}}" -le "$__bj_end" ] '
            '&& __bj_group_alive "$__bj_pid"; do',
            "        sleep 0.1; __bj_i=$((__bj_i + 1))",
            "      done",
            '      if __bj_group_alive "$__bj_pid"; then',
            '        kill -KILL -- "-$__bj_pid" 2>/dev/null; __bj_result=killed',
            "        __bj_i=0",
            '        while [ "$__bj_i" -lt 5 ] && __bj_group_alive "$__bj_pid"; do',
            "          sleep 0.1; __bj_i=$((__bj_i + 1))",
            "        done",
            f"      else __bj_code={TERMINATED_EXIT_CODE}; __bj_result=terminated; fi",
            "    fi",
            '    printf \'%s\\n\' "$__bj_result" > "$__bj_dir/killed"',
            '    if [ ! -f "$__bj_dir/exit_code" ]; then',
            '      printf \'%s\\n\' "$__bj_code" > "$__bj_dir/exit_code.kill" &&',
            '        { ln -- "$__bj_dir/exit_code.kill" "$__bj_dir/exit_code" 2>/dev/null;',  # no clobber
            '          rm -f -- "$__bj_dir/exit_code.kill"; }',
            "    fi",
            "  fi",
            "fi",
            f"printf '{KILLED_MARKER} %s %s\\n' {job_id} \"$__bj_result\"",
            "exit 0",
        ]
    )


def build_cleanup_command(job: RemoteJob) -> str:
    """Remove the job's directory (only ``<base_dir>/<job_id>``); a job still running is left alone.

    Prints ``BREV_JOB_CLEANED <job_id> <removed|missing|running|failed>``. Always exits 0.
    """
    job_id = shlex.quote(job.job_id)
    return _join(
        [
            *_prelude(job),
            "__bj_result=missing",
            'case "$__bj_dir" in */' + job_id + ') ;; *) __bj_dir="" ;; esac',
            'if [ -n "$__bj_dir" ] && [ -d "$__bj_dir" ]; then',
            '  __bj_pid=-; [ -f "$__bj_dir/pid" ] && read -r __bj_pid < "$__bj_dir/pid"',
            "  case \"$__bj_pid\" in ''|*[!0-9]*) __bj_pid=- ;; esac",
            '  if [ ! -f "$__bj_dir/exit_code" ] && [ "$__bj_pid" != - ] && __bj_alive "$__bj_pid"; then',
            "    __bj_result=running",
            '  elif rm -rf -- "$__bj_dir"; then __bj_result=removed',
            "  else __bj_result=failed; fi",
            "fi",
            f"printf '{CLEANED_MARKER} %s %s\\n' {job_id} \"$__bj_result\"",
            "exit 0",
        ]
    )


def _parse_result_marker(stdout_lines: Iterable[str], marker: str, job_id: str) -> str:
    pattern = _marker_re(marker, job_id, r" (\S+)")
    found: str | None = None
    for line in stdout_lines:
        if match := pattern.search(line):
            found = match.group(1)
    if found is None:
        raise ValueError(f"No '{marker} {job_id}' line in the remote output.")
    return found


def parse_kill_output(stdout_lines: Iterable[str], job_id: str) -> str:
    """The result word of :func:`build_kill_command`; :raises ValueError: when absent."""
    return _parse_result_marker(stdout_lines, KILLED_MARKER, job_id)


def parse_cleanup_output(stdout_lines: Iterable[str], job_id: str) -> str:
    """The result word of :func:`build_cleanup_command`; :raises ValueError: when absent."""
    return _parse_result_marker(stdout_lines, CLEANED_MARKER, job_id)


# ------------------------------------------------------------------------------------------------ secrets


def build_secret_env_file(secret_env: Mapping[str, str]) -> str:
    """Content of a secret environment file: one ``export NAME='value'`` line per variable.

    Upload it to the instance (never inside a command string) and pass its path as ``secret_env_path``.
    """
    lines = []
    for name, value in validate_env(secret_env).items():
        if "\x00" in value:
            raise ValueError(f"Secret environment variable {name} must not contain NUL characters")
        escaped = value.replace("'", "'\\''")
        lines.append(f"export {name}='{escaped}'\n")
    return "".join(lines)


# -------------------------------------------------------------------------------------------------- logs


class LogLineAssembler:
    """Turn log chunks (bytes, split anywhere) into text lines.

    UTF-8 with replacement; carriage-return progress bars keep only the text after the last ``\\r``; very long
    lines come out in pieces (:data:`~airflow_provider_brev.hooks.process.MAX_LINE`).
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
