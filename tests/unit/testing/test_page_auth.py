"""The page tests' auth manager (airflow_provider_brev/testing/page_auth.py): the simple auth manager, with the DAGs
named in ``BREV_PAGE_PRIVATE_DAGS`` hidden from ``outsider`` alone, and the API server's environment for it."""

from __future__ import annotations

import json

from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

from airflow_provider_brev.testing.page_auth import (
    OUTSIDER,
    PRIVATE_DAGS_ENV,
    DagScopedAuthManager,
    auth_environment,
    private_dags,
)


def test_outsider_may_not_read_a_private_dag_and_reads_the_others_by_role(monkeypatch):
    monkeypatch.setenv(PRIVATE_DAGS_ENV, "flagship, other ,")
    assert private_dags() == {"flagship", "other"}
    manager = DagScopedAuthManager()
    outsider = SimpleAuthManagerUser(username=OUTSIDER, role="viewer")
    admin = SimpleAuthManagerUser(username="admin", role="admin")

    def reads(user: SimpleAuthManagerUser, dag_id: str) -> bool:
        return manager.is_authorized_dag(method="GET", user=user, details=DagDetails(id=dag_id))

    assert not reads(outsider, "flagship") and not reads(outsider, "other")
    assert reads(outsider, "public") and reads(admin, "flagship")
    assert not manager.is_authorized_dag(method="PUT", user=outsider, details=DagDetails(id="public"))  # a viewer


def test_the_environment_names_the_manager_its_users_and_their_passwords(tmp_path):
    env = auth_environment(tmp_path / "passwords.json", {"admin": "a-pw", OUTSIDER: "o-pw"}, ["flagship"])
    assert env["AIRFLOW__CORE__AUTH_MANAGER"] == "airflow_provider_brev.testing.page_auth.DagScopedAuthManager"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "False"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin,outsider:viewer"
    assert env[PRIVATE_DAGS_ENV] == "flagship"
    assert json.loads((tmp_path / "passwords.json").read_text()) == {"admin": "a-pw", OUTSIDER: "o-pw"}
