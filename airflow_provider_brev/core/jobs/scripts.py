"""The shell scripts of detached jobs: launch, poll, kill, cleanup, and the secret environment file.

Each ``build_*`` function renders one of ``airflow_provider_brev/remote/job_*.sh`` (after ``job_lib.sh``, the
functions they share) into one command string for ``brev exec <instance> "<command>"`` (remote side: bash on
Ubuntu) that always exits 0 and reports in ``BREV_JOB_*`` marker lines (:mod:`airflow_provider_brev.core.protocol.markers`),
parsed by :mod:`airflow_provider_brev.core.jobs.remote`. Every value reaches a script through the quoted header of
:func:`~airflow_provider_brev.core.protocol.remote_scripts.render_script`; secret values only ever go into the file
built by :func:`build_secret_env_file`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from airflow_provider_brev.core.jobs.handle import (
    DEFAULT_MAX_BYTES,
    KILLED_EXIT_CODE,
    MAX_COMMAND_LENGTH,
    MAX_POLL_WAIT,
    SETUP_FAILED_EXIT_CODE,
    TERMINATED_EXIT_CODE,
    RemoteJob,
    check_path,
    path_value,
)
from airflow_provider_brev.core.jobs.shell import (
    REDACT_AWK,
    STALE_SECRET_MINUTES,
    redact_names,
    secret_file_name,
    validate_env,
)
from airflow_provider_brev.core.protocol.remote_scripts import Value, render_script

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


# ------------------------------------------------------------------------------------------------ rendering

#: A finished job's directory stays (a retry may collect a job that succeeded although its try failed in Airflow);
#: a launch removes the directories of jobs that finished more than this many days ago.
STALE_JOB_DAYS = 7
#: The functions every job script but the job's own uses (``remote/job_lib.sh``).
JOB_LIBRARY = "job_lib"


def _render(name: str, job: RemoteJob, values: Mapping[str, Value] | None = None) -> str:
    header: dict[str, Value] = {"__bj_dir": path_value(job.job_dir, relative_to_home=True), "__BJ_ID": job.job_id}
    return _check_length(render_script(name, {**header, **(values or {})}, include=(JOB_LIBRARY,)))


def _check_length(command: str) -> str:
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
    """The job's own script (``remote/job_run.sh``), written into its directory by the launch."""
    values: dict[str, Value] = {
        "__bj_dir": path_value(job.job_dir, relative_to_home=True),
        "__BJ_COMMAND": command,
        "__BJ_SECRET": path_value(secret_env_path, relative_to_home=True) if secret_env_path is not None else "",
        "__BJ_CWD": path_value(cwd, relative_to_home=False) if cwd is not None else "",
        "__BJ_SETUP_FAILED": SETUP_FAILED_EXIT_CODE,
        "__BJ_ENV_NAMES": " ".join(env),
        **{f"__BJ_ENV_{name}": value for name, value in env.items()},
        "__BJ_SECRET_NAMES": redact_names(secret_names),
        "__BREV_REDACT_AWK": REDACT_AWK if secret_names else "",
    }
    title = f"Detached job {job.job_id}, written by airflow-provider-brev. Runs once; never re-launched."
    return render_script("job_run", values, helpers=False, title=title)


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
        instance (:func:`~airflow_provider_brev.core.jobs.shell.redact_filter`).
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
    values: dict[str, Value] = {
        "__bj_base": path_value(job.base_dir, relative_to_home=True),
        "__BJ_SCRIPT": script,
        "__BJ_SECRET": path_value(secret_env_path, relative_to_home=True) if secret_env_path is not None else "",
        "__BJ_STALE_SECRETS": " ".join(secret_file_name(i) for i in earlier_job_ids),
        "__BJ_STALE_MINUTES": STALE_SECRET_MINUTES,
        "__BJ_STALE_DAYS": STALE_JOB_DAYS,
    }
    return _render("job_launch", job, values)


# --------------------------------------------------------------------------------------------------- poll


def build_poll_command(job: RemoteJob, *, offset: int, max_bytes: int = DEFAULT_MAX_BYTES, wait: float = 0.0) -> str:
    """Report the job's state and the log bytes from ``offset`` (at most ``max_bytes``), in one call; while the job
    runs, first wait on the instance up to ``wait`` seconds (in tenths) for it to end, so that a follower sees the
    end within a tenth of a second instead of one poll interval later.

    Output (always exit 0)::

        BREV_JOB_STATUS <job_id> <running|finished|lost|missing> <exit_code|-> <log_size> <pid|->
        BREV_JOB_LOG_BEGIN
        <base64 of the chunk, possibly empty>
        BREV_JOB_LOG_END
    """
    _check_offsets(offset, max_bytes)
    return _render("job_poll", job, {"__BJ_OFFSET": offset, "__BJ_MAX": max_bytes, "__BJ_WAIT": wait_tenths(wait)})


def build_poll_many_command(polls: Sequence[tuple[RemoteJob, int, int]], *, wait: float = 0.0) -> str:
    """Report several jobs of one instance in one call: ``polls`` is ``(job, offset, max_bytes)`` per job; while every
    one of them runs, first wait on the instance up to ``wait`` seconds (in tenths) for one to end.

    The output is one block of :func:`build_poll_command`'s per job, in order (each parsed by
    :func:`~airflow_provider_brev.core.jobs.remote.parse_poll_output` with its job id).

    :raises ValueError: no job, the same job twice, or an offset or size :func:`build_poll_command` refuses.
    """
    return _check_length(_render_poll_many(polls, wait))


def _render_poll_many(polls: Sequence[tuple[RemoteJob, int, int]], wait: float) -> str:
    if not polls:
        raise ValueError("build_poll_many_command needs at least one job")
    if len({job.job_dir for job, _, _ in polls}) != len(polls):
        raise ValueError("build_poll_many_command: each job once")
    values: dict[str, Value] = {"__BJ_COUNT": len(polls), "__BJ_WAIT": wait_tenths(wait)}
    for index, (job, offset, max_bytes) in enumerate(polls):
        _check_offsets(offset, max_bytes)
        values[f"__bj_dir_{index}"] = path_value(job.job_dir, relative_to_home=True)
        values[f"__BJ_ID_{index}"] = job.job_id
        values[f"__BJ_OFFSET_{index}"] = offset
        values[f"__BJ_MAX_{index}"] = max_bytes
    return render_script("job_poll_many", values, include=(JOB_LIBRARY,))


def polls_that_fit(polls: Sequence[tuple[RemoteJob, int, int]]) -> int:
    """How many of ``polls``, from the first, one :func:`build_poll_many_command` can report within
    :data:`~airflow_provider_brev.core.jobs.handle.MAX_COMMAND_LENGTH` whatever its wait (at least one: one job is
    polled with :func:`build_poll_command`); the others wait for the next poll.

    :param polls: ``(job, offset, max_bytes)`` per job, each job once (a job's share of a poll is never more than
        it asked for, so the script of the poll is never longer).
    """

    def fits(count: int) -> bool:
        return len(_render_poll_many(polls[:count], MAX_POLL_WAIT).encode("utf-8")) <= MAX_COMMAND_LENGTH

    if len(polls) <= 1 or fits(len(polls)):
        return len(polls)
    fitting, too_many = 1, len(polls)
    while too_many - fitting > 1:
        middle = (fitting + too_many) // 2
        fitting, too_many = (middle, too_many) if fits(middle) else (fitting, middle)
    return fitting


def wait_tenths(wait: float) -> int:
    """``wait`` seconds as whole tenths for the poll script (never negative, at most :data:`MAX_POLL_WAIT`)."""
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait != wait:
        raise ValueError(f"wait must be a number of seconds, got {wait!r}")
    return round(min(max(float(wait), 0.0), MAX_POLL_WAIT) * 10)


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
    values: dict[str, Value] = {
        "__BJ_TICKS": max(1, math.ceil(grace_seconds * 10)),
        "__BJ_GRACE": math.ceil(grace_seconds),
        "__BJ_KILLED_CODE": KILLED_EXIT_CODE,
        "__BJ_TERMINATED_CODE": TERMINATED_EXIT_CODE,
    }
    return _render("job_kill", job, values)


def build_cleanup_command(job: RemoteJob) -> str:
    """Remove the job's directory (only ``<base_dir>/<job_id>``); a job still running is left alone.

    Prints ``BREV_JOB_CLEANED <job_id> <removed|missing|running|failed>``. Always exits 0.
    """
    return _render("job_cleanup", job)


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
