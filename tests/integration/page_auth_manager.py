"""The auth manager of tests/integration/test_brev_page.py's API server: Airflow's simple auth manager, except that
the user ``outsider`` may not read the DAGs of :data:`PRIVATE_DAGS` (the simple auth manager decides by role alone,
so it cannot say that by itself; a deployment's FAB or Keycloak auth manager says it per DAG)."""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

#: The DAGs ``outsider`` may not read.
PRIVATE_DAGS = frozenset({"brev_page_private"})
OUTSIDER = "outsider"


class DagScopedAuthManager(SimpleAuthManager):
    """The simple auth manager, with :data:`PRIVATE_DAGS` hidden from :data:`OUTSIDER`."""

    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() == OUTSIDER and details is not None and details.id in PRIVATE_DAGS:
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
