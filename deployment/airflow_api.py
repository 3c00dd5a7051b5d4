"""The REST calls the deployment and smoke tests make, through the official ``apache-airflow-client``.

``AirflowApi(base_url)`` wraps ``airflow_client.client`` (the generated client matching Airflow 3.3) with the
few waits and conversions the tests need. Authentication is Airflow's simple auth manager: with ``[core]
simple_auth_manager_all_admins = True`` (``make airflow``) ``GET /auth/token`` hands out an admin JWT; with users
(``make deployment-test``) ``POST /auth/token`` hands out the JWT of ``AirflowApi(base_url, user=(name,
password))``. The client then sends it as its bearer token.

Two requests are not operations of the public API, so the generated client has no method for them; they still go
through the client's own transport (``ApiClient.param_serialize`` + ``call_api``: same urllib3 pool, host and
bearer token), not a hand-written HTTP client:

* ``GET`` or ``POST /auth/token``: the simple auth manager's token endpoint, mounted outside ``/api/v2``;
* ``GET /ui/connections/hook_meta``: the connection-form metadata the UI renders, served by the UI's private API
  (``/ui``), which the public OpenAPI spec (and so the client) does not cover.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import airflow_client.client as af
import urllib3
from airflow_client.client.exceptions import ApiException, NotFoundException

if TYPE_CHECKING:
    from airflow_client.client.models import (
        DAGRunResponse,
        HealthInfoResponse,
        JobResponse,
        ProviderResponse,
        TaskInstanceHistoryResponse,
        TaskInstanceResponse,
    )

TERMINAL_RUN_STATES = frozenset({"success", "failed"})


def state_of(obj: Any) -> str:
    """A model's ``state`` as plain text (``"success"``), ``"None"`` while it has none."""
    state = getattr(obj, "state", None)
    return str(getattr(state, "value", state))


class AirflowApi:
    """One authenticated ``airflow_client`` session against an api-server (cheap: make one per thread)."""

    def __init__(self, base_url: str, *, timeout: float = 60.0, user: tuple[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.user = user
        self.timeout = timeout
        self.config = af.Configuration(host=self.base_url)
        self.client = af.ApiClient(self.config)
        self.dags = af.DAGApi(self.client)
        self.runs = af.DagRunApi(self.client)
        self.tis = af.TaskInstanceApi(self.client)
        self.monitor = af.MonitorApi(self.client)
        self.provider_api = af.ProviderApi(self.client)
        self.import_errors_api = af.ImportErrorApi(self.client)
        self.jobs_api = af.JobApi(self.client)
        self.xcoms = af.XComApi(self.client)

    # ------------------------------------------------------------------------------------ transport
    def _raw(self, method: str, path: str, *, auth: bool = True, timeout: float | None = None, body: Any = None) -> Any:
        """A JSON request outside the public API, through the client's transport (see the module docstring)."""
        headers = {"Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.login()}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        _method, url, header_params, body, post_params = self.client.param_serialize(
            method=method, resource_path=path, header_params=headers, body=body, auth_settings=[]
        )
        resp = self.client.call_api(
            _method, url, header_params, body, post_params, _request_timeout=timeout or self.timeout
        )
        data = resp.read() or b""
        if not 200 <= resp.status < 300:
            raise ApiException(status=resp.status, reason=resp.reason, body=data.decode("utf-8", "replace"))
        return json.loads(data)

    def login(self) -> str:
        """The simple auth manager's JWT (fetched once, then sent on every call): ``user``'s from ``POST
        /auth/token`` with its password, else the all-admins user's from ``GET /auth/token``."""
        if not self.config.access_token:
            if self.user is None:
                response = self._raw("GET", "/auth/token", auth=False)
            else:
                credentials = {"username": self.user[0], "password": self.user[1]}
                response = self._raw("POST", "/auth/token", auth=False, body=credentials)
            self.config.access_token = response["access_token"]
        return str(self.config.access_token)

    # ------------------------------------------------------------------------------------ health, metadata
    def health(self) -> HealthInfoResponse:
        return self.monitor.get_health(_request_timeout=10)

    def wait_healthy(self, timeout: float = 180.0) -> HealthInfoResponse:
        """Until the api-server answers ``/api/v2/monitor/health`` (components may still be starting)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                return self.monitor.get_health(_request_timeout=5)
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
                last = err
                time.sleep(1)
        raise TimeoutError(f"api-server at {self.base_url} did not answer within {timeout:.0f} s: {last}")

    def providers(self) -> list[ProviderResponse]:
        self.login()
        return list(self.provider_api.get_providers(limit=1000).providers)

    def hook_meta(self) -> list[dict[str, Any]]:
        """The connection form metadata the UI renders, one entry per connection type (UI API, see above)."""
        return list(self._raw("GET", "/ui/connections/hook_meta"))

    def import_errors(self) -> list[dict[str, Any]]:
        self.login()
        return [e.to_dict() for e in self.import_errors_api.get_import_errors(limit=100).import_errors]

    def triggerer_job_ids(self) -> set[int]:
        self.login()
        jobs: list[JobResponse] = self.jobs_api.get_jobs(job_type="TriggererJob", limit=100).jobs
        return {int(j.id) for j in jobs}

    # ------------------------------------------------------------------------------------ DAGs and runs
    def unpause(self, dag_id: str) -> None:
        self.login()
        self.dags.patch_dag(dag_id, af.DAGPatchBody(is_paused=False), update_mask=["is_paused"])

    def wait_dag(self, dag_id: str, timeout: float = 180.0) -> None:
        """Until the dag-processor parsed ``dag_id``; fails fast on import errors."""
        self.login()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.dags.get_dag(dag_id)
                return
            except NotFoundException:
                pass
            errors = self.import_errors()
            if errors:
                raise RuntimeError(f"DAG import errors: {json.dumps(errors, indent=1, default=str)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"DAG {dag_id} not parsed within {timeout:.0f} s")
            time.sleep(1)

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """A manual run as the UI makes it: no logical date (``{{ ds }}`` is undefined in it); returns its run id."""
        self.login()
        body = af.TriggerDAGRunPostBody(logical_date=None, conf=conf or {})
        return str(self.runs.trigger_dag_run(dag_id, body).dag_run_id)

    def dag_run(self, dag_id: str, run_id: str) -> DAGRunResponse:
        self.login()
        return self.runs.get_dag_run(dag_id, run_id)

    def dag_runs(self, dag_id: str) -> list[DAGRunResponse]:
        self.login()
        return list(self.runs.get_dag_runs(dag_id, limit=100).dag_runs)

    def wait_run(
        self,
        dag_id: str,
        run_id: str,
        timeout: float,
        *,
        on_poll: Any = None,
        interval: float = 1.0,
    ) -> str:
        """Poll until the run is ``success`` or ``failed`` and return that state.

        ``on_poll(run, task_instances)`` sees every poll (to record states such as ``deferred`` on the way).
        """
        deadline = time.monotonic() + timeout
        while True:
            run = self.dag_run(dag_id, run_id)
            if on_poll is not None:
                on_poll(run, self.task_instances(dag_id, run_id))
            state = state_of(run)
            if state in TERMINAL_RUN_STATES:
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} {run_id} still {state} after {timeout:.0f} s")
            time.sleep(interval)

    # ------------------------------------------------------------------------------------ task instances
    def task_instances(self, dag_id: str, run_id: str) -> list[TaskInstanceResponse]:
        self.login()
        return list(self.tis.get_task_instances(dag_id, run_id, limit=100).task_instances)

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> TaskInstanceResponse:
        self.login()
        return self.tis.get_task_instance(dag_id, run_id, task_id)

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[TaskInstanceHistoryResponse]:
        self.login()
        return list(self.tis.get_task_instance_tries(dag_id, run_id, task_id).task_instances)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """One try's log as text, worker and triggerer parts merged by the api-server (one line per message)."""
        self.login()
        resp = self.tis.get_log(dag_id, run_id, task_id, try_number, full_content=True, _request_timeout=self.timeout)
        lines = []
        for item in resp.content.actual_instance or []:
            if isinstance(item, str):
                lines.append(item)
                continue
            fields = item.to_dict()
            extra = {k: v for k, v in fields.items() if k not in ("event", "timestamp", "level", "logger")}
            parts = (fields.get("timestamp", ""), fields.get("level", ""), fields.get("event", ""), extra)
            lines.append(" ".join(str(p) for p in parts if p not in ("", None, {})))
        return "\n".join(lines)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", *, native: bool = False) -> Any:
        """An XCom value as the API serves it: stringified on the server, as the UI shows it, or with ``native`` the
        deserialized value as JSON (a task's returned dict as a dict)."""
        self.login()
        options = {"deserialize": True, "stringify": False} if native else {}
        entry = self.xcoms.get_xcom_entry(dag_id, task_id, run_id, key, **options)
        return getattr(entry.actual_instance, "value", None)
