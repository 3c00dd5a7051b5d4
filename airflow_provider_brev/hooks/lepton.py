"""The only code that talks to DGX Cloud Lepton: the ``leptonai`` SDK's API client, its answers as typed errors.

:class:`LeptonHook` (connection type ``lepton``, default id ``lepton_default``): the workspace id in the login
field (or extra ``workspace_id``), the workspace token in the password (or extra ``token``), and optionally the
workspace API URL in the host field (or extra ``url``; default: the SDK's, derived from the workspace id), and
optionally the prices of the workspace's resource shapes for cost estimates (extra ``shape_prices``). The
client is built on first use, never at DAG-parse time; the SDK (``pip install 'airflow-provider-brev[lepton]'``) is
imported then. The token travels only in the SDK's ``Authorization`` header: it is registered with Airflow's
masker, the SDK's own logger is silenced, and no message, argv, XCom value or trigger payload carries it.

Every call maps a failed answer to the typed error of :func:`~airflow_provider_brev.core.lepton.errors.api_error`
(auth, resources unavailable, not found, rejected, transient) and retries the transient ones (tenacity, by
:func:`~airflow_provider_brev.exceptions.retry_policy`). The async methods (the triggerer's) run the same calls in a
thread: the SDK is synchronous (``requests``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import tenacity

from airflow_provider_brev._compat import BaseHook, mask_secret
from airflow_provider_brev.core.lepton.errors import api_error
from airflow_provider_brev.core.lepton.follower import NS, LeptonJobPoll, PollLeptonJob
from airflow_provider_brev.core.lepton.pricing import shape_prices
from airflow_provider_brev.exceptions import (
    BrevError,
    LeptonConfigurationError,
    LeptonNotFoundError,
    LeptonRejectedError,
    retry_policy,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.core.protocol.machine import Call

T = TypeVar("T")

#: Log entries read per call (the SDK's default ``limit``); a full answer means more wait.
LOG_LIMIT = 5000
#: Seconds one API call may take.
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class LeptonConnectionConfig:
    """A ``lepton`` connection's settings.

    :param conn_id: the connection id.
    :param workspace_id: the workspace.
    :param token: the workspace token (a secret).
    :param url: the workspace API URL (``None``: the SDK derives it from the workspace id).
    :param shape_prices: US dollars per hour by resource shape (extra ``shape_prices``): what a step's cost estimate
        uses when the step gives no price (:mod:`~airflow_provider_brev.core.lepton.pricing`).
    """

    conn_id: str | None
    workspace_id: str
    token: str
    url: str | None
    shape_prices: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:  # never the token
        return f"LeptonConnectionConfig(conn_id={self.conn_id!r}, workspace_id={self.workspace_id!r}, url={self.url!r})"


def _status_and_body(err: BaseException) -> tuple[int | None, str] | None:
    """The HTTP status and body of an SDK error, ``(None, reason)`` when no answer came, ``None`` when ``err`` is
    not an API failure."""
    response = getattr(err, "response", None)
    if response is not None and getattr(response, "status_code", None) is not None:
        return int(response.status_code), str(getattr(response, "text", "") or "")
    status = getattr(err, "status_code", None)  # the log API's LogAPIError
    if isinstance(status, int):
        return status, str(err)
    kind = type(err).__name__
    if kind == "WorkspaceUnauthorizedError":
        return 401, ""
    if kind == "WorkspaceForbiddenError":
        return 403, ""
    if kind == "WorkspaceNotFoundError":
        return 404, ""
    try:
        import requests
    except ImportError:  # pragma: no cover - requests comes with the SDK
        return None
    if isinstance(err, requests.RequestException):
        return None, type(err).__name__
    return None


class LeptonHook(BaseHook):
    """Lepton jobs, their logs and workspace secrets (see the module docstring).

    :param lepton_conn_id: the Airflow connection id (type ``lepton``).
    :param retry_limit: attempts of a call that fails transiently (at least 1).
    :param retry_delay: first back-off between attempts, in seconds (exponential, with jitter).
    :param timeout: seconds one API call may take.
    """

    conn_name_attr = "lepton_conn_id"
    default_conn_name = "lepton_default"
    conn_type = "lepton"
    hook_name = "NVIDIA DGX Cloud Lepton"

    def __init__(
        self,
        lepton_conn_id: str = default_conn_name,
        *,
        retry_limit: int = 4,
        retry_delay: float = 1.0,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__()
        self.lepton_conn_id = lepton_conn_id
        self.retry_limit = max(1, int(retry_limit))
        self.retry_delay = float(retry_delay)
        self.timeout = float(timeout)
        self._stopped = False

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Login = workspace id, password = workspace token, host = the workspace API URL (optional); from the
        provider metadata (:mod:`airflow_provider_brev.hooks.connection_form`)."""
        from airflow_provider_brev.hooks.connection_form import ui_field_behaviour

        return ui_field_behaviour(cls.conn_type)

    # -- configuration -----------------------------------------------------------------------------
    @cached_property
    def config(self) -> LeptonConnectionConfig:
        """The connection's settings (fetched once; the token registered with the masker)."""
        from airflow_provider_brev._compat import AirflowNotFoundException

        try:
            conn = self.get_connection(self.lepton_conn_id)
        except AirflowNotFoundException:
            conn = None
        return self._config_from(conn)

    async def aconfig(self) -> LeptonConnectionConfig:
        """Async variant of :attr:`config` for the triggerer (no sync connection lookup on its event loop)."""
        from airflow_provider_brev._compat import AirflowNotFoundException

        if "config" not in self.__dict__:
            getter = getattr(type(self), "aget_connection", None)
            try:
                if getter is not None:
                    conn = await getter(self.lepton_conn_id)
                else:
                    conn = await asyncio.to_thread(self.get_connection, self.lepton_conn_id)
            except AirflowNotFoundException:
                conn = None
            self.__dict__["config"] = self._config_from(conn)
        return self.config

    def _config_from(self, conn: Any | None) -> LeptonConnectionConfig:
        if conn is None:
            raise LeptonConfigurationError(
                f"The Airflow connection {self.lepton_conn_id!r} is not defined: create a connection of type "
                "'lepton' with the workspace id in the login and the workspace token in the password."
            )
        extras = getattr(conn, "extra_dejson", None) or {}
        workspace = str(conn.login or extras.get("workspace_id") or "").strip()
        token = str(conn.password or extras.get("token") or "").strip()
        url = str(conn.host or extras.get("url") or "").strip() or None
        mask_secret(token)
        if not workspace or not token:
            missing = " and ".join(what for what, value in (("workspace id", workspace), ("token", token)) if not value)
            raise LeptonConfigurationError(
                f"The lepton connection {self.lepton_conn_id!r} has no {missing}: put the workspace id in its login "
                "and the workspace token in its password."
            )
        if url and not url.startswith(("http://", "https://")):
            url = f"https://{url}"
        prices = shape_prices(
            f"the extra shape_prices of the lepton connection {self.lepton_conn_id!r}", extras.get("shape_prices")
        )
        return LeptonConnectionConfig(self.lepton_conn_id, workspace, token, url, prices)

    @cached_property
    def client(self) -> Any:
        """The SDK's ``APIClient`` of the workspace (built on first use)."""
        config = self.config
        try:
            from leptonai.api.v2.client import APIClient
            from loguru import logger
        except ImportError:
            raise LeptonConfigurationError(
                "The leptonai SDK is not installed: pip install 'airflow-provider-brev[lepton]'."
            ) from None
        logger.disable("leptonai")  # its trace lines show parts of the token
        client = APIClient(workspace_id=config.workspace_id, auth_token=config.token, url=config.url)
        client._timeout = self.timeout
        return client

    @property
    def workspace(self) -> str:
        return self.config.workspace_id

    # -- the call ----------------------------------------------------------------------------------
    def _call(self, what: str, call: Callable[[Any], T], *, quotable: bool = True) -> T:
        """Run ``call(client)``, mapping a failed answer to its typed error; transient ones are retried."""

        def attempt() -> T:
            try:
                return call(self.client)
            except BrevError:
                raise
            except (ValueError, TypeError) as err:  # the SDK's own checks (job name, env names) and pydantic
                said = f": {err}" if quotable else " (its message may quote the secret values, so it is not shown)"
                raise LeptonRejectedError(f"The Lepton SDK refused the request ({what}){said}") from None
            except Exception as err:
                answer = _status_and_body(err)
                if answer is None:
                    raise
                status, body = answer
                raise api_error(status, body, what=what, workspace=self.workspace, quotable=quotable) from None

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retry_limit),
            wait=tenacity.wait_exponential_jitter(initial=self.retry_delay, max=20, jitter=self.retry_delay),
            retry=tenacity.retry_if_exception(lambda exc: retry_policy(exc) == "hook" and not self._stopped),
            before_sleep=lambda state: self.log.warning(
                "Lepton call failed transiently (attempt %d/%d): %s",
                state.attempt_number,
                self.retry_limit,
                state.outcome.exception() if state.outcome else None,
            ),
            reraise=True,
        )
        return retrying(attempt)

    def stop_calls(self) -> None:
        """No call is retried from now on (``on_kill``)."""
        self._stopped = True

    # -- jobs --------------------------------------------------------------------------------------
    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        """Submit a job (``POST /jobs``; ``body`` as :meth:`~airflow_provider_brev.core.lepton.spec.LeptonJobSpec.body`
        builds it); returns the job as created. Raises
        :class:`~airflow_provider_brev.exceptions.LeptonJobExistsError` when a job of that name exists."""
        name = str(body["metadata"]["id"])

        def create(client: Any) -> dict[str, Any]:
            from leptonai.api.v2.types.job import LeptonJob

            return _dump(client.job.create(LeptonJob(**body)))

        return self._call(f"create job {name}", create)

    def get_job(self, name: str) -> dict[str, Any] | None:
        """The job (``GET /jobs/<name>``, archived ones too), or ``None`` when there is none."""
        try:
            return self._call(f"get job {name}", lambda client: _dump(client.job.get(name)))
        except LeptonNotFoundError:
            return None

    def stop_job(self, name: str) -> bool:
        """Stop the job (``PATCH /jobs/<name>`` ``spec.stopped``); ``False`` when there is none."""
        try:
            self._call(f"stop job {name}", lambda client: client.job.update(name, spec={"spec": {"stopped": True}}))
        except LeptonNotFoundError:
            return False
        return True

    def delete_job(self, name: str) -> bool:
        """Delete the job (``DELETE /jobs/<name>``); ``False`` when there was none."""
        try:
            self._call(f"delete job {name}", lambda client: client.job.delete(name))
        except LeptonNotFoundError:
            return False
        return True

    def read_log(self, name: str, since_ns: int, *, limit: int = LOG_LIMIT) -> tuple[list[tuple[int, str]], bool]:
        """The job's log entries ``(timestamp_ns, line)`` from ``since_ns`` on, oldest first, and whether that was
        all of them (fewer than ``limit``)."""
        start = max(int(since_ns), 1)
        end = max(time.time_ns() + 60 * NS, start + 1)

        def read(client: Any) -> Any:
            return client.log.get_log(
                name_or_job=name, start=str(start), end=str(end), limit=limit, direction="forward"
            )

        try:
            answer = self._call(f"read the log of job {name}", read)
        except LeptonNotFoundError:
            return [], True
        entries: list[tuple[int, str]] = []
        for stream in ((answer or {}).get("data") or {}).get("result") or []:
            for value in stream.get("values") or []:
                entries.append((int(value[0]), str(value[1])))
        entries.sort(key=lambda entry: entry[0])
        return entries, len(entries) < limit

    def poll_job(self, name: str, since_ns: int) -> LeptonJobPoll:
        """The job and its log from ``since_ns`` on (the job first: an ended job's log is then complete)."""
        job = self.get_job(name)
        entries, complete = self.read_log(name, since_ns)
        return LeptonJobPoll(job, entries, complete)

    # -- secrets -----------------------------------------------------------------------------------
    def create_secret(self, name: str, value: str) -> None:
        """Create (or replace) a workspace secret; the value is never quoted in an error."""

        def create(client: Any) -> Any:
            from leptonai.api.v2.types.secret import SecretItem

            return client.secret.create([SecretItem(name=name, value=value)])

        self._call(f"create secret {name}", create, quotable=False)

    def delete_secret(self, name: str) -> bool:
        """Delete a workspace secret; ``False`` when there was none."""
        try:
            self._call(f"delete secret {name}", lambda client: client.secret.delete(name))
        except LeptonNotFoundError:
            return False
        return True

    def test_connection(self) -> tuple[bool, str]:
        """Whether the workspace answers with this token (``GET /workspace``)."""
        try:
            self._call("read the workspace", lambda client: client.info())
        except BrevError as err:
            return False, str(err)
        return True, f"Lepton workspace {self.workspace!r} answers."

    def perform(self, name: str, action: Call) -> LeptonJobPoll | bool:
        """Carry out one call of :class:`~airflow_provider_brev.core.lepton.follower.LeptonJobFollower` for job
        ``name``: a poll (:meth:`poll_job`) or a stop (:meth:`stop_job`). The worker's and the triggerer's driver
        both perform through it."""
        if isinstance(action, PollLeptonJob):
            return self.poll_job(name, action.since_ns)
        return self.stop_job(name)

    # -- async (the triggerer): the same calls in a thread ---------------------------------------------
    async def aperform(self, name: str, action: Call) -> LeptonJobPoll | bool:
        """Async twin of :meth:`perform` (the same call, in a thread)."""
        await self.aconfig()
        return await asyncio.to_thread(self.perform, name, action)

    async def astop_job(self, name: str) -> bool:
        await self.aconfig()
        return await asyncio.to_thread(self.stop_job, name)


def _dump(model: Any) -> dict[str, Any]:
    """An SDK model as the API's JSON (aliases: ``metadata.id``)."""
    return dict(model.model_dump(by_alias=True, exclude_none=True, mode="json"))
