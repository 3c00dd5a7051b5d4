"""Debian's Chromium driven by Playwright for Python, for the deployment and smoke tests' UI checks.

No browser download: Playwright launches ``/usr/bin/chromium`` (Debian's package, installed by
:func:`ensure_chromium` when missing) with ``executable_path``. Importing this module needs only the standard
library (the deployment test's bootstrap stage runs it with the machine's ``python3``); Playwright is imported by
:func:`chromium_page`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from playwright.sync_api import Locator, Page

CHROMIUM = "/usr/bin/chromium"
#: installs it with apt-get (also `make chromium`, which `make test` runs)
INSTALL_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install_chromium.sh"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
VIEWPORT = {"width": 1400, "height": 1000}
#: The labels of the provider's extra fields in the connection form (``BrevHook.get_connection_form_widgets``).
BREV_EXTRA_LABELS = ("API key", "Org id", "Org name", "brev CLI path", "Cloud credential id", "Workspace group id")
#: Standard fields the provider hides (``BrevHook.get_ui_field_behaviour``).
BREV_HIDDEN_LABELS = ("Host", "Login", "Port", "Schema")


def ensure_chromium(logfile: Path, log: Callable[[str], None] = print) -> subprocess.Popen[bytes] | None:
    """Start ``apt-get install chromium`` in the background when it is missing (root only).

    Returns the installer process, or None when Chromium is there already or cannot be installed here (then
    :func:`wait_chromium` reports it missing).
    """
    if os.access(CHROMIUM, os.X_OK):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(f"{CHROMIUM} is missing and cannot be installed here (needs root and apt-get): browser checks will fail")
        return None
    log(f"installing Debian's chromium in the background ({INSTALL_SCRIPT.name}: apt-get)")
    fh = logfile.open("wb")
    try:
        return subprocess.Popen(
            ["bash", str(INSTALL_SCRIPT)], stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT
        )
    finally:
        fh.close()  # the child keeps its own descriptor


def wait_chromium(install: subprocess.Popen[bytes] | None, log: Callable[[str], None] = print) -> bool:
    """Wait for a background install from :func:`ensure_chromium` (never leave dpkg half-done); True when usable."""
    if install is not None:
        t0 = time.monotonic()
        rc = install.wait()
        log(f"chromium install finished (exit code {rc}, waited {time.monotonic() - t0:.0f} s)")
    return os.access(CHROMIUM, os.X_OK)


@contextlib.contextmanager
def chromium_page(
    artifacts_dir: Path, *, env: Mapping[str, str] | None = None, failure_name: str = "browser-failure.png"
) -> Iterator[Page]:
    """A Playwright page in headless Debian Chromium; on an exception the page is saved as ``failure_name``."""
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        raise AssertionError(
            f"{CHROMIUM} is not installed: install Debian's chromium package (`make chromium` does as root, or"
            " `apt-get install -y chromium`); Playwright drives it, it downloads no browser"
        )
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        launch_env: dict[str, str | float | bool] | None = dict(env) if env is not None else None
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS), env=launch_env, timeout=60_000
        )
        try:
            context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
            page = context.new_page()
            page.set_default_timeout(30_000)
            try:
                yield page
            except BaseException:
                with contextlib.suppress(Exception):
                    page.screenshot(path=str(artifacts_dir / failure_name), full_page=True)
                raise
        finally:
            browser.close()


def login(page: Page, base_url: str, path: str = "/", *, token: str | None = None) -> None:
    """Open ``path`` logged in: with ``token`` (a user's JWT) as the UI's token cookie, else through the simple
    auth manager's all-admins login, which sets that cookie."""
    base = base_url.rstrip("/")
    target = urllib.parse.quote(f"{base}{path}", safe=":/")  # run ids hold '+': unquoted it would become a space
    if token is not None:
        page.context.add_cookies([{"name": "_token", "value": token, "url": base}])
        page.goto(target, timeout=90_000)
        return
    page.goto(f"{base}/auth/token/login?next={target}", timeout=90_000)  # slow on a busy machine


def _wait_settled(page: Page, dialog: Locator) -> None:
    """Until no CSS animation or transition runs inside the dialog (it fades in, accordions slide open)."""
    handle = dialog.element_handle()
    page.wait_for_function("el => el.getAnimations({subtree: true}).every(a => a.playState !== 'running')", arg=handle)


@dataclass(frozen=True)
class ConnectionForm:
    """What the add-connection dialog showed for "NVIDIA Brev"."""

    standard_text: str
    extra_text: str
    standard_png: Path
    extra_png: Path


def brev_connection_form(
    page: Page,
    base_url: str,
    artifacts_dir: Path,
    *,
    conn_id: str = "brev_default",
    prefix: str = "brev-connection-form",
    token: str | None = None,
) -> ConnectionForm:
    """Connections -> Add Connection -> type "NVIDIA Brev", as a newcomer does; leaves the dialog open.

    Checks that the password field is relabelled "Brev API token", that the standard fields the provider hides are
    not shown and that the "Extra Fields" section holds the provider's fields. Saves ``<prefix>-standard.png``
    (standard fields), ``<prefix>.png`` (Extra Fields opened) and ``<prefix>.txt`` (both texts) in
    ``artifacts_dir``. The caller may go on filling the dialog and save it. ``token``: as :func:`login`.
    """
    from playwright.sync_api import expect

    login(page, base_url, "/connections", token=token)
    add = page.get_by_role("button", name="Add Connection")
    add.click(timeout=90_000)  # the first load of the UI bundle is slow on a busy machine
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    _wait_settled(page, dialog)
    # the connection type is a searchable select; its options come from hook_meta once that request returns
    dialog.get_by_role("combobox").first.click()
    page.keyboard.type("NVIDIA Brev")
    page.get_by_role("option", name="NVIDIA Brev", exact=True).click()
    expect(dialog).to_contain_text("Brev API token")
    dialog.locator("input[name=connection_id]").fill(conn_id)
    _wait_settled(page, dialog)
    standard = dialog.inner_text()
    shown = [label for label in BREV_HIDDEN_LABELS if f"\n{label}\n" in f"\n{standard}\n"]
    if shown:
        raise AssertionError(f"fields the provider hides are shown: {shown}")
    standard_png = artifacts_dir / f"{prefix}-standard.png"
    page.screenshot(path=str(standard_png))
    # the provider's own fields sit in the collapsed "Extra Fields" accordion item
    dialog.get_by_role("button", name="Extra Fields", exact=True).click()
    for label in BREV_EXTRA_LABELS:
        expect(dialog).to_contain_text(label)
    _wait_settled(page, dialog)
    # a viewport tall enough for the whole dialog, so that one picture shows every field
    height = page.evaluate(
        "el => { const r = el.getBoundingClientRect(); return Math.ceil(r.height + 2 * Math.max(r.top, 40)); }",
        dialog.element_handle(),
    )
    page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(height or 0))})
    page.evaluate("window.scrollTo(0, 0)")
    _wait_settled(page, dialog)
    extra = dialog.inner_text()
    extra_png = artifacts_dir / f"{prefix}.png"
    page.screenshot(path=str(extra_png))
    (artifacts_dir / f"{prefix}.txt").write_text(f"{standard}\n----- Extra Fields opened -----\n{extra}")
    return ConnectionForm(standard, extra, standard_png, extra_png)


def describe(form: ConnectionForm, root: Path) -> str:
    """One line for a check's detail."""
    size = form.extra_png.stat().st_size
    labels = json.dumps(["Brev API token", *BREV_EXTRA_LABELS])
    return f"{form.extra_png.relative_to(root)} ({size // 1024} KiB); form shows {labels}"
