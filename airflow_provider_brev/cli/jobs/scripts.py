"""The shell scripts of detached jobs: launch, poll, kill, cleanup, and the secret environment file.

Each ``build_*`` function returns one command string for ``brev exec <instance> "<command>"`` (remote side: bash
on Ubuntu) that always exits 0 and reports in ``BREV_JOB_*`` marker lines, parsed by
:mod:`airflow_provider_brev.cli.jobs.remote`. Every interpolated value is ``shlex.quote``-d; secret values only
ever go into the file built by :func:`build_secret_env_file`.
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING

from airflow_provider_brev.cli.jobs.handle import (
    CLEANED_MARKER,
    DEFAULT_MAX_BYTES,
    EXISTS_MARKER,
    KILLED_EXIT_CODE,
    KILLED_MARKER,
    LAUNCH_FAILED_MARKER,
    LAUNCHED_MARKER,
    LOG_BEGIN_MARKER,
    LOG_END_MARKER,
    MAX_COMMAND_LENGTH,
    SETUP_FAILED_EXIT_CODE,
    STATUS_MARKER,
    TERMINATED_EXIT_CODE,
    RemoteJob,
    check_path,
    shell_path,
)
from airflow_provider_brev.cli.jobs.shell import redact_filter, stale_secret_cleanup, validate_env

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence


# ------------------------------------------------------------------------------------------ shell fragments

#: A finished job's directory stays (a retry may collect a job that succeeded although its try failed in Airflow);
#: a launch removes the directories of jobs that finished more than this many days ago.
STALE_JOB_DAYS = 7

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
    job: RemoteJob,
    command: str,
    *,
    env: Mapping[str, str],
    cwd: str | None,
    secret_env_path: str | None,
    secret_names: Sequence[str] = (),
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
            f"__bj_secret={shell_path(secret_env_path, relative_to_home=True)}",
            'if . "$__bj_secret"; then __bj_ok=1; else __bj_ok=0; fi',
            'rm -f -- "$__bj_secret"',
            'if [ "$__bj_ok" != 1 ]; then',
            "  echo 'brev-job: could not load the secret environment file; the command was not run' >&2",
            f"  __bj_finish {SETUP_FAILED_EXIT_CODE}",
            "fi",
        ]
    if cwd is not None:
        where = shell_path(cwd, relative_to_home=False)
        lines += [
            f"if ! cd -- {where}; then",
            f"  printf 'brev-job: cannot change directory to %s; the command was not run\\n' {where} >&2",
            f"  __bj_finish {SETUP_FAILED_EXIT_CODE}",
            "fi",
        ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    if secret_names:  # the values leave the instance redacted (see cli.shell.redact_filter)
        lines += [f"bash -c {shlex.quote(command)} </dev/null 2>&1 | {redact_filter(secret_names)}"]
        lines += ['__bj_finish "${PIPESTATUS[0]}"', ""]
    else:
        lines += [f"bash -c {shlex.quote(command)} </dev/null", '__bj_finish "$?"', ""]
    return "\n".join(lines)


def build_launch_command(
    job: RemoteJob,
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    secret_env_path: str | None = None,
    secret_names: Sequence[str] = (),
    earlier_job_ids: Sequence[str] = (),
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
    :param secret_names: names of the secret variables: their values are redacted from the job's log on the
        instance (:func:`~airflow_provider_brev.cli.jobs.shell.redact_filter`).
    :param earlier_job_ids: jobs of earlier tries: their secret files, if a dead worker left them, are removed.
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
        check_path(secret_env_path, "secret_env_path")
    script = _job_script(
        job, command, env=plain_env, cwd=cwd, secret_env_path=secret_env_path, secret_names=list(secret_names)
    )
    job_id = shlex.quote(job.job_id)
    drop_secret = (
        f"rm -f -- {shell_path(secret_env_path, relative_to_home=True)}" if secret_env_path is not None else ":"
    )

    def failed(reason: str) -> str:
        return f"  {drop_secret}; printf '{LAUNCH_FAILED_MARKER} %s %s\\n' {job_id} {reason}"

    return _join(
        [
            "set +m",
            stale_secret_cleanup(earlier_job_ids),
            "trap '' HUP",  # an ssh drop half-way must not leave a guard without a job
            *_prelude(job),
            f"__bj_base={job.shell_path(job.base_dir)}",
            "if ! command -v setsid >/dev/null 2>&1 || ! command -v nohup >/dev/null 2>&1; then",
            failed("missing-setsid"),
            'elif ! mkdir -p -- "$__bj_base" 2>/dev/null; then',
            failed("base-dir"),
            f'elif {_sweep_stale_jobs()}; mkdir -m 700 -- "$__bj_dir" 2>/dev/null; then',
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


def _sweep_stale_jobs() -> str:
    """Remove the directories of jobs that finished more than :data:`STALE_JOB_DAYS` days ago (``exit_code`` is
    written when a job ends; a running job has none)."""
    return (
        f'find "$__bj_base" -mindepth 2 -maxdepth 2 -name exit_code -mtime +{STALE_JOB_DAYS} '
        "-exec sh -c 'rm -rf -- \"${1%/exit_code}\"' _ {} \\; 2>/dev/null"
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
