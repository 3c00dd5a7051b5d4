"""A small client for Airflow 3.3's REST API (``/api/v2``) and the UI endpoints the deployment test reads.

Standard library only (``urllib``), so it can be reused from any Python. Authentication: the simple auth
manager's token endpoint (``GET /auth/token`` when ``[core] simple_auth_manager_all_admins`` is on, otherwise
``POST /auth/token`` with a username and password); the token is sent as a bearer token.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any

TERMINAL_RUN_STATES = ("success", "failed")


class ApiError(RuntimeError):
    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} -> HTTP {status}: {body[:2000]}")
        self.status = status
        self.body = body


class AirflowClient:
    def __init__(self, base_url: str, *, username: str | None = None, password: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.token: str | None = None

    # ------------------------------------------------------------------------------------------- transport
    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        auth: bool = True,
        timeout: float = 30.0,
        accept: str = "application/json",
    ) -> Any:
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        data = None
        headers = {"Accept": accept}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.login()}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            raise ApiError(method, url, err.code, err.read().decode("utf-8", "replace")) from None
        if not raw:
            return None
        return json.loads(raw) if accept == "application/json" else raw

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def login(self) -> str:
        """A JWT from the simple auth manager (cached)."""
        if self.token:
            return self.token
        if self.username:
            resp = self.request(
                "POST", "/auth/token", body={"username": self.username, "password": self.password}, auth=False
            )
        else:  # [core] simple_auth_manager_all_admins = True
            resp = self.request("GET", "/auth/token", auth=False)
        self.token = resp["access_token"]
        return self.token

    # ------------------------------------------------------------------------------------------- helpers
    def wait_until_up(self, timeout: float = 180.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                return self.get("/api/v2/monitor/health", auth=False, timeout=5)
            except (OSError, ApiError) as err:
                last = err
                time.sleep(1)
        raise TimeoutError(f"API server at {self.base_url} did not come up in {timeout:.0f} s: {last}")

    def health(self) -> dict[str, Any]:
        return self.get("/api/v2/monitor/health", auth=False, timeout=10)

    def version(self) -> dict[str, Any]:
        return self.get("/api/v2/version")

    def providers(self) -> list[dict[str, Any]]:
        return self.get("/api/v2/providers", params={"limit": 1000})["providers"]

    def hook_meta(self) -> list[dict[str, Any]]:
        """The connection form metadata the UI renders (one entry per connection type)."""
        return self.get("/ui/connections/hook_meta")

    def import_errors(self) -> list[dict[str, Any]]:
        return self.get("/api/v2/importErrors")["import_errors"]

    def dag(self, dag_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}")

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        missing = list(dag_ids)
        while time.monotonic() < deadline:
            missing = []
            for dag_id in dag_ids:
                try:
                    self.dag(dag_id)
                except ApiError as err:
                    if err.status != 404:
                        raise
                    missing.append(dag_id)
            if not missing:
                return
            errors = self.import_errors()
            if errors:
                raise RuntimeError(f"DAG import errors: {json.dumps(errors, indent=1)}")
            time.sleep(1)
        raise TimeoutError(f"DAGs not parsed within {timeout:.0f} s: {missing}")

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", body={"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, run_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "logical_date": datetime.now(UTC).isoformat(),  # templates such as {{ ds_nodash }} need one
            "conf": conf or {},
        }
        if run_id:
            body["dag_run_id"] = run_id
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", body=body)

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        run = urllib.parse.quote(run_id, safe="")
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances", params={"limit": 100})["task_instances"]

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        run = urllib.parse.quote(run_id, safe="")
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}")

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        run = urllib.parse.quote(run_id, safe="")
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}/tries")["task_instances"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The task's log for one try as text (worker and triggerer parts merged by the API server)."""
        run = urllib.parse.quote(run_id, safe="")
        data = self.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true"},
            timeout=60,
        )
        content = data.get("content") if isinstance(data, dict) else data
        if isinstance(content, str):
            return content
        lines = []
        for item in content or []:
            if isinstance(item, dict):
                extra = {k: v for k, v in item.items() if k not in ("event", "timestamp", "level", "logger")}
                lines.append(
                    " ".join(
                        str(part)
                        for part in (item.get("timestamp", ""), item.get("level", ""), item.get("event", ""), extra)
                        if part not in ("", None, {})
                    )
                )
            else:
                lines.append(str(item))
        return "\n".join(lines)

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        timeout: float,
        on_poll: Any = None,
        interval: float = 1.0,
    ) -> dict[str, Any]:
        """Poll until the run is success/failed; ``on_poll(run, task_instances)`` sees every poll."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.dag_run(dag_id, run_id)
            if on_poll is not None:
                on_poll(run, self.task_instances(dag_id, run_id))
            if run["state"] in TERMINAL_RUN_STATES:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} {run_id} still {run['state']} after {timeout:.0f} s")
            time.sleep(interval)
