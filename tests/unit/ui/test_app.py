"""The Brev page's web app (ui/app.py): GET routes alone, each behind the API server's user dependency, and links
rooted where the UI is."""

from __future__ import annotations

import pytest
from airflow.api_fastapi.core_api.security import get_user

from airflow_provider_brev.ui.app import airflow_root, create_app


def test_every_route_is_a_get_behind_the_user_dependency() -> None:
    app = create_app("brev_default", "/brev")
    routes = [r for r in app.routes if getattr(r, "methods", None)]
    assert {r.path: r.methods for r in routes} == {"/": {"GET"}, "/icon.svg": {"GET"}}
    for route in routes:
        assert get_user in [d.call for d in route.dependant.dependencies], route.path
    assert app.openapi_url is None and app.docs_url is None


@pytest.mark.parametrize(
    ("root_path", "expected"),
    [("/brev", "/"), ("/airflow/brev", "/airflow/"), ("/a/b/brev/", "/a/b/brev/"), ("", "/")],
)
def test_links_are_rooted_where_the_airflow_ui_is(root_path: str, expected: str) -> None:
    assert airflow_root(root_path, "/brev") == expected
