"""The Brev page of the Airflow UI (``/brev/``, the provider's plugin) in ``make deployment-test``.

After the flagship ran twice (warm: its instance is stopped in the warm pool) and ``brev_page_billing`` left an
instance RUNNING, the deployment's API server (auth manager: :mod:`airflow_provider_brev.testing.page_auth`,
``outsider`` may not read the flagship's DAG) serves the page:

* without credentials: refused (401);
* in Chromium as ``admin`` (deployment/browser.py): the fleet lists the billing instance RUNNING (``brev ls``, run
  by the API server), the warm pool the flagship's stopped instance under its ``reuse_key``, the cost history a
  bar per flagship run linking to its ``cost_report`` task; screenshot ``brev-page.png``;
* in Chromium as ``outsider``: the billing instance, and none of the flagship's rows (its DAG, its instance);
  screenshot ``brev-page-outsider.png``;
* every request the browser made went to the API server.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import quote

from processes import ARTIFACTS, MARKER
from warm_run import FLAGSHIP

from airflow_provider_brev.testing.page_auth import ADMIN, OUTSIDER, request, token

if TYPE_CHECKING:
    from processes import Deployment

#: The flagship's ``reuse_key`` (its DAG's default param), shown in the warm pool.
FLAGSHIP_REUSE_KEY = "tao-vcn-retrain"


def check_brev_page(dep: Deployment, *, flagship_runs: list[str], warm: str, billing: str) -> str:
    """The checks of the module docstring; ``warm``: the flagship's stopped instance, ``billing``: the running one."""
    from browser import chromium_page, login
    from playwright.sync_api import expect

    base = dep.api_url
    status, _ = request(f"{base}/brev/")
    if status != 401:
        raise AssertionError(f"a request without credentials got {status}, not 401")
    admin = token(base, ADMIN, dep.passwords[ADMIN])
    outsider = token(base, OUTSIDER, dep.passwords[OUTSIDER])
    home = dep.workdir / "chromium-home"
    home.mkdir(exist_ok=True)
    requested: list[str] = []
    with chromium_page(ARTIFACTS, env={**os.environ, MARKER: dep.test_id, "HOME": str(home)}) as page:
        page.context.on("request", lambda r: requested.append(r.url))
        login(page, base, "/brev/", token=admin)
        fleet = page.locator("#fleet-table tbody tr")
        expect(fleet.filter(has_text=billing)).to_contain_text("RUNNING", timeout=90_000)  # live, from `brev ls`
        expect(fleet.filter(has_text=warm)).to_have_count(0)  # stopped: in the warm pool, not billing
        expect(page.locator("#warm-table tbody tr").filter(has_text=warm)).to_contain_text(FLAGSHIP_REUSE_KEY)
        section = f'section[data-dag="{FLAGSHIP}"] svg'
        expect(page.locator(f"{section} a.bar")).to_have_count(len(flagship_runs))
        for run_id in flagship_runs:
            href = page.locator(f'{section} a.bar[data-run="{run_id}"]').get_attribute("href") or ""
            if not href.endswith(f"/runs/{quote(run_id, safe='')}/tasks/cost_report"):
                raise AssertionError(f"the bar of {run_id} links to {href!r}")
        page.screenshot(path=str(ARTIFACTS / "brev-page.png"), full_page=True)

        page.context.clear_cookies()
        login(page, base, "/brev/", token=outsider)
        expect(page.locator("#fleet-table tbody tr").filter(has_text=billing)).to_contain_text("RUNNING")
        shown = page.content()
        page.screenshot(path=str(ARTIFACTS / "brev-page-outsider.png"), full_page=True)
        leaked = [text for text in (FLAGSHIP, warm, *flagship_runs) if text in shown]
        if leaked:
            raise AssertionError(f"outsider, who may not read {FLAGSHIP}, sees {leaked}")
    elsewhere = [u for u in requested if not u.startswith("data:") and not u.removeprefix("blob:").startswith(base)]
    if f"{base}/brev/" not in requested or elsewhere:
        raise AssertionError(f"requests to another host: {elsewhere}")
    return (
        f"401 without credentials; admin: {billing} RUNNING in the fleet, {warm} stopped in the warm pool, "
        f"{len(flagship_runs)} flagship bars linking to their cost reports; outsider: none of {FLAGSHIP}'s rows; "
        f"{len(requested)} requests, all to {base}; brev-page.png, brev-page-outsider.png"
    )
