"""BrevBaseHook: the connection, the CLI, its capabilities, login, and running ``brev`` (sync and async).

Split the way the Databricks provider splits ``databricks_base.py`` from ``databricks.py``: this module knows how
to run the CLI; :mod:`airflow_provider_brev.hooks.brev` knows what to ask of it. Every decision about a call's
outcome (breadcrumbs, logged-out, re-login, failure type, retry) is made in the pure core
(:mod:`airflow_provider_brev.core.protocol.invocation`, :mod:`airflow_provider_brev.core.protocol.classify`);
:meth:`BrevBaseHook.run_cli` and :meth:`BrevBaseHook.arun_cli` run that machine with the generic sync and async
drivers (:mod:`airflow_provider_brev.hooks.driver`) and only perform the calls it asks for, so the worker and the
triggerer cannot disagree.

It absorbs the CLI's sharp edges: stdin is always ``/dev/null``; every call runs in its own process group with a
timeout; output is streamed line by line into the task log; ``SSH_AUTH_SOCK`` is set so the CLI starts no
``ssh-agent`` that would outlive the call (:mod:`airflow_provider_brev.core.protocol.environment` says why
``/dev/null``); the hook logs in headlessly before the first authenticated call (serialised by a file lock, because
parallel tasks share ``~/.brev/credentials.json``; in a scratch HOME whose files replace the shared ones only when
the login succeeded, :mod:`airflow_provider_brev.hooks.login`) and again once when the CLI takes its "logged out"
path; transient failures are retried with tenacity.

The token is registered with Airflow's secrets masker and is passed on exactly one command line:
``brev login --token <token>`` (the CLI has no other way to receive it). No other invocation carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tenacity

from airflow_provider_brev._compat import (
    AIRFLOW_V_3_1_PLUS,
    AirflowNotFoundException,
    BaseHook,
    mask_secret,
    triggerer_max_processes,
)
from airflow_provider_brev.core.protocol.classify import login_failure
from airflow_provider_brev.core.protocol.config import (
    DEFAULT_BREV_CONN_ID,
    BrevCapabilities,
    BrevConnectionConfig,
    login_args,
)
from airflow_provider_brev.core.protocol.environment import (
    AgentAnnouncement,
    announces_agent,
    brev_environment,
    login_environment,
)
from airflow_provider_brev.core.protocol.invocation import EnsureLogin, Invocation, OutputView
from airflow_provider_brev.core.protocol.output import parse_help_flags, parse_version
from airflow_provider_brev.exceptions import (
    BREV_DOCS_URL,
    BrevCLINotFoundError,
    BrevConfigurationError,
    BrevInvalidInputError,
    BrevTimeoutError,
    retry_policy,
)
from airflow_provider_brev.hooks.driver import adrive, drive
from airflow_provider_brev.hooks.login import adopt_login, scratch_home
from airflow_provider_brev.hooks.process import (
    LineCallback,
    ProcessResult,
    arun_process,
    loop_process_slots,
    run_process,
)
from airflow_provider_brev.hooks.transcript import record_call

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from airflow_provider_brev.core.protocol.machine import Call

__all__ = ["DEFAULT_CLI_TIMEOUT", "BrevBaseHook"]

#: Default budget of one short CLI call (ls, delete, search ...).
DEFAULT_CLI_TIMEOUT = 120.0
LOGIN_TIMEOUT = 60.0


# Per-process caches shared by every hook instance (a worker runs many tasks; probing once is enough).
_CAPABILITIES: dict[tuple[str, float], BrevCapabilities] = {}
_LOGGED_IN: set[tuple[str, str]] = set()
#: ``(ssh executable, host-entry file)`` -> why that ``ssh`` could not reach an instance that ``brev exec`` reached
#: (:func:`~airflow_provider_brev.core.instances.ssh_probe.direct_ssh_unreachable`): this process's later readiness
#: checks through that pair probe with ``brev exec`` alone (:mod:`airflow_provider_brev.hooks.instances`).
_DIRECT_SSH_UNREACHABLE: dict[tuple[str, str], str] = {}
_CACHE_LOCK = threading.Lock()
_PROBE_LOCKS: dict[str, threading.Lock] = {}


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _outside_a_task() -> bool:
    """True where Airflow 3.1+'s Task SDK looks connections up in environment variables and secrets backends only:
    not in a running task (which asks the API server) and not in a server process (which reads the metadata DB)."""
    if not AIRFLOW_V_3_1_PLUS:
        return False  # Airflow 3.0's BaseHook reads the metadata database everywhere
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:  # pragma: no cover - the module exists on every Airflow 3.1+
        return False
    if getattr(task_runner, "SUPERVISOR_COMMS", None) is not None:
        return False
    return os.environ.get("_AIRFLOW_PROCESS_CONTEXT") not in ("server", "client")


def missing_connection_message(conn_id: str) -> str:
    """Why the connection ``conn_id`` was not found, and the fix that applies where this process runs."""
    env_var = f"AIRFLOW_CONN_{conn_id.upper()}"
    create = (
        "create a connection of type 'brev' with the Brev API token in the password field (UI, `airflow "
        f'connections add`, or {env_var}=\'{{"conn_type": "brev", "password": "<token>"}}\'), or, for the default '
        "connection only, set BREV_API_TOKEN."
    )
    if not _outside_a_task():
        return f"The Airflow connection {conn_id!r} is not defined. {create[0].upper()}{create[1:]}"
    return (
        f"The Airflow connection {conn_id!r} is not defined in this process's environment or secrets backends. "
        "Outside a running task (a Python shell, a script), Airflow 3.1+ resolves connections only from "
        "environment variables and secrets backends, never from the metadata database where the UI and "
        "`airflow connections add` store them. To test a stored connection, run "
        f"`AIRFLOW__CORE__TEST_CONNECTION=Enabled airflow connections test {conn_id}`; to use it here, set {env_var} "
        f"in this environment. If it does not exist at all, {create}"
    )


class BrevBaseHook(BaseHook):
    """Connection, CLI discovery, capabilities, login and the ``brev`` runners shared by every Brev hook.

    Connection (type ``brev``, default id ``brev_default``): the token in the password field (or extra
    ``token``); or an API key (extras ``api_key`` and ``org_id``, CLI v0.6.324+); optional extras ``org``,
    ``cli_path``, ``cloud_cred_id``, ``workspace_group_id``, ``brev_home`` (a HOME for the CLI's ``~/.brev``)
    and ``name_prefix``. With no connection ``brev_default`` defined, the hook falls back to the
    ``BREV_API_TOKEN`` environment variable.

    :param brev_conn_id: the Airflow connection id.
    :param cli_path: path of the ``brev`` executable (default: extra ``cli_path``, then ``BREV_CLI``, then PATH).
    :param command_timeout: timeout of one short CLI call, in seconds.
    :param retry_limit: attempts for transient failures (≥ 1).
    :param retry_delay: initial backoff between attempts, in seconds (exponential, with jitter).
    :param retry_args: extra tenacity arguments; ``retry`` and ``before_sleep`` are always the hook's own,
        so only transient errors are retried and every attempt is logged.
    :param log_cli_output: stream the CLI's output into the task log.
    :param logger_name: name of the hook's logger.
    """

    conn_name_attr = "brev_conn_id"
    default_conn_name = DEFAULT_BREV_CONN_ID
    conn_type = "brev"
    hook_name = "NVIDIA Brev"

    def __init__(
        self,
        brev_conn_id: str | None = default_conn_name,
        *,
        cli_path: str | None = None,
        command_timeout: float = DEFAULT_CLI_TIMEOUT,
        retry_limit: int = 4,
        retry_delay: float = 1.0,
        retry_args: dict[str, Any] | None = None,
        log_cli_output: bool = True,
        logger_name: str | None = None,
    ) -> None:
        super().__init__(logger_name=logger_name)
        if retry_limit < 1:
            raise BrevInvalidInputError("retry_limit must be at least 1")
        self.brev_conn_id = brev_conn_id
        self._cli_path_arg = cli_path
        self.command_timeout = command_timeout
        self.retry_limit = retry_limit
        self.retry_delay = retry_delay
        self.retry_args = dict(retry_args or {})
        self.log_cli_output = log_cli_output
        #: ``brev`` processes this hook started (the sync runner), for :meth:`stop_running` (``on_kill``).
        self._running: list[subprocess.Popen[bytes]] = []
        #: Set by :meth:`stop_running` (on_kill): no call is retried after that.
        self._stopped = False

    # ------------------------------------------------------------------ configuration
    @cached_property
    def config(self) -> BrevConnectionConfig:
        """The connection's settings (fetched once; secrets registered with the masker)."""
        return self._config_from_connection(self._fetch_connection())

    def _fetch_connection(self) -> Any | None:
        if not self.brev_conn_id:
            return None
        try:
            return self.get_connection(self.brev_conn_id)
        except AirflowNotFoundException:
            return None

    async def _afetch_connection(self) -> Any | None:
        if not self.brev_conn_id:
            return None
        getter = getattr(type(self), "aget_connection", None)
        try:
            if getter is not None:
                return await getter(self.brev_conn_id)
            return await asyncio.to_thread(self.get_connection, self.brev_conn_id)
        except AirflowNotFoundException:
            return None

    async def aconfig(self) -> BrevConnectionConfig:
        """Async variant of :attr:`config` for the triggerer (no sync connection lookup on the event loop)."""
        if "config" not in self.__dict__:
            self.__dict__["config"] = self._config_from_connection(await self._afetch_connection())
        return self.config

    def _config_from_connection(self, conn: Any | None) -> BrevConnectionConfig:
        if conn is None:
            env_token = os.environ.get("BREV_API_TOKEN", "").strip()
            if self.brev_conn_id not in (None, self.default_conn_name) or not env_token:
                raise BrevConfigurationError(missing_connection_message(str(self.brev_conn_id)))
            self.log.info("No connection %r defined: using BREV_API_TOKEN from the environment.", self.brev_conn_id)
            config = BrevConnectionConfig(conn_id=None, token=env_token)
        else:
            extras = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
            config = BrevConnectionConfig.from_extras(conn.conn_id, conn.password, extras)
        mask_secret(config.token)
        mask_secret(config.api_key)
        return config.validate()

    @cached_property
    def cli_path(self) -> str:
        """The ``brev`` executable: argument, extra ``cli_path``, ``BREV_CLI``, then PATH."""
        for candidate, origin in (
            (self._cli_path_arg, "the cli_path argument"),
            (self.config.cli_path, "the connection extra 'cli_path'"),
            (os.environ.get("BREV_CLI"), "BREV_CLI"),
        ):
            if candidate:
                resolved = shutil.which(candidate) if os.sep not in candidate else candidate
                if resolved and os.access(resolved, os.X_OK) and os.path.isfile(resolved):
                    return resolved
                raise BrevCLINotFoundError(
                    f"The brev CLI given by {origin} ({candidate!r}) does not exist or is not executable. "
                    f"Install it (see {BREV_DOCS_URL}) or fix the path."
                )
        found = shutil.which("brev")
        if not found:
            raise BrevCLINotFoundError(
                f"The brev CLI was not found on PATH. Install it from {BREV_DOCS_URL} "
                "(e.g. `curl -fsSL https://brev.dev/install | bash`) on every Airflow worker and triggerer, "
                "or set the connection extra 'cli_path' or the BREV_CLI environment variable."
            )
        return found

    def _home(self) -> Path:
        return Path(self.config.brev_home or os.environ.get("HOME") or Path.home())

    def _env(self) -> dict[str, str]:
        """The environment of every process the hook starts (``brev``, ``ssh``): see
        :func:`~airflow_provider_brev.core.protocol.environment.brev_environment`."""
        return brev_environment(os.environ, brev_home=self.config.brev_home)

    # ------------------------------------------------------------------ capabilities
    @property
    def capabilities(self) -> BrevCapabilities:
        """What the installed CLI supports (learned once per process and CLI binary)."""
        path = self.cli_path
        try:
            key = (path, os.stat(path).st_mtime)
        except OSError:
            key = (path, 0.0)
        with _CACHE_LOCK:
            cached = _CAPABILITIES.get(key)
            probe_lock = _PROBE_LOCKS.setdefault(path, threading.Lock())
        if cached is not None:
            return cached
        with probe_lock:  # one probe per CLI binary, however many threads ask at once
            with _CACHE_LOCK:
                cached = _CAPABILITIES.get(key)
            return cached if cached is not None else self._probe_capabilities(path, key)

    def _probe_capabilities(self, path: str, key: tuple[str, float]) -> BrevCapabilities:
        version_run = run_process([path, "--version"], env=self._env(), timeout=30, capture_stdout=True)
        version_text = (version_run.stdout + "\n" + version_run.stderr).strip()
        help_run = run_process([path, "create", "--help"], env=self._env(), timeout=30, capture_stdout=True)
        for probe, run in ((["--version"], version_run), (["create", "--help"], help_run)):
            self._transcribe(probe, run, version=version_text.splitlines()[0] if version_text else "unknown")
        caps = BrevCapabilities(
            version=parse_version(version_text),
            version_text=version_text.splitlines()[0] if version_text else "unknown",
            create_flags=parse_help_flags(help_run.stdout + "\n" + help_run.stderr),
        )
        self.log.info("Using the brev CLI at %s (%s).", path, caps.version_text)
        self.log.debug("brev create flags: %s", ", ".join(sorted(caps.create_flags)))
        with _CACHE_LOCK:
            _CAPABILITIES[key] = caps
        return caps

    async def acapabilities(self) -> BrevCapabilities:
        """Async variant of :attr:`capabilities` (probed in a thread, once per process)."""
        await self.aconfig()
        return await asyncio.to_thread(lambda: self.capabilities)

    # ------------------------------------------------------------------ login
    def _credentials_match(self) -> bool:
        path = self._home() / ".brev" / "credentials.json"
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        config = self.config
        if config.api_key:
            return stored.get("api_key") == config.api_key and stored.get("api_key_org_id") == config.org_id
        return bool(config.token) and config.token in (
            stored.get("access_token"),
            stored.get("refresh_token"),
        )

    def _login_stamp(self) -> Path:
        return self._home() / ".brev" / ".airflow-provider-brev-login.stamp"

    def _last_login(self) -> float:
        """When a task of this provider last logged in with this HOME (the CLI itself never writes this file)."""
        try:
            return float(self._login_stamp().read_text().strip() or 0)
        except (OSError, ValueError):
            return 0.0

    def _ensure_logged_in(self, *, force: bool = False, failed_since: float | None = None) -> None:
        """Log in headlessly once per process (or again after the CLI reported "logged out")."""
        argv = login_args(self.config)
        if argv is None:
            return  # no secret configured: rely on a session the worker already has
        key = (str(self._home()), self.config.secret_fingerprint)
        with _CACHE_LOCK:
            if not force and key in _LOGGED_IN:
                return
        with _file_lock(self._home() / ".brev" / ".airflow-provider-brev-login.lock"):
            if not force and self._credentials_match():
                with _CACHE_LOCK:
                    _LOGGED_IN.add(key)
                return
            if force and failed_since is not None and self._last_login() > failed_since:
                return  # another task logged in after our call failed: just retry
            self.log.info("Logging in to Brev (brev login --%s ***).", "api-key" if self.config.api_key else "token")
            brev_dir = self._home() / ".brev"
            with scratch_home(brev_dir) as scratch:
                env = login_environment(self._env(), home=str(scratch))
                result = run_process([self.cli_path, *argv], env=env, timeout=LOGIN_TIMEOUT)
                self._transcribe(argv, result)
                if result.timed_out:
                    raise BrevTimeoutError(
                        f"`brev login` did not finish within {LOGIN_TIMEOUT:.0f} s.", command="login"
                    )
                if result.exit_code != 0:  # the session in brev_dir is untouched
                    raise login_failure(result.exit_code, result.stdout, result.stderr)
                adopt_login(scratch, brev_dir)
            self._login_stamp().write_text(f"{time.time():.6f}")
        with _CACHE_LOCK:
            _LOGGED_IN.add(key)

    def _login_step(self, step: EnsureLogin) -> None:
        if step.force:
            self.log.warning("The brev CLI reports it is logged out (token expired?): logging in again once.")
        self._ensure_logged_in(force=step.force, failed_since=step.failed_since)

    # ------------------------------------------------------------------ running the CLI
    def _log_line(self, prefix: str) -> LineCallback | None:
        if not self.log_cli_output:
            return None
        # The CLI's own chatter (create's progress, copy's confirmations) is DEBUG: the hook logs what happened
        # at INFO, and a failure's error carries the CLI's error text.
        return lambda line: self.log.debug("[%s] %s", prefix, line) if line else None

    def _retry_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "stop": tenacity.stop_after_attempt(self.retry_limit),
            "wait": tenacity.wait_exponential_jitter(initial=self.retry_delay, max=30, jitter=self.retry_delay),
            "reraise": True,
        }
        kwargs.update(self.retry_args)
        # Nothing is retried once the task's calls were stopped (on_kill): a retry would start work after the kill.
        kwargs["retry"] = tenacity.retry_if_exception(lambda exc: retry_policy(exc) == "hook" and not self._stopped)
        kwargs["before_sleep"] = self._log_retry
        return kwargs

    def _retrying(self) -> tenacity.Retrying:
        return tenacity.Retrying(**self._retry_kwargs())

    def _aretrying(self) -> tenacity.AsyncRetrying:
        return tenacity.AsyncRetrying(**self._retry_kwargs())

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        self.log.warning(
            "Attempt %d/%d failed with a transient Brev error; retrying in %.1f s: %s",
            state.attempt_number,
            self.retry_limit,
            delay,
            error,
        )

    def _track(self, proc: subprocess.Popen[bytes]) -> None:
        self._running = [p for p in self._running if p.poll() is None]
        self._running.append(proc)

    def stop_running(self, grace_seconds: float = 1.0) -> int:
        """Stop every ``brev`` process this hook started that still runs (their whole process groups: the CLI
        and its ``ssh``); returns how many were running. For ``on_kill``: they run in their own sessions, so the
        task's own SIGKILL would not reach them.

        :param grace_seconds: seconds between SIGTERM and SIGKILL.
        """
        self._stopped = True
        alive = [proc for proc in self._running if proc.poll() is None]
        for proc in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for proc in alive:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        self._running = [proc for proc in self._running if proc.poll() is None]
        return len(alive)

    def retry_sync(self, func: Callable[[], Any]) -> Any:
        """Call ``func`` under the hook's retry policy (transient errors only, logged, with back-off)."""
        for retry_attempt in self._retrying():
            with retry_attempt:
                return func()
        raise AssertionError("unreachable")  # pragma: no cover

    async def retry_async(self, func: Callable[[], Any]) -> Any:
        """Async twin of :meth:`retry_sync` (``func`` returns an awaitable)."""
        async for retry_attempt in self._aretrying():
            with retry_attempt:
                return await func()
        raise AssertionError("unreachable")  # pragma: no cover

    def _transcribe(self, args: Sequence[str], result: ProcessResult, *, version: str | None = None) -> None:
        """Record a call in the transcript when ``make system-test`` asks for one (:mod:`.transcript`)."""
        secrets = (self.config.token, self.config.api_key)
        record_call(args, result, secrets=secrets, cli_version=lambda: version or self.capabilities.version_text)

    def _argv(self, args: Sequence[str]) -> list[str]:
        if args and args[0] == "login":
            raise BrevInvalidInputError("use the hook's login handling")  # keep the token off other argv
        return [self.cli_path, *args]

    def _protocol(
        self,
        args: Sequence[str],
        *,
        timeout: float,
        authenticated: bool,
        check: bool,
        output_view: OutputView | None,
    ) -> Invocation:
        return Invocation(
            args[0],
            timeout=timeout,
            authenticated=authenticated,
            can_login=login_args(self.config) is not None,
            check=check,
            view=output_view,
        )

    def _process_kwargs(
        self,
        args: Sequence[str],
        budget: float,
        capture: bool,
        log_output: bool | None,
        on_stdout: LineCallback | None,
        on_stderr: LineCallback | None,
    ) -> dict[str, Any]:
        """What both process drivers get for one call: environment, budget, capture and the line callbacks."""
        log = self.log_cli_output if log_output is None else log_output
        prefix = f"brev {args[0]}"
        out = on_stdout if on_stdout is not None else (None if capture or not log else self._log_line(prefix))
        err = on_stderr if on_stderr is not None else (self._log_line(prefix) if log else None)
        return {"env": self._env(), "timeout": budget, "capture_stdout": capture, "on_stdout": out, "on_stderr": err}

    def run_cli(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        capture: bool = False,
        authenticated: bool = True,
        retry: bool = True,
        log_output: bool | None = None,
        check: bool = True,
        on_stdout: LineCallback | None = None,
        on_stderr: LineCallback | None = None,
        output_view: OutputView | None = None,
    ) -> ProcessResult:
        """Run a ``brev`` sub-command (the sync driver over :class:`~airflow_provider_brev.core.protocol.invocation.Invocation`).

        :param args: the arguments after ``brev`` (never ``login``; the hook logs in itself).
        :param timeout: the call's budget (default ``command_timeout``).
        :param capture: keep the whole stdout (for ``--json`` output) instead of a tail.
        :param authenticated: log in first (``search``/``--version`` need no login).
        :param retry: retry transient failures (tenacity).
        :param log_output: stream output into the task log (default: the hook's ``log_cli_output``).
        :param check: raise the classified error on a non-zero exit.
        :param on_stdout: receive each stdout line (instead of the task log).
        :param on_stderr: receive each stderr line (instead of the task log).
        :param output_view: the part of the output the re-login decision and the classifier read (``exec``: not the
            remote output, see :func:`~airflow_provider_brev.core.protocol.invocation.exec_view`).
        """
        budget = timeout or self.command_timeout
        kwargs = self._process_kwargs(args, budget, capture, log_output, on_stdout, on_stderr)
        version = self.capabilities.version if args[0] == "exec" else None

        def perform(call: Call) -> ProcessResult | None:
            if isinstance(call, EnsureLogin):
                self._login_step(call)
                return None
            announcement = AgentAnnouncement() if announces_agent(args[0], version) else None
            result = run_process(self._argv(args), on_start=self._track, announcement=announcement, **kwargs)
            self._transcribe(args, result)
            return result

        def attempt() -> ProcessResult:
            machine = self._protocol(
                args, timeout=budget, authenticated=authenticated, check=check, output_view=output_view
            )
            return drive(machine, perform)

        return self.retry_sync(attempt) if retry else attempt()

    async def arun_cli(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        capture: bool = False,
        authenticated: bool = True,
        retry: bool = True,
        log_output: bool | None = None,
        check: bool = True,
        on_stdout: LineCallback | None = None,
        on_stderr: LineCallback | None = None,
        output_view: OutputView | None = None,
    ) -> ProcessResult:
        """Async driver of the same protocol as :meth:`run_cli` (same parameters, same decisions)."""
        await self.aconfig()
        budget = timeout or self.command_timeout
        kwargs = self._process_kwargs(args, budget, capture, log_output, on_stdout, on_stderr)
        version = (await self.acapabilities()).version if args[0] == "exec" else None

        async def perform(call: Call) -> ProcessResult | None:
            if isinstance(call, EnsureLogin):
                await asyncio.to_thread(self._login_step, call)
                return None
            announcement = AgentAnnouncement() if announces_agent(args[0], version) else None
            slots = loop_process_slots(triggerer_max_processes())  # shared by every trigger in this loop
            result = await arun_process(self._argv(args), announcement=announcement, slots=slots, **kwargs)
            self._transcribe(args, result)
            return result

        async def attempt() -> ProcessResult:
            machine = self._protocol(
                args, timeout=budget, authenticated=authenticated, check=check, output_view=output_view
            )
            return await adrive(machine, perform)

        return await (self.retry_async(attempt) if retry else attempt())  # type: ignore[no-any-return]


def _reset_process_caches() -> None:
    """Forget capabilities and logins learned by this process (tests, CLI upgrades)."""
    with _CACHE_LOCK:
        _CAPABILITIES.clear()
        _LOGGED_IN.clear()
        _DIRECT_SSH_UNREACHABLE.clear()
