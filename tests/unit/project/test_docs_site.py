"""The built documentation site (``make docs``: ``.site/``) works opened from the file system, without a network.

The README says to open ``.site/index.html``; this test does exactly that in headless Chromium (Debian's, driven by
Playwright through deployment/browser.py) with every request that is not a ``file://`` one refused, and then:

* clicks nav links (a top-level page, a page in a sub-folder, back home) and checks that each one opened the page's
  HTML file, not a directory listing (mkdocs.yml: ``use_directory_urls: false``);
* searches and opens a result (mkdocs.yml: the ``offline`` plugin and the vendored iframe-worker shim);
* checks that no page asked for anything but files, fonts included (mkdocs.yml: ``theme.font: false``).

It reads the site ``make docs`` built (``make test`` builds it first). It is skipped only where Playwright is not
installed (the floor venv of ``make test-floor``); without Chromium it fails, saying how to install it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from types import ModuleType

    from playwright.sync_api import Page, Route

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / ".site"


def _browser_module() -> ModuleType:
    """deployment/browser.py (the deployment and smoke tests' Chromium), loaded from its file."""
    spec = importlib.util.spec_from_file_location("brev_deployment_browser", ROOT / "deployment" / "browser.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _expect_page(page: Page, path: str, heading: str) -> None:
    """The page shown is the site's ``path`` (its HTML file, not a directory listing) with this ``heading``."""
    from playwright.sync_api import expect

    expect(page).to_have_url(re.compile(rf"^{re.escape((SITE / path).as_uri())}(\?[^#]*)?(#.*)?$"))
    expect(page.locator("article h1").first).to_have_text(re.compile(rf"^{re.escape(heading)}\W*$"))  # and its ¶
    assert not page.title().startswith("Index of"), page.title()  # Chromium's file:// directory listing


def test_the_built_site_navigates_and_searches_from_file_urls_without_a_network(tmp_path: Path) -> None:
    pytest.importorskip("playwright")
    from playwright.sync_api import expect

    index = SITE / "index.html"
    assert index.is_file(), f"{index} is missing: build the site with `make docs` (`make test` does)"
    assert (SITE / "search" / "search_index.js").is_file(), f"{SITE} is an old build: rebuild it with `make docs`"
    requested: list[str] = []
    refused: list[str] = []

    def refuse_the_network(route: Route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort("internetdisconnected")

    with _browser_module().chromium_page(tmp_path, failure_name="docs-site-failure.png") as page:
        page.context.on("request", lambda request: requested.append(request.url))
        page.context.route("**/*", refuse_the_network)
        primary_nav = page.locator("nav.md-nav--primary")

        page.goto(index.as_uri())
        _expect_page(page, "index.html", "airflow-provider-brev")
        assert refused == [], "the home page needs the network"  # its scripts and styles have loaded by now
        primary_nav.get_by_role("link", name="Connection", exact=True).click()
        _expect_page(page, "connection.html", "The Brev connection")
        primary_nav.get_by_role("link", name="Instance lifecycle", exact=True).click()
        _expect_page(page, "howto/lifecycle.html", "Instance lifecycle")
        primary_nav.get_by_role("link", name="Home", exact=True).click()  # up from the sub-folder
        _expect_page(page, "index.html", "airflow-provider-brev")

        page.get_by_role("textbox", name="Search").fill("janitor")  # the header's search box (a wide window)
        results = page.locator("li.md-search-result__item a.md-search-result__link")
        janitor = results.and_(page.locator('[href*="howto/janitor.html"]')).first
        expect(janitor).to_be_visible()  # the search worker answered from the inlined index
        expect(page.locator(".md-search-result__meta")).to_have_text(re.compile(r"^\d+ matching documents?$"))
        janitor.click()
        _expect_page(page, "howto/janitor.html", "The janitor")

    assert refused == []
    assert [url for url in requested if not url.startswith("file:")] == []
    assert [url for url in requested if "font" in url] == []
    assert any(url.endswith("/search/search_index.js") for url in requested)  # the search really ran
