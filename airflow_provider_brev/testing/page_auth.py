"""An API server whose users may not all read every DAG, for the tests of the Brev page (tests/integration/
test_brev_page.py and ``make deployment-test``): Airflow's simple auth manager with two users and the DAGs
``outsider`` may not read.

* :class:`DagScopedAuthManager`: the simple auth manager, except that :data:`OUTSIDER` may not read the DAGs named
  in the API server's :data:`PRIVATE_DAGS_ENV` (comma-separated). The simple auth manager decides by role alone,
  so it cannot say that by itself; a deployment's FAB or Keycloak auth manager says it per DAG.
* :func:`auth_environment`: the API server's environment for it (users ``admin`` and ``outsider``, their
  passwords in a file, no all-admins mode: a request without credentials is refused).
* :func:`token` and :func:`request`: a user's JWT from ``POST /auth/token``, and one HTTP request with it or none.

Standard library only, except the auth manager class itself (Airflow's API server imports it).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

#: The environment variable naming the DAGs :data:`OUTSIDER` may not read (comma-separated).
PRIVATE_DAGS_ENV = "BREV_PAGE_PRIVATE_DAGS"
ADMIN = "admin"
OUTSIDER = "outsider"


def private_dags() -> frozenset[str]:
    """The DAGs :data:`OUTSIDER` may not read (:data:`PRIVATE_DAGS_ENV`)."""
    return frozenset(d.strip() for d in os.environ.get(PRIVATE_DAGS_ENV, "").split(",") if d.strip())


class DagScopedAuthManager(SimpleAuthManager):  # type: ignore[misc]
    """The simple auth manager, with :func:`private_dags` hidden from :data:`OUTSIDER`."""

    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() == OUTSIDER and details is not None and details.id in private_dags():
            return False
        return bool(super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details))


def auth_environment(passwords_file: Path, passwords: Mapping[str, str], private: Iterable[str]) -> dict[str, str]:
    """The API server's environment: :class:`DagScopedAuthManager`, ``admin`` an admin and ``outsider`` a viewer
    with ``passwords`` (written to ``passwords_file``), ``private`` hidden from ``outsider``."""
    passwords_file.write_text(json.dumps(dict(passwords)))
    return {
        "AIRFLOW__CORE__AUTH_MANAGER": f"{__name__}.{DagScopedAuthManager.__name__}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin,{OUTSIDER}:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        PRIVATE_DAGS_ENV: ",".join(private),
    }


def request(url: str, *, bearer: str | None = None, method: str = "GET", timeout: float = 120) -> tuple[int, str]:
    """One request, with ``bearer`` as its token or without credentials: ``(status, body)``."""
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    req = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")


def token(base: str, user: str, password: str, *, timeout: float = 120) -> str:
    """``user``'s JWT from the simple auth manager's ``POST /auth/token``."""
    body = json.dumps({"username": user, "password": password}).encode()
    req = urllib.request.Request(
        f"{base}/auth/token", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as response:
        return str(json.loads(response.read())["access_token"])
