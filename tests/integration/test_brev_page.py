"""The Brev page of the Airflow UI, served by a real ``airflow api-server`` and driven in Chromium.

Real runs (``dag.test()`` against the simulator, tests/integration/dags/brev_page_cases.py) make what the page shows: a warm
DAG run twice (its teardown stops the instance; the second run starts it again) with a cost report each time, a
DAG whose instance still bills, and the same in a DAG the restricted user may not read. Then an API server on the
same metadata database (its auth manager: the simple one, with ``outsider`` denied that DAG,
:mod:`airflow_provider_brev.testing.page_auth`) serves the page, and:

* in Chromium, logged in as ``admin``: the fleet lists the billing instance RUNNING (``brev ls``, run by the API
  server), the warm pool the stopped one, the cost history two bars linking to the cost reports' task logs; the
  page shows in the Airflow UI's frame at ``/plugin/brev``; no request leaves the API server's host;
* ``outsider`` sees none of the private DAG's rows; a request without credentials is refused (401); nothing but
  ``GET`` is accepted (405).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import run_kept, run_state, task_states, xcom_of

from airflow_provider_brev.testing.local_s3 import free_port
from airflow_provider_brev.testing.page_auth import auth_environment, request, token
from airflow_provider_brev.ui.plugin import SERVES_PAGES

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"admin": "admin-pw-7f3a", "outsider": "outsider-pw-2c9d"}


def until(sim: Any, name: str, wanted: str | None) -> None:
    """Move the simulated clock on until ``name`` has status ``wanted`` (no wall-clock wait)."""
    for _ in range(300):
        instance = sim.instance(name)
        if (instance["status"] if instance else None) == wanted:
            return
        sim.advance(0.2)
    raise AssertionError(f"{name} never reached {wanted}")


@contextlib.contextmanager
def api_server(tmp_path: Path) -> Iterator[str]:
    """``airflow api-server`` on this test's metadata database and simulator (the environment ``run_dag`` set up),
    its auth manager :class:`~airflow_provider_brev.testing.page_auth.DagScopedAuthManager` with
    ``brev_page_private`` hidden from ``outsider``; yields its URL, stops its process group."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        **auth_environment(tmp_path / "passwords.json", PASSWORDS, ["brev_page_private"]),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__SECRET_KEY": "page-test-secret-" + "0" * 16,
        "AIRFLOW__API_AUTH__JWT_SECRET": "page-test-jwt-" + "1" * 32,
    }
    log = tmp_path / "api-server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while _health(base) != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"api-server did not come up:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _health(base: str) -> int | None:
    try:
        return request(f"{base}/api/v2/monitor/health")[0]
    except OSError:
        return None


def _browser_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("brev_deployment_browser", ROOT / "deployment" / "browser.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SERVES_PAGES, reason="Airflow 3.0 has no plugin pages")
def test_the_brev_page_shows_the_fleet_warm_pool_and_cost_history_to_whom_may_read_them(run_dag, brev_sim, tmp_path):
    pytest.importorskip("playwright")
    from playwright.sync_api import expect

    sim = brev_sim
    warm = []
    for _ in range(2):  # the second run starts the first one's stopped instance
        dag_run = run_kept(run_dag, "brev_page_warm", {})
        assert run_state(dag_run) == "success", task_states(dag_run)
        warm.append(dag_run)
        until(sim, xcom_of(dag_run, "create"), "STOPPED")
    warm_name = xcom_of(warm[0], "create")
    assert xcom_of(warm[1], "create") == warm_name
    billing = run_kept(run_dag, "brev_page_billing", {})
    private = run_kept(run_dag, "brev_page_private", {})
    for dag_run in (billing, private):
        assert run_state(dag_run) == "success", task_states(dag_run)
    billing_name, private_name = xcom_of(billing, "create"), xcom_of(private, "create")
    assert sim.instance(billing_name)["status"] == "RUNNING"

    with api_server(tmp_path) as base:
        admin, outsider = (token(base, user, PASSWORDS[user]) for user in ("admin", "outsider"))
        # refused without credentials, and read-only for everyone
        assert request(f"{base}/brev/")[0] == 401
        assert request(f"{base}/brev/icon.svg")[0] == 401
        assert request(f"{base}/brev/", bearer=admin, method="POST")[0] == 405
        assert request(f"{base}/brev/", bearer=admin, method="DELETE")[0] == 405
        # the auth manager decides what each user sees
        status, seen_by_admin = request(f"{base}/brev/", bearer=admin)
        assert status == 200 and "brev_page_private" in seen_by_admin and private_name in seen_by_admin
        status, seen_by_outsider = request(f"{base}/brev/", bearer=outsider)
        assert status == 200 and billing_name in seen_by_outsider and warm_name in seen_by_outsider
        assert "brev_page_private" not in seen_by_outsider and private_name not in seen_by_outsider

        requested: list[str] = []
        with _browser_module().chromium_page(tmp_path, failure_name="brev-page-failure.png") as page:
            page.context.on("request", lambda request: requested.append(request.url))
            page.context.add_cookies([{"name": "_token", "value": admin, "url": base}])
            page.goto(f"{base}/brev/")
            fleet = page.locator("#fleet-table tbody tr")
            expect(fleet.filter(has_text=billing_name)).to_contain_text("RUNNING")  # live, from `brev ls`
            expect(fleet.filter(has_text=billing_name)).to_contain_text("brev_page_billing")
            expect(fleet.filter(has_text=warm_name)).to_have_count(0)  # stopped: in the warm pool, not billing
            expect(page.locator("#warm-table tbody tr").filter(has_text=warm_name)).to_contain_text("page-weekly")
            expect(page.locator("#warm-table")).to_contain_text("stopping: the disk stopped for")  # the break-even
            bars = page.locator('section[data-dag="brev_page_warm"] svg a.bar')
            expect(bars).to_have_count(2)
            hrefs = {bars.nth(i).get_attribute("href") for i in range(2)}
            assert hrefs == {f"/dags/brev_page_warm/runs/{r.run_id}/tasks/cost_report" for r in warm} or hrefs == {
                f"/dags/brev_page_warm/runs/{_quoted(r.run_id)}/tasks/cost_report" for r in warm
            }
            assert page.locator('section[data-dag="brev_page_warm"] svg rect[data-phase="work"]').count() == 2
            page.screenshot(path=str(tmp_path / "brev-page.png"), full_page=True)
            # in the Airflow UI: its navigation's page, in the UI's frame
            page.goto(f"{base}/plugin/brev")
            # the first load of the UI's bundle, then the frame's own request: slow on a busy machine
            expect(page.frame_locator("iframe").locator("#fleet-table")).to_contain_text(billing_name, timeout=90_000)
        # no request to another host (the Airflow UI's own blob: URLs are of its origin; data: URLs are no request)
        elsewhere = [u for u in requested if not u.startswith("data:") and not u.removeprefix("blob:").startswith(base)]
        assert f"{base}/brev/" in requested and elsewhere == []


def _quoted(run_id: str) -> str:
    from urllib.parse import quote

    return quote(run_id, safe="")


def test_the_plugin_loads_everywhere_and_says_where_the_page_is() -> None:
    """Airflow loads the plugin (its entry point) in every component and on every version; only the API server
    of Airflow 3.1+ builds the page's app, and on 3.0 the plugin says where the page would be."""
    from airflow_provider_brev.ui import plugin

    loaded = [p for p in _loaded_plugins() if isinstance(p, plugin.BrevPlugin)]
    assert [p.name for p in loaded] == ["brev"]
    assert loaded[0].fastapi_apps == [] and getattr(loaded[0], "external_views", []) == []  # pytest: no API server
    where = plugin.page_location()
    assert re.search(r"/brev/ \(Browse -> Brev in the navigation\)", where)
    if not SERVES_PAGES:
        assert where.startswith("The Brev page needs Airflow 3.1+")


def _loaded_plugins() -> list[Any]:
    from airflow import plugins_manager

    loaded = getattr(plugins_manager, "_get_plugins", None)
    if loaded is not None:  # Airflow 3.1+
        return list(loaded()[0])
    plugins_manager.ensure_plugins_loaded()  # Airflow 3.0
    return list(plugins_manager.plugins or [])
