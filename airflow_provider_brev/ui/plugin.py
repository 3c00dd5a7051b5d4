"""The Airflow plugin of the Brev page, registered through the provider info (``plugins``), as Edge's is.

On Airflow 3.1+ the API server mounts the page's app (:mod:`.app`) under ``/brev`` and the UI shows it under
*Browse -> Brev* (an external view in the UI's frame). Other components (scheduler, workers, triggerer) load the
plugin too but build no app: the page's imports stay out of them. Airflow 3.0 has no plugin pages: the plugin loads,
serves nothing and logs where the page would be (:func:`page_location`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import airflow
from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)

#: Where the API server mounts the page's app.
URL_PREFIX = "/brev"

#: The page's route in the Airflow UI (``<base>/plugin/brev``).
URL_ROUTE = "brev"


def _version(text: str) -> tuple[int, int]:
    major, _, rest = text.partition(".")
    minor = "".join(ch for ch in rest.partition(".")[0] if ch.isdigit())
    return int(major or 0), int(minor or 0)


#: Airflow 3.1+ shows plugin pages (``external_views``, ``react_apps``); 3.0 does not.
SERVES_PAGES = _version(airflow.__version__) >= (3, 1)


def base_path() -> str:
    """The path of the API server's base URL (``[api] base_url``), without a trailing ``/``."""
    from urllib.parse import urlparse

    from airflow.configuration import conf

    base = conf.get("api", "base_url", fallback="/") or "/"
    return (urlparse(base).path if base.startswith(("http://", "https://")) else base).rstrip("/")


def page_location() -> str:
    """Where the page is (Airflow 3.1+), or would be."""
    where = f"{base_path()}{URL_PREFIX}/ (Browse -> Brev in the navigation)"
    if SERVES_PAGES:
        return f"The Brev page is at {where}."
    return (
        f"The Brev page needs Airflow 3.1+ (plugin pages); this is Airflow {airflow.__version__}, so it is not "
        f"served. On Airflow 3.1+ it is at {where}; meanwhile `airflow brev instances` lists the instances."
    )


def on_api_server() -> bool:
    """Whether this process is the API server (``airflow api-server``, or Airflow's own ``main.py`` of it)."""
    return sys.argv[1:2] == ["api-server"] or (len(sys.argv) > 2 and sys.argv[2].endswith("api_fastapi/main.py"))


def conn_id() -> str:
    """``[brev] ui_conn_id``: the connection the page runs ``brev ls`` through (``""``: none)."""
    from airflow.configuration import conf

    return (conf.get("brev", "ui_conn_id", fallback="brev_default") or "").strip()


def page_apps() -> list[dict[str, Any]]:
    """The page's app, as the API server mounts it."""
    from airflow_provider_brev.ui.app import create_app

    return [{"app": create_app(conn_id(), URL_PREFIX), "url_prefix": URL_PREFIX, "name": "NVIDIA Brev"}]


def page_views() -> list[dict[str, Any]]:
    """The page in the UI's navigation (shown in its frame)."""
    return [
        {
            "name": "Brev",
            "href": f"{base_path()}{URL_PREFIX}/",
            "url_route": URL_ROUTE,
            "destination": "nav",
            "category": "browse",
            "icon": f"{base_path()}{URL_PREFIX}/icon.svg",
        }
    ]


class BrevPlugin(AirflowPlugin):
    """The Brev page: fleet, warm pool and cost history, read-only (see the module docstring)."""

    name = "brev"
    if SERVES_PAGES and on_api_server():
        fastapi_apps = page_apps()
        external_views = page_views()


if not SERVES_PAGES:
    log.info("%s", page_location())
