"""BrevHook: the only code in this provider that runs the ``brev`` CLI.

It absorbs the CLI's sharp edges (reference/brev-cli.md): stdin is always ``/dev/null``; every call runs in its
own process group with a timeout; output is streamed line by line into the task log; the hook logs in
headlessly before the first authenticated call (serialised by a file lock, because parallel tasks share
``~/.brev/credentials.json``) and logs in again once when the CLI takes its "logged out" path; transient
failures are retried with tenacity (one retryable predicate, every attempt logged, exponential backoff with
jitter); everything else becomes a typed :mod:`~airflow_provider_brev.exceptions` error carrying the CLI's
own message.

The token is registered with Airflow's secrets masker and is passed on exactly one command line:
``brev login --token <token>`` (the CLI has no other way to receive it). No other invocation carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tenacity

from airflow_provider_brev._compat import AirflowNotFoundException, BaseHook, mask_secret
from airflow_provider_brev.cli.names import DEFAULT_OWNER_PREFIX, validate_instance_name
from airflow_provider_brev.cli.output import (
    STATUS_DELETING,
    STATUS_FAILURE,
    BrevInstance,
    InstanceTypeOffer,
    classify_failure,
    is_logged_out,
    parse_create_wait_failure,
    parse_gpu_spec,
    parse_help_flags,
    parse_instances,
    parse_search,
    parse_version,
    select_offers,
)
from airflow_provider_brev.cli.readiness import (
    STAGE_SSH,
    Readiness,
    build_probe_command,
    new_nonce,
    probe_passed,
    probe_readiness,
    readiness_from_status,
)
from airflow_provider_brev.cli.remote_job import (
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
from airflow_provider_brev.cli.shell import (
    STARTED_ELSEWHERE,
    build_once_command,
    parse_once_marker,
    strip_once_stdout,
    validate_env,
)
from airflow_provider_brev.exceptions import (
    BREV_DOCS_URL,
    BrevAuthError,
    BrevCLIError,
    BrevCLINotFoundError,
    BrevConfigurationError,
    BrevConnectionLostError,
    BrevDuplicateNameError,
    BrevError,
    BrevInstanceFailedError,
    BrevInstanceNotFoundError,
    BrevInvalidInputError,
    BrevNoMatchingTypeError,
    BrevTimeoutError,
    BrevTransientError,
)
from airflow_provider_brev.hooks.process import (
    LineCallback,
    ProcessResult,
    arun_process,
    run_process,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["BrevCapabilities", "BrevConnectionConfig", "BrevHook", "BrevInstance", "CommandResult"]

#: Default budget of one short CLI call (ls, delete, search ...).
DEFAULT_CLI_TIMEOUT = 120.0
#: Default budget of ``brev create`` (it may try several instance types).
DEFAULT_CREATE_TIMEOUT = 600.0
#: Default budget of a foreground ``run_command``: the first exec on a new instance takes the slow path.
DEFAULT_EXEC_TIMEOUT = 3600.0
#: Budget of one readiness probe (a first exec refreshes and waits for sshd: allow the cold path).
DEFAULT_PROBE_TIMEOUT = 120.0
LOGIN_TIMEOUT = 60.0
OUTPUT_TAIL_LINES = 100
_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


@dataclass(frozen=True)
class CommandResult:
    """The outcome of :meth:`BrevHook.run_command`.

    :param exit_code: the remote command's real exit code.
    :param output: the last lines of its stdout (the full output went to the task log).
    """

    exit_code: int
    output: str = ""

    @property
    def last_line(self) -> str:
        lines = [line for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else ""


@dataclass(frozen=True)
class BrevConnectionConfig:
    """Everything the hook reads from the Airflow connection (or ``BREV_API_TOKEN``)."""

    conn_id: str | None
    token: str | None = None
    api_key: str | None = None
    org_id: str | None = None
    org: str | None = None
    cli_path: str | None = None
    cloud_cred_id: str | None = None
    workspace_group_id: str | None = None
    brev_home: str | None = None
    name_prefix: str = DEFAULT_OWNER_PREFIX

    @property
    def secret_fingerprint(self) -> str:
        secret = self.api_key or self.token or ""
        return hashlib.sha256(secret.encode()).hexdigest()[:16] if secret else ""

    @classmethod
    def from_extras(cls, conn_id: str | None, password: str | None, extras: dict[str, Any]) -> BrevConnectionConfig:
        def extra(key: str) -> str | None:
            value = extras.get(key, extras.get(f"extra__brev__{key}"))
            return str(value).strip() if value not in (None, "") else None

        return cls(
            conn_id=conn_id,
            token=(password or "").strip() or extra("token"),
            api_key=extra("api_key"),
            org_id=extra("org_id"),
            org=extra("org"),
            cli_path=extra("cli_path"),
            cloud_cred_id=extra("cloud_cred_id"),
            workspace_group_id=extra("workspace_group_id"),
            brev_home=extra("brev_home"),
            name_prefix=extra("name_prefix") or DEFAULT_OWNER_PREFIX,
        )


@dataclass(frozen=True)
class BrevCapabilities:
    """What the installed CLI supports, learned once per process (``--version`` and ``create --help``)."""

    version: tuple[int, int, int] | None
    version_text: str
    create_flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def accepts_gpu_spec(self) -> bool:
        return "gpu" in self.create_flags

    @property
    def accepts_cloud_cred_id(self) -> bool:
        return "cloud-cred-id" in self.create_flags

    @property
    def accepts_workspace_group_id(self) -> bool:
        return "workspace-group-id" in self.create_flags

    @property
    def has_json_listing(self) -> bool:
        return self.version is None or self.version >= (0, 6, 317)


# Per-process caches shared by every hook instance (a worker runs many tasks; probing once is enough).
_CAPABILITIES: dict[tuple[str, float], BrevCapabilities] = {}
_LOGGED_IN: set[tuple[str, str]] = set()
_CACHE_LOCK = threading.Lock()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class BrevHook(BaseHook):
    """Interact with NVIDIA Brev through the ``brev`` CLI.

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
    """

    conn_name_attr = "brev_conn_id"
    default_conn_name = "brev_default"
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

    # ------------------------------------------------------------------ connection form (Airflow < 3.2)
    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Hide host/schema/port/login; the password holds the Brev token."""
        return {
            "hidden_fields": ["host", "schema", "port", "login"],
            "relabeling": {"password": "Brev API token"},
            "placeholders": {
                "password": "token from https://brev.nvidia.com/settings/cli (or leave empty and use an API key)",
                "extra": json.dumps(
                    {"cli_path": "/usr/local/bin/brev", "cloud_cred_id": "", "workspace_group_id": ""},
                    indent=1,
                ),
            },
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Extra fields for the connection form (FAB/wtforms imported lazily)."""
        try:
            from flask_appbuilder.fieldwidgets import BS3PasswordFieldWidget, BS3TextFieldWidget
            from flask_babel import lazy_gettext
            from wtforms import PasswordField, StringField
        except ImportError:  # Airflow 3.2+ reads the declarative form from get_provider_info()
            return {}
        return {
            "api_key": PasswordField(lazy_gettext("API key (bak-...)"), widget=BS3PasswordFieldWidget()),
            "org_id": StringField(lazy_gettext("Org id (for the API key)"), widget=BS3TextFieldWidget()),
            "org": StringField(lazy_gettext("Org name"), widget=BS3TextFieldWidget()),
            "cli_path": StringField(lazy_gettext("brev CLI path"), widget=BS3TextFieldWidget()),
            "cloud_cred_id": StringField(lazy_gettext("Cloud credential id"), widget=BS3TextFieldWidget()),
            "workspace_group_id": StringField(lazy_gettext("Workspace group id"), widget=BS3TextFieldWidget()),
        }

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
                raise BrevConfigurationError(
                    f"The Airflow connection {self.brev_conn_id!r} is not defined. Create a connection of type "
                    "'brev' with the Brev API token in the password field (UI, `airflow connections add`, or "
                    f'AIRFLOW_CONN_{str(self.brev_conn_id).upper()}=\'{{"conn_type": "brev", "password": '
                    '"<token>"}\'), or, for the default connection only, set BREV_API_TOKEN.'
                )
            self.log.info("No connection %r defined: using BREV_API_TOKEN from the environment.", self.brev_conn_id)
            config = BrevConnectionConfig(conn_id=None, token=env_token)
        else:
            extras = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
            config = BrevConnectionConfig.from_extras(conn.conn_id, conn.password, extras)
        mask_secret(config.token)
        mask_secret(config.api_key)
        if config.api_key and not config.api_key.startswith("bak-"):
            raise BrevConfigurationError("The Brev API key (extra 'api_key') must start with 'bak-'.")
        if config.api_key and not config.org_id:
            raise BrevConfigurationError("API-key login needs the org id: set the connection extra 'org_id'.")
        return config

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
        env = dict(os.environ)
        env.pop("BREV_API_TOKEN", None)  # the CLI does not read it; keep it out of brev's environment
        if self.config.brev_home:
            env["HOME"] = self.config.brev_home
        env.setdefault("NO_COLOR", "1")
        return env

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
        if cached is not None:
            return cached
        version_run = run_process([path, "--version"], env=self._env(), timeout=30, capture_stdout=True)
        version_text = (version_run.stdout + "\n" + version_run.stderr).strip()
        help_run = run_process([path, "create", "--help"], env=self._env(), timeout=30, capture_stdout=True)
        caps = BrevCapabilities(
            version=parse_version(version_text),
            version_text=version_text.splitlines()[0] if version_text else "unknown",
            create_flags=parse_help_flags(help_run.stdout + "\n" + help_run.stderr),
        )
        self.log.info(
            "brev CLI %s at %s; create flags: %s",
            caps.version_text,
            path,
            ", ".join(sorted(caps.create_flags)),
        )
        with _CACHE_LOCK:
            _CAPABILITIES[key] = caps
        return caps

    # ------------------------------------------------------------------ login
    def _login_argv(self) -> list[str] | None:
        config = self.config
        if config.api_key:
            return ["login", "--api-key", config.api_key, "--org-id", str(config.org_id)]
        if config.token:
            return ["login", "--token", config.token]
        return None

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

    def _credentials_mtime(self) -> float:
        try:
            return (self._home() / ".brev" / "credentials.json").stat().st_mtime
        except OSError:
            return 0.0

    def _ensure_logged_in(self, *, force: bool = False, failed_since: float | None = None) -> None:
        """Log in headlessly once per process (or again after the CLI reported "logged out")."""
        argv = self._login_argv()
        if argv is None:
            return  # no secret configured: rely on a session the worker already has
        key = (str(self._home()), self.config.secret_fingerprint)
        if not force and key in _LOGGED_IN:
            return
        with _file_lock(self._home() / ".brev" / ".airflow-provider-brev-login.lock"):
            if not force and self._credentials_match():
                _LOGGED_IN.add(key)
                return
            if force and failed_since is not None and self._credentials_mtime() > failed_since:
                return  # another task logged in after our call failed: just retry
            self.log.info("Logging in to Brev (brev login --%s ***).", "api-key" if self.config.api_key else "token")
            result = run_process([self.cli_path, *argv], env=self._env(), timeout=LOGIN_TIMEOUT)
            if result.timed_out:
                raise BrevTimeoutError(f"`brev login` did not finish within {LOGIN_TIMEOUT:.0f} s.", command="login")
            if result.exit_code != 0:
                failure = classify_failure("login", result.exit_code, result.stdout, result.stderr)
                if isinstance(failure, BrevTransientError) and not is_logged_out(result.stdout, result.stderr):
                    raise failure  # a 5xx / network trouble: the caller's retry loop tries again
                raise BrevAuthError(
                    "Brev rejected the login: the token (connection password / extra 'token' / BREV_API_TOKEN) "
                    "or API key is invalid or expired. Console tokens expire about hourly; create a new one "
                    "at https://brev.nvidia.com/settings/cli or use an API key (extras api_key + org_id).",
                    cli_message=result.stderr or result.stdout,
                    command="login",
                )
        _LOGGED_IN.add(key)

    # ------------------------------------------------------------------ running the CLI
    def _log_line(self, prefix: str) -> LineCallback | None:
        if not self.log_cli_output:
            return None
        return lambda line: self.log.info("[%s] %s", prefix, line) if line else None

    def _retrying(self) -> tenacity.Retrying:
        return tenacity.Retrying(**self._retry_kwargs())

    def _aretrying(self) -> tenacity.AsyncRetrying:
        return tenacity.AsyncRetrying(**self._retry_kwargs())

    def _retry_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "stop": tenacity.stop_after_attempt(self.retry_limit),
            "wait": tenacity.wait_exponential_jitter(initial=self.retry_delay, max=30, jitter=self.retry_delay),
            "reraise": True,
        }
        kwargs.update(self.retry_args)
        kwargs["retry"] = tenacity.retry_if_exception(self._retryable_error)
        kwargs["before_sleep"] = self._log_retry
        return kwargs

    @staticmethod
    def _retryable_error(exception: BaseException) -> bool:
        """The one retry predicate: only transient CLI failures (5xx, connection trouble, "please retry")."""
        return isinstance(exception, BrevTransientError)

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

    def _argv(self, args: Sequence[str]) -> list[str]:
        if args and args[0] == "login":
            raise BrevInvalidInputError("use the hook's login handling")  # keep the token off other argv
        return [self.cli_path, *args]

    def _invoke(
        self,
        args: Sequence[str],
        *,
        timeout: float | None,
        capture: bool = False,
        authenticated: bool = True,
        on_stdout: LineCallback | None = None,
        on_stderr: LineCallback | None = None,
        needs_relogin: Callable[[ProcessResult], bool] | None = None,
    ) -> ProcessResult:
        """Run ``brev args`` once (plus one re-login round); raise only on timeout."""
        if authenticated:
            self._ensure_logged_in()
        check = needs_relogin or (lambda r: r.exit_code != 0 and is_logged_out(r.stdout, r.stderr))
        for round_ in range(2):
            started = time.time()
            result = run_process(
                self._argv(args),
                env=self._env(),
                timeout=timeout,
                capture_stdout=capture,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
            )
            if result.timed_out:
                raise BrevTimeoutError(f"`brev {args[0]}` did not finish within {timeout:.0f} s.", command=args[0])
            if authenticated and round_ == 0 and self._login_argv() and check(result):
                self.log.warning("The brev CLI reports it is logged out (token expired?): logging in again once.")
                self._ensure_logged_in(force=True, failed_since=started)
                continue
            return result
        return result

    def run_cli(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        capture: bool = False,
        authenticated: bool = True,
        retry: bool = True,
        log_output: bool | None = None,
    ) -> ProcessResult:
        """Run a ``brev`` sub-command, retrying transient failures; raise a typed error on failure.

        :param args: the arguments after ``brev`` (never ``login``; the hook logs in itself).
        :param capture: keep the whole stdout (for ``--json`` output) instead of a tail.
        :param authenticated: log in first (``search``/``--version`` need no login).
        """
        log = self.log_cli_output if log_output is None else log_output
        prefix = f"brev {args[0]}"

        def attempt() -> ProcessResult:
            result = self._invoke(
                args,
                timeout=timeout or self.command_timeout,
                capture=capture,
                authenticated=authenticated,
                on_stdout=None if capture or not log else self._log_line(prefix),
                on_stderr=self._log_line(prefix) if log else None,
            )
            if result.exit_code != 0:
                raise classify_failure(args[0], result.exit_code, result.stdout, result.stderr)
            return result

        if not retry:
            return attempt()
        for retry_attempt in self._retrying():
            with retry_attempt:
                return attempt()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ainvoke(
        self,
        args: Sequence[str],
        *,
        timeout: float | None,
        capture: bool = False,
        on_stdout: LineCallback | None = None,
        on_stderr: LineCallback | None = None,
    ) -> ProcessResult:
        await self.aconfig()
        await asyncio.to_thread(self._ensure_logged_in)
        for round_ in range(2):
            started = time.time()
            result = await arun_process(
                self._argv(args),
                env=self._env(),
                timeout=timeout,
                capture_stdout=capture,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
            )
            if result.timed_out:
                raise BrevTimeoutError(f"`brev {args[0]}` did not finish within {timeout:.0f} s.", command=args[0])
            if (
                round_ == 0
                and self._login_argv()
                and result.exit_code != 0
                and is_logged_out(result.stdout, result.stderr)
            ):
                self.log.warning("The brev CLI reports it is logged out: logging in again once.")
                await asyncio.to_thread(self._ensure_logged_in, force=True, failed_since=started)
                continue
            return result
        return result

    async def arun_cli(
        self, args: Sequence[str], *, timeout: float | None = None, capture: bool = False
    ) -> ProcessResult:
        """Async twin of :meth:`run_cli` for triggers (same parsers, classifier and retry predicate)."""

        async def attempt() -> ProcessResult:
            result = await self._ainvoke(args, timeout=timeout or self.command_timeout, capture=capture)
            if result.exit_code != 0:
                raise classify_failure(args[0], result.exit_code, result.stdout, result.stderr)
            return result

        async for retry_attempt in self._aretrying():
            with retry_attempt:
                return await attempt()
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ instances
    def _ls_args(self) -> list[str]:
        args = ["ls", "--json"]
        if self.config.org and not self.config.api_key:
            args += ["--org", self.config.org]
        return args

    def list_instances(self) -> list[BrevInstance]:
        """Instances visible to this token (``brev ls --json``, any of its shapes)."""
        if not self.capabilities.has_json_listing:
            raise BrevCLIError(
                f"The installed brev CLI ({self.capabilities.version_text}) has no `ls --json`; "
                "upgrade to v0.6.317 or newer."
            )
        return parse_instances(self.run_cli(self._ls_args(), capture=True).stdout)

    async def alist_instances(self) -> list[BrevInstance]:
        await self.aconfig()
        return parse_instances((await self.arun_cli(self._ls_args(), capture=True)).stdout)

    def get_instance(self, name: str) -> BrevInstance | None:
        """The instance called ``name`` (or with that id), or ``None``."""
        return _find(self.list_instances(), name)

    async def aget_instance(self, name: str) -> BrevInstance | None:
        return _find(await self.alist_instances(), name)

    def search_instance_types(
        self, *, gpu_name: str | None = None, min_vram: float | None = None, include_cpu: bool = False
    ) -> list[InstanceTypeOffer]:
        """Instance types from ``brev search --json`` (no login needed), cheapest first."""
        args = ["search"]
        if include_cpu:
            args.append("cpu")
        if gpu_name:
            args += ["--gpu-name", gpu_name]
        if min_vram:
            args += ["--min-vram", f"{min_vram:g}"]
        args.append("--json")
        offers = parse_search(self.run_cli(args, capture=True, authenticated=False).stdout)
        return sorted(offers, key=lambda o: (o.price_per_hour, o.type))

    def resolve_instance_types(
        self,
        *,
        gpu: str | None = None,
        instance_types: Sequence[str] | None = None,
        min_vram: float | None = None,
    ) -> list[str]:
        """Check a request against the catalog before anything is created; return candidate types.

        ``gpu="L40S:1"`` becomes the matching types, cheapest first. Unknown GPUs or instance types raise
        :class:`BrevNoMatchingTypeError` naming what is available.
        """
        if gpu and instance_types:
            raise BrevInvalidInputError(
                "Pass either gpu (e.g. 'L40S:1') or instance_types (e.g. ['g6e.xlarge']), not both."
            )
        if instance_types is not None and isinstance(instance_types, str):
            instance_types = [t.strip() for t in instance_types.split(",") if t.strip()]
        if gpu:
            spec = parse_gpu_spec(gpu)
            offers = self.search_instance_types(gpu_name=spec.name)
            chosen = select_offers(offers, spec, min_vram=min_vram)
            if not chosen:
                every = self.search_instance_types(include_cpu=False)
                available = sorted({f"{o.gpu_name}:{o.gpu_count}" for o in every})
                raise BrevNoMatchingTypeError(
                    f"No Brev instance type offers {spec.count}x {spec.name}"
                    + (f" with ≥ {min_vram:g} GB per GPU" if min_vram else "")
                    + f". Available GPU shapes: {', '.join(available) or 'none'} (see `brev search`)."
                )
            return [offer.type for offer in chosen]
        if instance_types:
            bad = [t for t in instance_types if not _TYPE_RE.match(t)]
            if bad:
                raise BrevInvalidInputError(f"Invalid instance type name(s): {', '.join(map(repr, bad))}.")
            known = {o.type for o in self.search_instance_types()} | {
                o.type for o in self.search_instance_types(include_cpu=True)
            }
            unknown = [t for t in instance_types if t not in known]
            if unknown:
                raise BrevNoMatchingTypeError(
                    f"Unknown Brev instance type(s): {', '.join(unknown)}. See `brev search` for valid types."
                )
            return list(instance_types)
        return []

    def create_instance(
        self,
        name: str,
        *,
        gpu: str | None = None,
        instance_types: Sequence[str] | None = None,
        min_vram: float | None = None,
        cloud_cred_id: str | None = None,
        workspace_group_id: str | None = None,
        wait: bool = False,
        timeout: float = DEFAULT_CREATE_TIMEOUT,
    ) -> BrevInstance:
        """Create instance ``name`` and return it as listed right after ``brev create`` returns.

        ``brev create`` exits 0 even when the instance FAILED or its own wait timed out, so the status is
        read afterwards and a FAILURE raises :class:`BrevInstanceFailedError`. By default the CLI does not
        wait (``--detached``): readiness is layered and handled by :meth:`wait_until_ready` / the sensor.

        :param gpu: ``"L40S:1"``. With the released CLI it is resolved through ``brev search`` into a
            cheapest-first ``--type`` list (Brev then chooses placement); CLIs with ``--gpu`` get it directly.
        :param instance_types: explicit fallback list of types (``--type a,b,c``).
        :param min_vram: minimum VRAM per GPU in GB.
        :param cloud_cred_id: placement id, passed only where the CLI accepts it (default: connection extra).
        :param workspace_group_id: placement id, likewise.
        :param wait: let the CLI wait for RUNNING (``--timeout``) instead of ``--detached``.
        """
        validate_instance_name(name)
        caps = self.capabilities
        types = self.resolve_instance_types(gpu=gpu, instance_types=instance_types, min_vram=min_vram)
        args = ["create", name]
        if gpu and caps.accepts_gpu_spec:
            args += ["--gpu", str(parse_gpu_spec(gpu))]
        elif types:
            args += ["--type", ",".join(types)]
            if gpu:
                self.log.info(
                    "gpu=%s resolved through `brev search` to instance types (cheapest first): %s. "
                    "The installed brev CLI has no placement flags, so Brev chooses placement itself.",
                    gpu,
                    ", ".join(types),
                )
        if min_vram and not gpu:
            args += ["--min-vram", f"{min_vram:g}"]
        args += self._placement_args(caps, cloud_cred_id, workspace_group_id)
        args += ["--timeout", f"{int(timeout)}"] if wait else ["--detached"]

        transient_seen = False
        for retry_attempt in self._retrying():
            with retry_attempt:
                try:
                    result = self.run_cli(args, timeout=timeout + 60, retry=False)
                except BrevTransientError:
                    transient_seen = True
                    raise
                except BrevDuplicateNameError as err:
                    existing = self.get_instance(name)
                    if transient_seen and existing is not None and existing.status != STATUS_DELETING:
                        # Our earlier attempt's request reached Brev although its answer was lost.
                        self.log.info("Instance %s was created by an earlier attempt of this call.", name)
                        result = ProcessResult(exit_code=0)
                    else:
                        state = f" (currently {existing.status})" if existing else ""
                        raise BrevDuplicateNameError(
                            f"An instance named {name!r} already exists{state}. "
                            + (
                                "It is being deleted and Brev keeps the name reserved until it is gone: "
                                "wait for the deletion to finish or use another name."
                                if existing and existing.status == STATUS_DELETING
                                else "Use another name, delete it, or adopt it."
                            ),
                            cli_message=err.cli_message,
                            command="create",
                        ) from err
        failure = parse_create_wait_failure(result.stdout + "\n" + result.stderr, name)
        instance = self.get_instance(name)
        if instance is None:
            raise BrevCLIError(
                f"`brev create {name}` exited 0 but the instance is not listed by `brev ls`.",
                cli_message=result.stderr,
                command="create",
            )
        if instance.status == STATUS_FAILURE:
            raise BrevInstanceFailedError(
                f"Instance {name!r} was created but is in FAILURE" + (f": {failure}" if failure else "."),
                cli_message=failure,
                command="create",
            )
        if failure:
            self.log.warning("brev create reported: %s (status now %s)", failure, instance.status)
        self.log.info(
            "Created Brev instance %s (id %s, type %s): %s",
            name,
            instance.id,
            instance.instance_type,
            instance.status,
        )
        return instance

    def _placement_args(
        self, caps: BrevCapabilities, cloud_cred_id: str | None, workspace_group_id: str | None
    ) -> list[str]:
        args: list[str] = []
        for value, default, flag, accepted in (
            (cloud_cred_id, self.config.cloud_cred_id, "cloud-cred-id", caps.accepts_cloud_cred_id),
            (
                workspace_group_id,
                self.config.workspace_group_id,
                "workspace-group-id",
                caps.accepts_workspace_group_id,
            ),
        ):
            chosen = value or default
            if not chosen:
                continue
            if accepted:
                args += [f"--{flag}", chosen]
            else:
                self.log.warning(
                    "The installed brev CLI (%s) has no --%s flag: Brev chooses placement itself, %r is not used.",
                    caps.version_text,
                    flag,
                    chosen,
                )
        return args

    def delete_instance(
        self, name: str, *, wait: bool = False, timeout: float = 600.0, poll_interval: float = 1.0
    ) -> bool:
        """Delete ``name``; ``False`` when it was already gone (deleting twice is success).

        :param wait: also wait until the instance has disappeared from ``brev ls`` (deletion is asynchronous).
        """
        validate_instance_name(name)
        try:
            self.run_cli(["delete", name])
            deleted = True
            self.log.info("Deletion of Brev instance %s requested.", name)
        except BrevInstanceNotFoundError:
            deleted = False
            self.log.info("Brev instance %s does not exist (already deleted): nothing to do.", name)
        if wait:
            self.wait_until_gone(name, timeout=timeout, poll_interval=poll_interval)
        return deleted

    async def adelete_instance(self, name: str) -> bool:
        validate_instance_name(name)
        try:
            await self.arun_cli(["delete", name])
        except BrevInstanceNotFoundError:
            return False
        return True

    def wait_until_gone(self, name: str, *, timeout: float = 600.0, poll_interval: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            instance = self.get_instance(name)
            if instance is None:
                self.log.info("Brev instance %s is gone.", name)
                return
            if time.monotonic() >= deadline:
                raise BrevTimeoutError(f"Instance {name!r} was still {instance.status} after {timeout:.0f} s.")
            time.sleep(poll_interval)

    # ------------------------------------------------------------------ readiness
    def check_readiness(
        self, name: str, *, require_docker: bool = False, probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    ) -> Readiness:
        """One layered readiness check: cheap status first, the exec probe only when the status is good."""
        instance = self.get_instance(name)
        decided = readiness_from_status(name, instance)
        if decided is not None or instance is None:
            return decided  # type: ignore[return-value]
        nonce = new_nonce()
        try:
            result = self._invoke(
                ["exec", name, build_probe_command(nonce, require_docker=require_docker)],
                timeout=probe_timeout,
                on_stderr=None,
            )
        except BrevTimeoutError:
            return probe_readiness(name, instance, False, STAGE_SSH, "probe timed out")
        passed, stage = probe_passed(result.stdout_lines, nonce, require_docker=require_docker)
        return probe_readiness(name, instance, passed, stage, "" if passed else result.stderr[-300:])

    async def acheck_readiness(
        self, name: str, *, require_docker: bool = False, probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    ) -> Readiness:
        """Async twin of :meth:`check_readiness` for the trigger."""
        instance = await self.aget_instance(name)
        decided = readiness_from_status(name, instance)
        if decided is not None or instance is None:
            return decided  # type: ignore[return-value]
        nonce = new_nonce()
        try:
            result = await self._ainvoke(
                ["exec", name, build_probe_command(nonce, require_docker=require_docker)],
                timeout=probe_timeout,
            )
        except BrevTimeoutError:
            return probe_readiness(name, instance, False, STAGE_SSH, "probe timed out")
        passed, stage = probe_passed(result.stdout_lines, nonce, require_docker=require_docker)
        return probe_readiness(name, instance, passed, stage, "" if passed else result.stderr[-300:])

    def is_ready(self, name: str, *, require_docker: bool = False) -> bool:
        """Whether ``name`` is usable now (RUNNING, shell READY, exec probe answered)."""
        return self.check_readiness(name, require_docker=require_docker).ready

    def wait_until_ready(
        self,
        name: str,
        timeout: float = 900.0,
        *,
        poll_interval: float = 1.0,
        require_docker: bool = False,
    ) -> BrevInstance:
        """Block until ``name`` is ready; fail fast on FAILURE, DELETING or a vanished instance."""
        deadline = time.monotonic() + timeout
        last: Readiness | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrevTimeoutError(
                    f"Instance {name!r} was not ready after {timeout:.0f} s"
                    + (f" (last state: {last.message})" if last else ".")
                )
            readiness = self.check_readiness(
                name,
                require_docker=require_docker,
                probe_timeout=min(DEFAULT_PROBE_TIMEOUT, max(remaining, 1.0)),
            )
            if last is None or readiness.stage != last.stage:
                self.log.info("Readiness of %s: %s", name, readiness.message)
            last = readiness
            if readiness.ready:
                return _instance_from_readiness(name, readiness)
            if readiness.terminal:
                raise BrevInstanceFailedError(readiness.message)
            time.sleep(min(poll_interval, max(deadline - time.monotonic(), 0)))

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
        on_line: LineCallback | None = None,
    ) -> CommandResult:
        """Run ``command`` on instance ``name`` exactly once and return its real exit code.

        The command is wrapped (:func:`~airflow_provider_brev.cli.shell.build_once_command`) so the released
        CLI's re-run-on-failure cannot run it twice, the real exit code comes back, and the CLI's trailing
        instance-name line is stripped. Output streams into the task log as it is produced.

        :param timeout: overall budget in seconds (default one hour; the first exec on a new instance is slow).
        :param env: plain (non-secret) environment variables for the command; they are on the remote command
            line. Use :class:`~airflow_provider_brev.operators.brev.BrevExecOperator` ``secret_env`` for secrets.
        :param cwd: remote working directory.
        :param secret_env: secret environment variables: shipped in a 0600 file (``brev copy``) that the command
            sources and deletes; never on a command line, in a log or in the result.
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
            for value in secret_env.values():
                mask_secret(value)
            secret_path = f".airflow-brev-secret-{run_id}.env"
            self.write_file_to_instance(name, build_secret_env_file(secret_env), secret_path, mode=0o600)
        remote = build_once_command(
            command, run_id=run_id, marker=marker, env=env, cwd=cwd, secret_env_path=secret_path
        )
        budget = timeout or DEFAULT_EXEC_TIMEOUT
        deadline = time.monotonic() + budget
        tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)

        def emit(line: str) -> None:
            tail.append(line)
            if log_output:
                self.log.info("[%s] %s", name, line)
            if on_line is not None:
                on_line(line)

        def run_once() -> CommandResult:
            pending: deque[str] = deque()

            def on_stdout(line: str) -> None:
                pending.append(line)
                while len(pending) > 2:
                    emit(pending.popleft())

            def on_stderr(line: str) -> None:
                if marker not in line and log_output and line:
                    self.log.info("[%s stderr] %s", name, line)

            def needs_relogin(r: ProcessResult) -> bool:
                return (
                    r.exit_code != 0
                    and parse_once_marker(r.stderr_lines, marker) is None
                    and is_logged_out("\n".join(r.stdout_lines[-3:]), r.stderr)
                )

            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrevTimeoutError(f"Command on {name!r} did not finish within {budget:.0f} s.", command="exec")
            result = self._invoke(
                ["exec", name, remote],
                timeout=remaining,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
                needs_relogin=needs_relogin,
            )
            for line in strip_once_stdout(list(pending), name):
                emit(line)
            code = parse_once_marker(result.stderr_lines, marker)
            if isinstance(code, int):
                return CommandResult(exit_code=code, output="\n".join(tail))
            if code == STARTED_ELSEWHERE:
                raise BrevConnectionLostError(
                    f"The connection to {name!r} dropped while the command ran. It was started once and is "
                    "not run again; its outcome is unknown. Use BrevExecOperator (detached jobs) for long "
                    "work that must survive connection drops.",
                    cli_message=result.stderr,
                    command="exec",
                )
            raise classify_failure("exec", result.exit_code, "\n".join(result.stdout_lines[-5:]), result.stderr)

        for retry_attempt in self._retrying():
            with retry_attempt:
                return run_once()
        raise AssertionError("unreachable")  # pragma: no cover

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

    # ------------------------------------------------------------------ detached remote jobs
    def exec_script(self, name: str, script: str, *, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ProcessResult:
        """Run one of this provider's own always-exit-0 scripts and return its whole stdout.

        Only for scripts that report through markers (remote jobs, transfers): a non-zero CLI exit therefore
        means the CLI or the connection failed, and becomes a typed (usually transient) error.
        """
        validate_instance_name(name)
        result = self._invoke(["exec", name, script], timeout=timeout, capture=True)
        if result.exit_code != 0:
            raise classify_failure("exec", result.exit_code, "\n".join(result.stdout_lines[-5:]), result.stderr)
        return result

    async def aexec_script(self, name: str, script: str, *, timeout: float = DEFAULT_PROBE_TIMEOUT) -> ProcessResult:
        """Async twin of :meth:`exec_script`."""
        validate_instance_name(name)
        result = await self._ainvoke(["exec", name, script], timeout=timeout, capture=True)
        if result.exit_code != 0:
            raise classify_failure("exec", result.exit_code, "\n".join(result.stdout_lines[-5:]), result.stderr)
        return result

    def _retry_sync(self, func: Callable[[], Any]) -> Any:
        for retry_attempt in self._retrying():
            with retry_attempt:
                return func()
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _parse_or_lost(parse: Callable[[], Any], result: ProcessResult) -> Any:
        try:
            return parse()
        except ValueError as err:  # the output was cut: the connection dropped mid-answer
            raise BrevConnectionLostError(
                f"Incomplete answer from the instance ({err}).", cli_message=result.stderr, command="exec"
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
    ) -> LaunchResult:
        """Start ``command`` detached on ``name`` as ``job`` (at most once per job id).

        ``secret_env`` values travel in a 0600 file copied with ``brev copy``; the job sources and deletes it.
        They never appear on any command line, in logs or in the returned handle.
        """
        secret_path = None
        if secret_env:
            for value in secret_env.values():
                mask_secret(value)
            secret_path = f".airflow-brev-secret-{job.job_id}.env"
            self.write_file_to_instance(name, build_secret_env_file(secret_env), secret_path, mode=0o600)
        script = build_launch_command(job, command, env=env, cwd=cwd, secret_env_path=secret_path)
        try:
            result = self._retry_sync(lambda: self.exec_script(name, script, timeout=timeout))
        except BaseException:
            if secret_path:  # never leave a secret behind on the instance
                with contextlib.suppress(Exception):
                    self.exec_script(name, f"rm -f -- {secret_path}", timeout=30)
            raise
        launch = self._parse_or_lost(lambda: parse_launch_output(result.stdout_lines, job.job_id), result)
        if launch.error:
            raise BrevCLIError(f"Could not launch job {job.job_id} on {name!r}: {launch.error}", command="exec")
        return launch

    def poll_job(self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = DEFAULT_MAX_BYTES) -> PollResult:
        """Status and the next log chunk of ``job`` in one ``brev exec`` (transient failures retried)."""
        script = build_poll_command(job, offset=offset, max_bytes=max_bytes)

        def once() -> PollResult:
            result = self.exec_script(name, script)
            return self._parse_or_lost(lambda: parse_poll_output(result.stdout_lines, job.job_id, offset), result)

        return self._retry_sync(once)

    async def apoll_job(
        self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> PollResult:
        """Async twin of :meth:`poll_job`."""
        script = build_poll_command(job, offset=offset, max_bytes=max_bytes)
        async for retry_attempt in self._aretrying():
            with retry_attempt:
                answer = await self.aexec_script(name, script)
                lines = answer.stdout_lines
                return self._parse_or_lost(partial(parse_poll_output, lines, job.job_id, offset), answer)
        raise AssertionError("unreachable")  # pragma: no cover

    def kill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = 10, timeout: float = 60) -> str:
        """SIGTERM the job's process group, SIGKILL after ``grace_seconds``; returns what happened."""
        script = build_kill_command(job, grace_seconds=grace_seconds)
        result = self.exec_script(name, script, timeout=timeout)
        return str(self._parse_or_lost(lambda: parse_kill_output(result.stdout_lines, job.job_id), result))

    async def akill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = 10, timeout: float = 60) -> str:
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


def _find(instances: list[BrevInstance], name: str) -> BrevInstance | None:
    for instance in instances:
        if instance.name == name:
            return instance
    for instance in instances:
        if instance.id == name:
            return instance
    return None


def _instance_from_readiness(name: str, readiness: Readiness) -> BrevInstance:
    data = dict(readiness.instance or {"name": name, "id": "", "status": "RUNNING"})
    return BrevInstance(**data)


def _reset_process_caches() -> None:
    """Forget capabilities and logins learned by this process (tests, CLI upgrades)."""
    with _CACHE_LOCK:
        _CAPABILITIES.clear()
        _LOGGED_IN.clear()
