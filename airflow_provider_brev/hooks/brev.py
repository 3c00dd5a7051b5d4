"""BrevHook: instances, readiness, commands, files and detached jobs, over :class:`BrevBaseHook`.

The base hook (:mod:`airflow_provider_brev.hooks.base`) owns the connection, the CLI, login and the sync/async
runners; this module decides *what* to ask of ``brev`` with the pure builders and parsers of
:mod:`airflow_provider_brev.core`. Every sync/async pair here drives the same pure protocol or builder, so the
worker (operators, sensor) and the triggerer always ask and decide the same way. Together with the base hook it is
the only code in this provider that runs the ``brev`` CLI.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import mask_secret, triggerer_max_processes
from airflow_provider_brev.core.jobs.notices import StderrNoticeFilter
from airflow_provider_brev.core.jobs.remote import (
    DEFAULT_MAX_BYTES,
    LaunchResult,
    PollResult,
    RemoteJob,
    build_cleanup_command,
    build_kill_command,
    build_launch_command,
    build_poll_command,
    build_secret_env_file,
    parse_cleanup_output,
    parse_kill_output,
    parse_launch_output,
    parse_poll_output,
)
from airflow_provider_brev.core.jobs.scripts import wait_tenths
from airflow_provider_brev.core.jobs.shell import (
    STARTED_ELSEWHERE,
    build_foreground_kill_command,
    build_once_command,
    parse_once_marker,
    secret_file_name,
    stale_secret_cleanup,
    strip_once_stdout,
    validate_env,
)
from airflow_provider_brev.core.protocol.classify import (
    classify_failure,
    is_startup_breadcrumb,
    last_error_text,
    strip_breadcrumbs,
)
from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig
from airflow_provider_brev.core.protocol.invocation import exec_view
from airflow_provider_brev.core.protocol.names import validate_instance_name
from airflow_provider_brev.core.protocol.output import (
    BrevInstance,
)
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevCommandError,
    BrevConnectionLostError,
    BrevError,
    BrevInvalidInputError,
    BrevTimeoutError,
)
from airflow_provider_brev.hooks.base import DEFAULT_CLI_TIMEOUT
from airflow_provider_brev.hooks.connection_form import form_widgets, ui_field_behaviour
from airflow_provider_brev.hooks.instances import (
    DEFAULT_CREATE_TIMEOUT,
    DEFAULT_PROBE_TIMEOUT,
    BrevInstancesHook,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_provider_brev.hooks.process import LineCallback, ProcessResult

__all__ = [
    "DEFAULT_CLI_TIMEOUT",
    "DEFAULT_CREATE_TIMEOUT",
    "DEFAULT_PROBE_TIMEOUT",
    "BrevCapabilities",
    "BrevConnectionConfig",
    "BrevHook",
    "BrevInstance",
    "CommandResult",
]

#: Default budget of a foreground ``run_command``: the first exec on a new instance takes the slow path.
DEFAULT_EXEC_TIMEOUT = 3600.0
OUTPUT_TAIL_LINES = 100


@dataclass(frozen=True)
class CommandResult:
    """The outcome of :meth:`BrevHook.run_command`.

    :param exit_code: the remote command's real exit code.
    :param output: the last lines of its output (the full output went to the task log).
    :param errors: the last lines of its standard error (where tools such as ``docker`` say why they failed).
    """

    exit_code: int
    output: str
    errors: str = ""

    @property
    def last_line(self) -> str:
        return _last_line(self.output)

    @property
    def last_error(self) -> str:
        """The last line of standard error, else the last line of output: what to quote when the command failed."""
        return _last_line(self.errors) or self.last_line


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class BrevHook(BrevInstancesHook):
    """Interact with NVIDIA Brev through the ``brev`` CLI: instances, readiness, commands, files and jobs.

    Instances and readiness come from :class:`~airflow_provider_brev.hooks.instances.BrevInstancesHook`; the
    connection, login and runners from :class:`~airflow_provider_brev.hooks.base.BrevBaseHook` (its docstring
    lists the connection fields and constructor parameters).

    :param brev_conn_id: the Airflow connection id (default ``brev_default``).
    """

    #: The foreground command running now: ``(instance, run id)``, for :meth:`stop_foreground`.
    _foreground: tuple[str, str] | None = None

    # ------------------------------------------------------------------ connection form (Airflow < 3.2)
    # Defined on the registered class itself: Airflow 3.0 and 3.1 call them only where the hook class's own
    # ``__dict__`` has them (a hierarchy adds its fields once), so inherited ones would draw no extra field.
    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Hide host/schema/port/login; the password holds the Brev token (from the provider metadata,
        :mod:`airflow_provider_brev.hooks.connection_form`)."""
        return ui_field_behaviour(cls.conn_type)

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The extra fields of the connection form: the metadata's ``conn-fields`` (FAB/wtforms imported lazily)."""
        return form_widgets(cls.conn_type)

    # ------------------------------------------------------------------ commands
    def run_command(
        self,
        name: str,
        command: str,
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        secret_env: dict[str, str] | None = None,
        log_output: bool = True,
        log_level: int = logging.INFO,
        on_line: LineCallback | None = None,
    ) -> CommandResult:
        """Run ``command`` on instance ``name`` exactly once and return its real exit code.

        The command is wrapped (:func:`~airflow_provider_brev.core.jobs.shell.build_once_command`) so the released
        CLI's re-run-on-failure cannot run it twice, the real exit code comes back, and the CLI's trailing
        instance-name line is stripped. Output streams into the task log as it is produced.

        :param timeout: overall budget in seconds (default one hour; the first exec on a new instance is slow).
        :param env: plain (non-secret) environment variables for the command; they are on the remote command
            line. Use :class:`~airflow_provider_brev.operators.brev.BrevExecOperator` ``secret_env`` for secrets.
        :param cwd: remote working directory.
        :param secret_env: secret environment variables: shipped in a 0600 file (``brev copy``) that the command
            sources and deletes; never on a command line, in a log or in the result.
        :param log_output: stream the output into the task log.
        :param log_level: the level of the output lines (``logging.DEBUG`` for chatty tools such as ``docker
            pull``); standard error stays INFO, as that is where such tools say why they failed.
        :param on_line: also receive each output line.
        :raises BrevCommandError: never; check ``exit_code`` (the operators turn it into task state).
        """
        validate_instance_name(name)
        if not command or not command.strip():
            raise BrevInvalidInputError("The command is empty.")
        env = validate_env(env)
        run_id = f"{int(time.time())}-{secrets.token_hex(6)}"
        marker = "BREV_AIRFLOW_RC_" + secrets.token_hex(8)
        secret_path = None
        if secret_env:
            secret_path = secret_file_name(run_id)
            self._ship_secrets(name, secret_env, secret_path)
        remote = build_once_command(
            command,
            run_id=run_id,
            marker=marker,
            env=env,
            cwd=cwd,
            secret_env_path=secret_path,
            secret_names=list(secret_env or ()),
        )
        budget = timeout or DEFAULT_EXEC_TIMEOUT
        deadline = time.monotonic() + budget
        tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        errors: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        self._foreground = (name, run_id)  # for stop_foreground (on_kill)

        def emit(line: str) -> None:
            tail.append(line)
            if log_output:
                self.log.log(log_level, "[%s] %s", name, line)
            if on_line is not None:
                on_line(line)

        view = exec_view(3)

        def run_once() -> CommandResult:
            if self._foreground is None:  # stop_foreground ran (on_kill): no retry may start it again
                raise BrevCommandError(f"The command on {name!r} was stopped (the task was killed).", exit_code=-15)
            pending: deque[str] = deque()
            notices = StderrNoticeFilter()
            started = [False]  # the command printed a line: no start-up line of the CLI's can follow

            def on_stdout(line: str) -> None:
                if not started[0] and is_startup_breadcrumb(line):
                    return
                started[0] = True
                pending.append(line)
                while len(pending) > 2:
                    emit(pending.popleft())

            def on_stderr(line: str) -> None:
                if marker in line or not line or not notices.keep(line):
                    return
                errors.append(line)
                if log_output:
                    self.log.info("[%s stderr] %s", name, line)

            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrevTimeoutError(f"Command on {name!r} did not finish within {budget:.0f} s.", command="exec")
            try:
                result = self.run_cli(
                    ["exec", name, remote],
                    timeout=remaining,
                    retry=False,
                    check=False,
                    on_stdout=on_stdout,
                    on_stderr=on_stderr,
                    output_view=lambda r: (
                        ("", "") if parse_once_marker(r.stderr_lines, marker) is not None else view(r)
                    ),
                )
            except BrevTimeoutError:
                for line in pending:  # what the command printed before the budget ran out is not lost
                    emit(line)
                raise
            for line in strip_once_stdout(list(pending), name):
                emit(line)
            code = parse_once_marker(result.stderr_lines, marker)
            if isinstance(code, int):
                return CommandResult(exit_code=code, output="\n".join(tail), errors="\n".join(errors))
            if code == STARTED_ELSEWHERE:
                raise BrevConnectionLostError(
                    f"The connection to {name!r} dropped while the command ran. It was started once and is "
                    "not run again; its outcome is unknown. Use BrevExecOperator (detached jobs) for long "
                    "work that must survive connection drops.",
                    cli_message=result.stderr,
                    command="exec",
                )
            raise classify_failure("exec", result.exit_code, *view(result))

        try:
            return self.retry_sync(run_once)  # type: ignore[no-any-return]
        finally:
            self._foreground = None

    def stop_foreground(self, *, timeout: float = 4.0) -> bool:
        """Stop the foreground command :meth:`run_command` is running (from ``on_kill``, another thread): the
        local ``brev exec`` process group, and the remote command's whole session. Returns whether one ran.

        :param timeout: budget of the remote kill (Airflow gives ``on_kill`` about 5 s).
        """
        running = self._foreground
        stopped = self.stop_running(grace_seconds=0.5)
        if running is None:
            return stopped > 0
        name, run_id = running
        self._foreground = None
        self.log.warning("Stopping the foreground command on %s.", name)
        with contextlib.suppress(BrevError):
            self.run_cli(
                ["exec", name, build_foreground_kill_command(run_id, grace_seconds=0.5)],
                timeout=timeout,
                retry=False,
                check=False,
                log_output=False,
            )
        return True

    # ------------------------------------------------------------------ files
    def copy_to_instance(self, name: str, local_path: str, remote_path: str, *, timeout: float | None = None) -> None:
        """Copy a local file or directory to ``name:remote_path`` (``brev copy``; relative = the remote home)."""
        validate_instance_name(name)
        self.run_cli(["copy", local_path, f"{name}:{remote_path}"], timeout=timeout or DEFAULT_PROBE_TIMEOUT)

    def write_file_to_instance(
        self, name: str, content: str | bytes, remote_path: str, *, mode: int = 0o600, timeout: float | None = None
    ) -> None:
        """Write ``content`` to ``remote_path`` on the instance through a private local temp file.

        Used for anything that must not appear on a command line (secret env files, presigned URLs): the value
        only ever lives in a 0600 file in a 0700 temp directory, removed before this method returns.
        """
        workdir = tempfile.mkdtemp(prefix="brev-upload-")
        try:
            local = os.path.join(workdir, os.path.basename(remote_path.rstrip("/")) or "payload")
            fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode() if isinstance(content, str) else content)
            self.copy_to_instance(name, local, remote_path, timeout=timeout)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _ship_secrets(self, name: str, secret_env: dict[str, str], remote_path: str) -> None:
        for value in secret_env.values():
            mask_secret(value)
        self.write_file_to_instance(name, build_secret_env_file(secret_env), remote_path, mode=0o600)

    # ------------------------------------------------------------------ detached remote jobs
    def exec_script(self, name: str, script: str, *, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ProcessResult:
        """Run one of this provider's own always-exit-0 scripts and return its whole stdout.

        Only for scripts that report through markers (remote jobs, transfers): a non-zero CLI exit therefore
        means the CLI or the connection failed, and becomes a typed (usually transient) error.
        """
        validate_instance_name(name)
        return self.run_cli(
            ["exec", name, script],
            timeout=timeout,
            capture=True,
            retry=False,
            log_output=False,
            output_view=exec_view(),
        )

    async def aexec_script(self, name: str, script: str, *, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ProcessResult:
        """Async twin of :meth:`exec_script`."""
        validate_instance_name(name)
        return await self.arun_cli(
            ["exec", name, script],
            timeout=timeout,
            capture=True,
            retry=False,
            log_output=False,
            output_view=exec_view(),
        )

    @staticmethod
    def _parse_or_lost(parse: Callable[[], Any], result: ProcessResult) -> Any:
        try:
            return parse()
        except ValueError as err:  # the output was cut: the connection dropped mid-answer
            raise BrevConnectionLostError(
                f"Incomplete answer from the instance ({err}).",
                cli_message=last_error_text(strip_breadcrumbs(result.stderr), limit=500),
                command="exec",
            ) from err

    def launch_job(
        self,
        name: str,
        job: RemoteJob,
        command: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        secret_env: dict[str, str] | None = None,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
        earlier_jobs: Sequence[RemoteJob] = (),
    ) -> LaunchResult:
        """Start ``command`` detached on ``name`` as ``job`` (at most once per job id).

        ``secret_env`` values travel in a 0600 file copied with ``brev copy``; the job sources and deletes it.
        They never appear on any command line, in logs or in the returned handle. Secret files that
        ``earlier_jobs`` (earlier tries) may have left behind are removed first.
        """
        secret_path = None
        if secret_env:
            secret_path = secret_file_name(job.job_id)
            self._ship_secrets(name, secret_env, secret_path)
        script = build_launch_command(
            job,
            command,
            env=env,
            cwd=cwd,
            secret_env_path=secret_path,
            secret_names=list(secret_env or ()),
            earlier_job_ids=[earlier.job_id for earlier in earlier_jobs],
        )
        try:
            result = self.retry_sync(lambda: self.exec_script(name, script, timeout=timeout))
        except BaseException:
            if secret_path:  # never leave a secret behind on the instance
                with contextlib.suppress(Exception):
                    self.exec_script(name, stale_secret_cleanup([job.job_id]), timeout=30)
            raise
        launch = self._parse_or_lost(lambda: parse_launch_output(result.stdout_lines, job.job_id), result)
        if launch.error:
            raise BrevCLIError(f"Could not launch job {job.job_id} on {name!r}: {launch.error}", command="exec")
        return launch  # type: ignore[no-any-return]

    def _poll_request(
        self, job: RemoteJob, *, offset: int, max_bytes: int, wait: float
    ) -> tuple[str, float, Callable[[ProcessResult], PollResult]]:
        """One poll's script, its ``brev exec`` timeout and its reader: all that :meth:`poll_job` and
        :meth:`apoll_job` decide (a shared poll of several jobs, :mod:`~airflow_provider_brev.hooks.job_polls`,
        takes the timeout and each job's reader from here too)."""
        script = build_poll_command(job, offset=offset, max_bytes=max_bytes, wait=wait)
        return script, self._poll_timeout(wait), self._poll_reader(job, offset)

    @staticmethod
    def _poll_timeout(wait: float) -> float:
        """A poll's ``brev exec`` timeout: the probe's plus the wait on the instance."""
        return DEFAULT_PROBE_TIMEOUT + wait_tenths(wait) / 10

    @classmethod
    def _poll_reader(cls, job: RemoteJob, offset: int) -> Callable[[ProcessResult], PollResult]:
        """Reads ``job``'s block of a poll's output (an incomplete answer: the connection dropped mid-answer)."""

        def read(result: ProcessResult) -> PollResult:
            return cls._parse_or_lost(lambda: parse_poll_output(result.stdout_lines, job.job_id, offset), result)  # type: ignore[no-any-return]

        return read

    def poll_job(
        self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = DEFAULT_MAX_BYTES, wait: float = 0.0
    ) -> PollResult:
        """Status and the next log chunk of ``job`` in one ``brev exec`` (transient failures retried), after waiting
        on the instance up to ``wait`` seconds for the job to end."""
        script, timeout, read = self._poll_request(job, offset=offset, max_bytes=max_bytes, wait=wait)
        return self.retry_sync(lambda: read(self.exec_script(name, script, timeout=timeout)))  # type: ignore[no-any-return]

    async def apoll_job(
        self,
        name: str,
        job: RemoteJob,
        *,
        offset: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
        wait: float = 0.0,
        shared: bool = True,
    ) -> PollResult:
        """Async twin of :meth:`poll_job` (same answer, reader and retry policy): by default from the event loop's
        shared poll of the instance, one ``brev exec`` for every job followed on it
        (:mod:`airflow_provider_brev.hooks.job_polls`).

        :param shared: ``False``: one ``brev exec`` for this job alone, the same script as :meth:`poll_job`.
        """
        script, timeout, read = self._poll_request(job, offset=offset, max_bytes=max_bytes, wait=wait)  # validates
        if shared:
            from airflow_provider_brev.hooks.job_polls import shared_poll

            validate_instance_name(name)
            return await shared_poll(
                self, name, job, offset=offset, max_bytes=max_bytes, wait=wait, process_cap=triggerer_max_processes()
            )

        async def once() -> PollResult:
            return read(await self.aexec_script(name, script, timeout=timeout))

        return await self.retry_async(once)  # type: ignore[no-any-return]

    def kill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = 10, timeout: float = 60) -> str:
        """SIGTERM the job's process group, SIGKILL after ``grace_seconds``; returns what happened."""
        result = self.exec_script(name, build_kill_command(job, grace_seconds=grace_seconds), timeout=timeout)
        return str(self._parse_or_lost(lambda: parse_kill_output(result.stdout_lines, job.job_id), result))

    async def akill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = 10, timeout: float = 60) -> str:
        """Async twin of :meth:`kill_job`."""
        result = await self.aexec_script(name, build_kill_command(job, grace_seconds=grace_seconds), timeout=timeout)
        return str(self._parse_or_lost(lambda: parse_kill_output(result.stdout_lines, job.job_id), result))

    def cleanup_job(self, name: str, job: RemoteJob) -> str:
        """Remove a finished job's directory on the instance (refused while it runs)."""
        result = self.exec_script(name, build_cleanup_command(job), timeout=60)
        return str(self._parse_or_lost(lambda: parse_cleanup_output(result.stdout_lines, job.job_id), result))

    # ------------------------------------------------------------------ connection test
    def test_connection(self) -> tuple[bool, str]:
        """Check the CLI, the login and the listing; ``(ok, message)`` for the UI's Test button."""
        try:
            caps = self.capabilities
            instances = self.list_instances()
        except BrevError as err:
            return False, str(err)
        return True, f"Connected to Brev with {caps.version_text}: {len(instances)} instance(s) visible."
