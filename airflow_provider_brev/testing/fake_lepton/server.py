"""The fake Lepton API over HTTP: the routes of ``leptonai.api.v2`` the provider uses, served on 127.0.0.1.

Every request needs ``Authorization: Bearer <token>`` (else 401) under ``/api/v2/workspaces/<workspace id>``
(another workspace: 404). Faults (:meth:`FakeLepton.fail <airflow_provider_brev.testing.fake_lepton.FakeLepton.fail>`)
answer matching requests with a status before anything is done. Routes: ``GET /workspace``; ``GET|POST /jobs``;
``GET|PATCH|DELETE /jobs/<id>``; ``GET /jobs/<id>/replicas``; ``GET /logs`` (Loki's ``query_range`` shape);
``GET|POST /usersecrets``, ``DELETE /usersecrets/<name>``. Every request is recorded (method, path, query, status,
the body's keys) -- never a header or a secret value.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from airflow_provider_brev.testing.fake_lepton import FakeLepton


def workspace_info(fake: FakeLepton) -> dict[str, Any]:
    """``GET /workspace`` (``leptonai.api.v2.types.workspace.WorkspaceInfo``)."""
    shapes = fake.workspace.shapes
    return {
        "build_time": "2026-11-01T00:00:00Z",
        "git_commit": "0.47.1",
        "workspace_name": fake.workspace_id,
        "workspace_tier": "enterprise",
        "workspace_state": "normal",
        "supported_shapes": {name: {"accelerator_num": gpus} for name, (gpus, _vram) in shapes.items()},
        "workspace_disk_usage_bytes": 0,
        "workloads": {
            "num_deployments": 0,
            "num_jobs": len(fake.workspace.jobs),
            "num_pods": 0,
            "num_secrets": len(fake.workspace.secrets),
            "num_image_pull_secrets": len(fake.workspace.pull_secrets),
        },
        "resource_quota": {
            "limit": {"cpu": 1024, "memory": 1 << 40, "accelerator_num": 64},
            "used": {"cpu": 0, "memory": 0, "accelerator_num": 0},
        },
        "features": {"enable_new_deployment_api": False},
    }


class Handler(BaseHTTPRequestHandler):
    """One request (the server's ``fake`` attribute is the :class:`FakeLepton`)."""

    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # no stderr noise
        return

    def _reply(self, status: int, answer: Any) -> None:
        data = json.dumps(answer).encode()
        # recorded before the answer goes out: a client that has its answer finds its request in ``requests``
        self.server.fake.record(self.command, self._path, self._query, status, self._body_keys)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        fake: FakeLepton = self.server.fake
        url = urlsplit(self.path)
        self._query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self._body_keys = sorted(body) if isinstance(body, dict) else []
        match = re.fullmatch(r"/api/v2/workspaces/([^/]+)(/.*)?", url.path)
        self._path = (match.group(2) or "/") if match else url.path
        if fake.delay_seconds:
            time.sleep(fake.delay_seconds)
        fault = fake.take_fault(self.command, self._path)
        if fault is not None:
            self._reply(fault[0], {"code": "Injected", "message": fault[1]})
            return
        if self.headers.get("Authorization") != f"Bearer {fake.token}":
            self._reply(401, {"code": "Unauthorized", "message": "invalid or expired token"})
            return
        if match is None or match.group(1) != fake.workspace_id:
            self._reply(404, {"code": "NotFound", "message": "workspace not found"})
            return
        status, answer = self._route(fake, self.command, self._path, body)
        self._reply(status, answer)

    def _route(self, fake: FakeLepton, method: str, path: str, body: Any) -> tuple[int, Any]:
        ws = fake.workspace
        if path == "/workspace" and method == "GET":
            return 200, workspace_info(fake)
        if path == "/jobs" and method == "POST":
            return ws.create(body or {})
        if path == "/jobs" and method == "GET":
            page = int(self._query.get("page") or 1)
            with ws.lock:
                jobs = [job.to_api() for job in ws.jobs.values()]
            return 200, {"jobs": jobs if page == 1 else []}
        if path == "/usersecrets" and method == "GET":
            with ws.lock:
                return 200, [{"name": name} for name in sorted(ws.secrets)]
        if path == "/usersecrets" and method == "POST":
            items = body if isinstance(body, list) else []
            with ws.lock:
                for item in items:
                    ws.secrets[str(item["name"])] = str(item.get("value") or "")
            return 200, {}
        if path == "/logs" and method == "GET":
            return self._logs(ws)
        secret = re.fullmatch(r"/usersecrets/([^/]+)", path)
        if secret and method == "DELETE":
            with ws.lock:
                found = ws.secrets.pop(secret.group(1), None) is not None
            return (200, {}) if found else (404, {"code": "NotFound", "message": "secret not found"})
        job_path = re.fullmatch(r"/jobs/([^/]+)(/replicas)?", path)
        if job_path is None:
            return 404, {"code": "NotFound", "message": f"no route {method} {path}"}
        name = job_path.group(1)
        job = ws.get(name)
        if job is None:
            return 404, {"code": "NotFound", "message": f"job {name} not found"}
        if job_path.group(2):
            replica = f"{name}-{job.restarts}"
            return 200, [{"metadata": {"id": replica}, "id": replica}]
        if method == "GET":
            return 200, job.to_api()
        if method == "PATCH":
            if ((body or {}).get("spec") or {}).get("stopped"):
                ws.stop(name)
            return 200, {}
        if method == "DELETE":
            ws.delete(name)
            return 200, {}
        return 405, {"code": "MethodNotAllowed", "message": method}

    def _logs(self, ws: Any) -> tuple[int, Any]:
        query = self._query
        name = str(query.get("job") or "")
        start, end = int(query.get("start") or 0), int(query.get("end") or time.time_ns())
        entries = ws.log_of(name, start, end, int(query.get("limit") or 5000))
        if entries is None:
            return 200, {"data": {"result": []}}
        values = [[str(ts), line] for ts, line in entries]
        return 200, {"data": {"result": [{"stream": {"job": name}, "values": values}] if values else []}}

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle


def serve(fake: FakeLepton, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Start serving ``fake`` in a daemon thread; returns the server (``server_address`` has the port)."""
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.fake = fake  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), name="fake-lepton-api", daemon=True).start()
    return server
