"""The Brev page's web app: a FastAPI app the API server mounts under ``/brev`` (Airflow 3.1+; only the API server
imports this module).

Every route needs an authenticated user (the API server's own dependency,
``airflow.api_fastapi.core_api.security.get_user``: the UI's session cookie or a bearer token) and shows only the
DAGs the auth manager lets that user read (``get_authorized_dag_ids(method="GET")``). The app only reads: its
routes are ``GET`` alone (any other method is refused by routing, 405), and nothing they call creates, starts,
stops or deletes an instance. The database reads and ``brev ls`` run in FastAPI's thread pool (plain ``def``
routes), off the API server's event loop.

=========================== ===========================================================================
route                       what
=========================== ===========================================================================
``GET /``                   the page (HTML: :mod:`airflow_provider_brev.ui.page`)
``GET /icon.svg``           the navigation icon
=========================== ===========================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep  # noqa: TC002 - FastAPI reads route annotations at run time
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from airflow_provider_brev.core.ui.fleet import fleet
from airflow_provider_brev.core.ui.history import history
from airflow_provider_brev.ui.page import render_page
from airflow_provider_brev.ui.sources import LiveListing, read_facts

#: The navigation icon, shipped in the wheel beside this module.
ICON = Path(__file__).with_name("static") / "brev.svg"
#: Headers of every answer: nothing is cached by a proxy, nothing is sniffed, and only the UI's own frame shows it.
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'",
}


def airflow_root(root_path: str, url_prefix: str) -> str:
    """The Airflow UI's root path (ending in ``/``) from the app's mount path (``<base path><url_prefix>``)."""
    base = root_path[: -len(url_prefix)] if root_path.endswith(url_prefix) else root_path
    return base.rstrip("/") + "/"


def readable_dag_ids(user: Any) -> set[str]:
    """The DAG ids the auth manager lets ``user`` read."""
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def page_html(user: Any, root: str, live: LiveListing) -> str:
    """The page for ``user`` (see :func:`~airflow_provider_brev.ui.page.render_page`)."""
    readable = readable_dag_ids(user)
    instances, note = live.get()
    facts = read_facts(readable, live=instances, live_note=note)
    return render_page(
        fleet(facts, readable),
        history(facts, readable),
        airflow_root=root,
        live_note=facts.live_note,
        user=str(user.get_name()),
        now=facts.now,
    )


def create_app(conn_id: str, url_prefix: str) -> FastAPI:
    """The app (see the module docstring).

    :param conn_id: the connection ``brev ls`` runs through (``""``: no live state).
    :param url_prefix: where the API server mounts it (``/brev``).
    """
    app = FastAPI(title="NVIDIA Brev", docs_url=None, redoc_url=None, openapi_url=None)
    live = LiveListing(conn_id)

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request, user: GetUserDep) -> HTMLResponse:
        root = airflow_root(str(request.scope.get("root_path") or url_prefix), url_prefix)
        html = page_html(user, root, live)
        return HTMLResponse(html, headers=HEADERS)

    @app.get("/icon.svg")
    def icon(user: GetUserDep) -> Response:
        return Response(ICON.read_bytes(), media_type="image/svg+xml", headers=HEADERS)

    return app
