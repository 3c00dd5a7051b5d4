"""A fake DGX Cloud Lepton workspace the real ``leptonai`` SDK talks to, the way moto serves boto3.

Typical use (or the ``lepton_fake`` fixture of :mod:`airflow_provider_brev.testing.pytest_plugin`)::

    fake = FakeLepton(tmp_path / "lepton").start()
    os.environ["AIRFLOW_CONN_LEPTON_DEFAULT"] = fake.connection_json()
    client = APIClient(workspace_id=fake.workspace_id, auth_token=fake.token, url=fake.url)
    fake.fail(503, path="/jobs", method="POST")       # the next job submission answers 503
    fake.workspace.capacity["gpu.8xh100-sxm"] = 0     # jobs of that shape stay Queueing
    fake.close()

Jobs run their container for real through the Brev simulator's fake ``docker`` and fake TAO entrypoints
(:mod:`.jobs`); the HTTP routes are :mod:`.server`. Run it as a process with
``python -m airflow_provider_brev.testing.fake_lepton --root DIR --port N`` (``make airflow``).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

from airflow_provider_brev.testing import fake_tao as _ft
from airflow_provider_brev.testing.fake_lepton.jobs import Job, Workspace
from airflow_provider_brev.testing.fake_lepton.server import serve
from airflow_provider_brev.testing.sandbox_tools import install_tools, write_exe

__all__ = ["TOKEN_ENV", "FakeLepton", "Job"]


#: The environment variable ``python -m airflow_provider_brev.testing.fake_lepton`` reads its token from when
#: ``--token`` is not given (a token on a command line is visible to every user of the machine).
TOKEN_ENV = "FAKE_LEPTON_TOKEN"


class FakeLepton:
    """One fake workspace and its API server.

    :param root: a directory of its own (replica sandboxes, the fake docker's state).
    :param workspace_id: the workspace's id.
    :param token: the workspace token the API accepts (default: a random one).
    :param port: the port to serve on (0: a free one).
    """

    def __init__(self, root: Path, *, workspace_id: str = "ws-fake", token: str | None = None, port: int = 0) -> None:
        self.root = Path(root)
        self.workspace_id = workspace_id
        self.token = token or "lep-" + secrets.token_hex(16)
        self.port = port
        self.delay_seconds = 0.0
        self.requests: list[dict[str, Any]] = []
        self._faults: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.workspace: Workspace | Any = None
        self._server: Any = None

    def start(self) -> FakeLepton:
        """Install the sandbox tools, start the workspace's ticker and the HTTP server."""
        tools = self.root / "tools"
        container_bin = tools / "container-bin"
        for path in (self.root, tools / "bin", container_bin, self.root / "instances"):
            path.mkdir(parents=True, exist_ok=True)
        (self.root / "config.json").write_text(json.dumps({"docker": {}, "tao": {}}))
        install_tools(self.root, self.root / "bin", tools / "bin", container_bin, list(_ft.NETWORK_ACTIONS))
        write_exe(container_bin / "python3", f'#!/bin/sh\nexec "{sys.executable}" -I "$@"\n')
        self.workspace = Workspace(self.root, tools / "bin")
        self._server = serve(self, port=self.port)
        self.port = int(self._server.server_address[1])
        return self

    @property
    def url(self) -> str:
        """The workspace API URL (what the SDK's ``APIClient(url=...)`` takes)."""
        return f"http://127.0.0.1:{self.port}/api/v2/workspaces/{self.workspace_id}"

    def connection_json(self) -> str:
        """An Airflow connection (``AIRFLOW_CONN_LEPTON_DEFAULT``) for this workspace."""
        return json.dumps({"conn_type": "lepton", "login": self.workspace_id, "password": self.token, "host": self.url})

    # -- faults and records ------------------------------------------------------------------------
    def fail(
        self, status: int, *, path: str = ".*", method: str | None = None, times: int = 1, message: str = ""
    ) -> None:
        """Answer the next ``times`` requests whose path matches ``path`` (a regex; ``method`` too when given)
        with ``status`` before anything is done."""
        with self._lock:
            self._faults.append(
                {"status": status, "path": re.compile(path), "method": method, "times": times, "message": message}
            )

    def take_fault(self, method: str, path: str) -> tuple[int, str] | None:
        with self._lock:
            for fault in self._faults:
                if fault["times"] > 0 and fault["path"].fullmatch(path) and fault["method"] in (None, method):
                    fault["times"] -= 1
                    return int(fault["status"]), str(fault["message"] or f"injected {fault['status']}")
        return None

    def record(self, method: str, path: str, query: dict[str, str], status: int, body_keys: list[str]) -> None:
        with self._lock:
            self.requests.append(
                {"method": method, "path": path, "query": dict(query), "status": status, "body_keys": body_keys}
            )

    def submissions(self, name: str | None = None) -> list[dict[str, Any]]:
        """The bodies of every ``POST /jobs`` (of job ``name``), answered or refused."""
        with self.workspace.lock:
            bodies = list(self.workspace.submissions)
        return [b for b in bodies if name is None or (b.get("metadata") or {}).get("id") == name]

    def job(self, name: str) -> Job | None:
        return self.workspace.get(name)

    def jobs(self) -> dict[str, Job]:
        with self.workspace.lock:
            return dict(self.workspace.jobs)

    def add_image_pull_secret(self, name: str, *, registry: str = "nvcr.io", password: str = "ngc-test-key") -> None:
        """A registry secret jobs may name in ``image_pull_secrets`` (the fake logs the container into it)."""
        with self.workspace.lock:
            self.workspace.pull_secrets[name] = (registry, password)

    def close(self) -> None:
        """Stop the server and every container."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self.workspace is not None:
            self.workspace.close()
