"""``make airflow-smoke``: CI's smoke test of ``make airflow`` (scripts/airflow_local.py).

Starts :class:`LocalAirflow` on a free port with a fresh state directory (``.airflow-local/smoke/``), waits until
every component is healthy, then:

* REST (official ``apache-airflow-client`` through deployment/airflow_api.py): the examples are paused on start;
  ``example_brev_lifecycle`` is unpaused and triggered with no logical date, and succeeds, every task green;
* browser (Playwright driving Debian's Chromium through deployment/browser.py), what a newcomer does: add a Brev
  connection in the form (saved, then read back through the REST API as type ``brev``), trigger the lifecycle
  example from its page (the run succeeds), open a task's log;
* the flagship (``tao_visual_changenet_retrain``) triggered from its page with its default params while the
  machine is loaded (scripts/cpu_load.py: busy-loops, twice the cores): the run succeeds, and every TAO step ran
  its job exactly once (one job directory per step on the simulated instance, one TAO run per action) -- a retry
  after Airflow's deferral race must collect the finished job, never launch it again;
* the flagship triggered a second time through REST (no logical date, default params: warm by default) once the
  first run's instance is STOPPED: it starts that instance (same id, no ``brev create``), pulls 0 image bytes
  (the simulator's images are 3 GB each: the cold run pulled both), downloads none of the dataset's unchanged
  objects, and its cost report puts the bill first with a total equal to it (deployment/warm_run.py);
* the Brev page (Browse -> Brev, ``/plugin/brev``) after the two flagship runs: the warm pool lists the stopped
  instance under the flagship's ``reuse_key``, the fleet every instance RUNNING in the simulator at that moment
  (none by then: every example run ended; the deployment test shows one), the cost history a bar per flagship run
  linking to its cost report, and the page asked nothing of another host. ``make airflow`` runs the simple auth
  manager in all-admins mode (every request is made an admin's), so refusing an unauthenticated request and
  hiding a DAG from a user are checked by the deployment test, whose API server has users;
* ``example_brev_mixed_stages`` triggered through REST with its default params (its bucket, ``brev-examples``, is
  one the local S3 creates): the run succeeds, every task green;
* stop: no process carrying LocalAirflow's marker variable is left.

Screenshots, component logs and task logs go to ``artifacts/airflow-smoke/``. Exit code 1 on any failed check;
the last line is ``airflow-smoke: N passed, M failed``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "scripts")]

from airflow_api import AirflowApi, state_of  # noqa: E402
from airflow_local import LocalAirflow, free_port  # noqa: E402
from browser import brev_connection_form, chromium_page, ensure_chromium, login, wait_chromium  # noqa: E402
from cpu_load import cpu_load  # noqa: E402
from warm_run import FLAGSHIP, IMAGE_BYTES, check_warm_run, kept_instance  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.sync_api import Page

ARTIFACTS = ROOT / "artifacts" / "airflow-smoke"
SMOKE_ROOT = ROOT / ".airflow-local" / "smoke"
DAG_ID = "example_brev_lifecycle"
LIFECYCLE_TASKS = ("create_instance", "wait_until_ready", "nvidia_smi", "delete_instance", "cost_report")
UI_CONN_ID = "brev_from_the_form"
UI_TOKEN = "placeholder-typed-by-the-smoke-test"  # not a credential: the connection is never used
RUN_TIMEOUT = 240.0
#: The flagship's TAO steps and the action each runs.
FLAGSHIP_STEPS = {"gap_analysis": "vcn_aoi", "train": "train", "evaluate": "evaluate"}
FLAGSHIP_TIMEOUT = 900.0
#: The examples the REST checks trigger once each, at the same time, with their default params (the lifecycle
#: example and the flagship run in the checks above): every task of each must succeed.
OTHER_EXAMPLES = (
    "example_brev_mixed_stages",
    "example_brev_ephemeral_exec",
    "example_mixed_brev_lepton",
    "tao_visual_changenet_export_inference",
    "brev_janitor",
)
EXAMPLES_TIMEOUT = 900.0


def log(msg: str) -> None:
    print(f"[airflow-smoke {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Checks:
    """Named pass/fail results; a failing check records its error and the smoke test goes on where it can."""

    def __init__(self) -> None:
        self.results: list[tuple[str, bool, str]] = []

    def run(self, name: str, fn: Callable[[], str]) -> bool:
        try:
            detail = fn()
        except Exception as err:
            self.results.append((name, False, f"{type(err).__name__}: {err}"))
            log(f"FAIL {name}: {type(err).__name__}: {err}")
            (ARTIFACTS / f"failure-{name}.txt").write_text(traceback.format_exc())
            return False
        self.results.append((name, True, detail))
        log(f"ok   {name}: {detail}")
        return True

    @property
    def failed(self) -> int:
        return sum(1 for _, ok, _ in self.results if not ok)


class Smoke:
    def __init__(self) -> None:
        self.local = LocalAirflow(SMOKE_ROOT, port=free_port(), say=log)
        self.api: AirflowApi | None = None
        self.rest_run_id = ""
        self.ui_run_id = ""
        self.timings: dict[str, float] = {}
        self.flagship_run_id = ""
        self.warm_run_id = ""
        self.warm_instance = ""

    # ------------------------------------------------------------------------------------------- REST
    def start(self) -> str:
        t0 = time.monotonic()
        self.local.start()
        statuses = self.local.wait_healthy(timeout=240)
        assert self.local.sim is not None
        self.local.sim.set_docker(image_bytes=IMAGE_BYTES)  # a cold pull downloads something a warm run saves
        self.timings["startup_seconds"] = round(time.monotonic() - t0, 1)
        self.api = AirflowApi(self.local.url)
        self.api.wait_dag(DAG_ID, timeout=120)
        return f"{self.local.url} healthy after {self.timings['startup_seconds']} s ({self.local.timings}): {statuses}"

    def paused_on_start(self) -> str:
        assert self.api is not None
        self.api.login()
        dags = self.api.dags.get_dags(limit=100).dags
        unpaused = [d.dag_id for d in dags if not d.is_paused]
        assert len(dags) >= 5, f"expected the five examples, found {[d.dag_id for d in dags]}"
        assert not unpaused, f"unpaused on start: {unpaused}"
        return f"{len(dags)} example DAGs, all paused"

    def rest_trigger(self) -> str:
        assert self.api is not None
        self.api.unpause(DAG_ID)
        self.rest_run_id = self.api.trigger(DAG_ID)
        run = self.api.dag_run(DAG_ID, self.rest_run_id)
        assert run.logical_date is None, f"the run has logical date {run.logical_date}"
        return f"{self.rest_run_id} (logical date None)"

    def wait_success(self, run_id: str) -> str:
        assert self.api is not None
        t0 = time.monotonic()
        state = self.api.wait_run(DAG_ID, run_id, timeout=RUN_TIMEOUT)
        seconds = round(time.monotonic() - t0, 1)
        tis = {ti.task_id: state_of(ti) for ti in self.api.task_instances(DAG_ID, run_id)}
        self.save_task_logs(run_id, list(tis))
        assert state == "success", f"run {run_id} is {state}: {tis}"
        assert tis == dict.fromkeys(LIFECYCLE_TASKS, "success"), f"task states: {tis}"
        return f"{run_id} success after {seconds} s more; tasks {sorted(tis)} all success"

    def save_task_logs(self, run_id: str, task_ids: list[str], *, dag_id: str = DAG_ID) -> None:
        assert self.api is not None
        out = ARTIFACTS / "task-logs" / run_id.replace(":", "_").replace("+", "_")
        out.mkdir(parents=True, exist_ok=True)
        for task_id in task_ids:
            try:
                text = self.api.task_log(dag_id, run_id, task_id, 1)
            except Exception as err:
                text = f"<could not fetch: {err}>"
            (out / f"{task_id}.log").write_text(text)

    def rest_other_examples(self) -> str:
        """Every example not run above, triggered at once with its default params (``example_brev_mixed_stages``
        writes to ``brev-examples``, the Lepton one trains on the fake Lepton workspace): success, every task green."""
        assert self.api is not None
        t0 = time.monotonic()
        runs = {}
        for dag_id in OTHER_EXAMPLES:
            self.api.wait_dag(dag_id, timeout=120)
            self.api.unpause(dag_id)
            runs[dag_id] = self.api.trigger(dag_id)
        failed, done = [], []
        for dag_id, run_id in runs.items():
            left = max(1.0, EXAMPLES_TIMEOUT - (time.monotonic() - t0))
            state = self.api.wait_run(dag_id, run_id, timeout=left)
            tis = {ti.task_id: state_of(ti) for ti in self.api.task_instances(dag_id, run_id)}
            self.save_task_logs(run_id, list(tis), dag_id=dag_id)
            if state != "success" or set(tis.values()) != {"success"}:
                failed.append(f"{dag_id} {run_id} is {state}: {tis}")
            else:
                done.append(f"{dag_id} ({len(tis)} tasks)")
        assert not failed, "; ".join(failed)
        return f"all success within {round(time.monotonic() - t0, 1)} s: {', '.join(done)}"

    # ---------------------------------------------------------------------------------------- browser
    def ui_add_connection(self, page: Page) -> str:
        """Connections -> Add Connection -> NVIDIA Brev, a token, Save; read back through the REST API."""
        import airflow_client.client as af
        from playwright.sync_api import expect

        assert self.api is not None
        form = brev_connection_form(page, self.local.url, ARTIFACTS, conn_id=UI_CONN_ID)
        dialog = page.get_by_role("dialog")
        # the password sits in "Standard Fields", which opening "Extra Fields" collapsed; any text will do here (a
        # real token would end up in Playwright's error message if the fill failed)
        dialog.get_by_role("button", name="Standard Fields", exact=True).click()
        dialog.get_by_label("Brev API token").fill(UI_TOKEN)
        dialog.get_by_role("button", name="Save", exact=True).click()
        expect(dialog).to_be_hidden()
        expect(page.get_by_role("row").filter(has_text=UI_CONN_ID)).to_contain_text("brev")  # the list's row
        page.screenshot(path=str(ARTIFACTS / "connections-list.png"))
        saved = af.ConnectionApi(self.api.client).get_connection(UI_CONN_ID)
        assert saved.conn_type == "brev", f"saved as type {saved.conn_type!r}"
        return f"{UI_CONN_ID} saved as type brev; {form.extra_png.relative_to(ROOT)}, connections-list.png"

    def ui_trigger(self, page: Page) -> str:
        """The lifecycle example's page -> Trigger -> Trigger; the new run shows up in the REST API."""
        from playwright.sync_api import expect

        assert self.api is not None
        before = {r.dag_run_id for r in self.api.dag_runs(DAG_ID)}
        login(page, self.local.url, f"/dags/{DAG_ID}")
        page.get_by_role("button", name="Trigger Dag", exact=True).click(timeout=90_000)
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("Trigger Dag")
        page.screenshot(path=str(ARTIFACTS / "trigger-dialog.png"))
        dialog.get_by_role("button", name="Trigger", exact=True).click()
        # The toast, once POSTed. Chakra may render the same toast twice while it animates in (seen in CI): .first.
        expect(page.get_by_text("Dag Run Triggered").first).to_be_visible(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "triggered.png"))
        deadline = time.monotonic() + 30
        while not (new := [r for r in self.api.dag_runs(DAG_ID) if r.dag_run_id not in before]):
            assert time.monotonic() < deadline, "no new run 30 s after the UI said it triggered one"
            time.sleep(0.5)
        self.ui_run_id = str(new[0].dag_run_id)
        return f"{self.ui_run_id} ({new[0].run_type}, logical date {new[0].logical_date}); trigger-dialog.png"

    def provider_log_line(self, run_id: str, task_id: str) -> str:
        """The provider's first INFO line in a task's log file (outside Airflow's collapsed ``::group::``s)."""
        run_dir = self.local.airflow_home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
        depth = 0
        for line in (run_dir / f"task_id={task_id}" / "attempt=1.log").read_text().splitlines():
            record = json.loads(line)
            event = str(record.get("event", ""))
            depth += event.startswith("::group::") - event.startswith("::endgroup::")
            if depth == 0 and "airflow_provider_brev" in str(record.get("logger", "")):
                return event
        raise AssertionError(f"no log line of the provider in {task_id}'s log")

    def ui_task_log(self, page: Page) -> str:
        """The finished REST run's page -> task nvidia_smi -> its log shows the provider's line."""
        from playwright.sync_api import expect

        expected = self.provider_log_line(self.rest_run_id, "nvidia_smi")
        login(page, self.local.url, f"/dags/{DAG_ID}/runs/{self.rest_run_id}")
        # the grid's cell of this run's nvidia_smi (the task name links to the task across runs)
        page.locator(f'a[href$="/runs/{self.rest_run_id}/tasks/nvidia_smi"]').first.click(timeout=60_000)
        expect(page.get_by_text(expected).first).to_be_visible(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "task-log.png"), full_page=True)
        return f"nvidia_smi log shows {expected[:80]!r}; task-log.png"

    def ui_flagship_under_load(self, page: Page) -> str:
        """The flagship's page -> Trigger (default params) -> the run succeeds with the CPUs busy; one job per step."""
        from playwright.sync_api import expect

        assert self.api is not None
        self.api.unpause(FLAGSHIP)  # unpausing starts no run (no start_date; checked by the deployment test)
        with cpu_load() as loops:
            t0 = time.monotonic()
            before = {r.dag_run_id for r in self.api.dag_runs(FLAGSHIP)}
            login(page, self.local.url, f"/dags/{FLAGSHIP}")
            page.get_by_role("button", name="Trigger Dag", exact=True).click(timeout=120_000)
            dialog = page.get_by_role("dialog")
            expect(dialog).to_contain_text("Trigger Dag")
            page.screenshot(path=str(ARTIFACTS / "flagship-trigger-dialog.png"))
            dialog.get_by_role("button", name="Trigger", exact=True).click()
            expect(page.get_by_text("Dag Run Triggered").first).to_be_visible(timeout=120_000)
            deadline = time.monotonic() + 60
            while not (new := [r for r in self.api.dag_runs(FLAGSHIP) if r.dag_run_id not in before]):
                assert time.monotonic() < deadline, "no new flagship run 60 s after the UI said it triggered one"
                time.sleep(0.5)
            run_id = self.flagship_run_id = str(new[0].dag_run_id)
            state = self.api.wait_run(FLAGSHIP, run_id, timeout=FLAGSHIP_TIMEOUT)
            seconds = round(time.monotonic() - t0, 1)
            load = os.getloadavg()[0]
        tis = self.api.task_instances(FLAGSHIP, run_id)
        states = {ti.task_id: state_of(ti) for ti in tis}
        self.save_task_logs(run_id, list(states), dag_id=FLAGSHIP)
        assert state == "success", f"flagship run {run_id} is {state}: {states}"
        tries = {ti.task_id: ti.try_number for ti in tis}
        launches = self.job_launches(run_id)
        assert launches == dict.fromkeys(FLAGSHIP_STEPS, 1), f"job launches per step: {launches} (tries {tries})"
        return (
            f"{run_id} success in {seconds} s with {loops} busy-loops (load {load:.1f}); one job per step "
            f"(tries {tries})"
        )

    def rest_flagship_warm(self) -> str:
        """The flagship triggered again (REST, no logical date, default params: warm by default) once the first
        run's instance is STOPPED: the second run starts that instance (same id, no ``brev create``), pulls no image
        byte, downloads no unchanged dataset object, and its cost report puts the bill first, its total the bill
        (deployment/warm_run.py)."""
        assert self.api is not None and self.local.sim is not None
        sim, api = self.local.sim, self.api
        kept = kept_instance(api, sim, self.flagship_run_id)
        self.warm_instance = kept[0]
        t0 = time.time()
        run_id = self.warm_run_id = api.trigger(FLAGSHIP)
        state = api.wait_run(FLAGSHIP, run_id, timeout=FLAGSHIP_TIMEOUT)
        seconds = round(time.time() - t0, 1)
        states = {ti.task_id: state_of(ti) for ti in api.task_instances(FLAGSHIP, run_id)}
        self.save_task_logs(run_id, list(states), dag_id=FLAGSHIP)
        assert state == "success", f"warm flagship run {run_id} is {state}: {states}"
        warm = check_warm_run(api, sim, run_id, kept=kept, since=t0, objects=self.local.seeded_objects)
        return f"{run_id} success in {seconds} s: {warm}"

    def ui_brev_page(self, page: Page) -> str:
        """Browse -> Brev (the provider's page, in the UI's frame) after the two flagship runs: the warm pool lists
        the flagship's stopped instance, the fleet every instance billing at that moment, the cost history a bar
        per flagship run linking to its cost report; every request the page made went to the API server."""
        from urllib.parse import quote

        from playwright.sync_api import expect

        assert self.local.sim is not None
        requested: list[str] = []
        page.context.on("request", lambda request: requested.append(request.url))
        running = [i["name"] for i in self.local.sim.instances() if i["status"] == "RUNNING"]
        login(page, self.local.url, "/plugin/brev")
        frame = page.frame_locator("iframe")
        expect(frame.locator("#fleet")).to_be_visible(timeout=60_000)
        if self.warm_instance:
            expect(frame.locator("#warm-table tbody tr").filter(has_text=self.warm_instance)).to_contain_text(
                "tao-vcn-retrain"
            )
        for name in running:  # billing while the page loaded (none, once every example run ended)
            expect(frame.locator("#fleet-table tbody tr").filter(has_text=name)).to_contain_text("RUNNING")
        runs = [r for r in (self.flagship_run_id, self.warm_run_id) if r]
        bars = frame.locator(f'section[data-dag="{FLAGSHIP}"] svg a.bar')
        expect(bars).to_have_count(len(runs))
        hrefs = []
        for run_id in runs:
            href = frame.locator(f'section[data-dag="{FLAGSHIP}"] svg a.bar[data-run="{run_id}"]').get_attribute("href")
            assert (href or "").endswith(f"/runs/{quote(run_id, safe='')}/tasks/cost_report"), href
            hrefs.append(href)
        page.screenshot(path=str(ARTIFACTS / "brev-page.png"), full_page=True)
        url = self.local.url
        elsewhere = [u for u in requested if not u.startswith("data:") and not u.removeprefix("blob:").startswith(url)]
        assert f"{url}/brev/" in requested and not elsewhere, f"requests to another host: {elsewhere}"
        return (
            f"warm pool: {self.warm_instance or '-'}; billing: {running or 'nothing'}; {len(runs)} flagship bars "
            f"linking to {hrefs}; {len(requested)} requests, all to {url}; brev-page.png"
        )

    def job_launches(self, run_id: str) -> dict[str, int]:
        """How often each flagship step's command really started: its job directories on the simulated instances
        (a job that succeeded keeps its directory) and the TAO runs of its action, whichever is more."""
        from airflow_provider_brev.core.jobs.handle import DEFAULT_BASE_DIR, job_id_prefix

        sim = self.local.sim
        assert sim is not None
        found: dict[str, int] = {}
        for task_id, action in FLAGSHIP_STEPS.items():
            prefix = job_id_prefix(dag_id=FLAGSHIP, task_id=task_id, run_id=run_id) + "-t"
            dirs = [d for d in (sim.root / "instances").glob(f"*/home/{DEFAULT_BASE_DIR}/{prefix}*") if d.is_dir()]
            runs = [r for r in sim.tao_runs() if r.get("action") == action]
            found[task_id] = max(len(dirs), len(runs))
        return found

    # ------------------------------------------------------------------------------------------- stop
    def stop(self) -> str:
        killed = self.local.stop()
        left = self.local.left_running()
        for name in ("logs", "airflow/logs"):
            src = SMOKE_ROOT / name
            if src.exists():
                shutil.copytree(src, ARTIFACTS / name.replace("/", "-"), dirs_exist_ok=True)
        assert not left, f"processes left running: {left}"
        return f"all stopped (SIGKILL needed for: {killed or 'none'}); no process carries the marker"


def _fail(message: str) -> Callable[[], str]:
    def check() -> str:
        raise AssertionError(message)

    return check


def _browser_checks(checks: Checks, smoke: Smoke) -> None:
    """The newcomer's clicks; the REST run goes on meanwhile (its success is checked between them)."""
    with chromium_page(ARTIFACTS, env={**os.environ, "HOME": str(SMOKE_ROOT / "chromium-home")}) as page:
        page.set_default_navigation_timeout(120_000)  # the UI's first load is slow on a busy machine

        def in_browser(name: str, step: Callable[[Page], str]) -> bool:
            def check() -> str:
                try:
                    return step(page)
                except Exception:
                    page.screenshot(path=str(ARTIFACTS / f"failure-{name}.png"), full_page=True)
                    raise

            return checks.run(name, check)

        in_browser("ui_add_connection", smoke.ui_add_connection)
        ui_run = in_browser("ui_trigger", smoke.ui_trigger)  # runs alongside the REST run
        if checks.run("rest_run_success", lambda: smoke.wait_success(smoke.rest_run_id)):
            in_browser("ui_task_log", smoke.ui_task_log)
        if ui_run:
            checks.run("ui_run_success", lambda: smoke.wait_success(smoke.ui_run_id))
        if in_browser("ui_flagship_under_load", smoke.ui_flagship_under_load):
            checks.run("rest_flagship_warm", smoke.rest_flagship_warm)
            in_browser("ui_brev_page", smoke.ui_brev_page)


def main() -> int:
    t0 = time.monotonic()
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    shutil.rmtree(SMOKE_ROOT, ignore_errors=True)
    install = ensure_chromium(ARTIFACTS / "chromium-install.log", log=log)
    # a CI timeout's SIGTERM still stops what was started (Ctrl-C does: KeyboardInterrupt passes the finally below)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    checks, smoke = Checks(), Smoke()
    try:
        if checks.run("start", smoke.start):
            checks.run("paused_on_start", smoke.paused_on_start)
            if checks.run("rest_trigger", smoke.rest_trigger):
                if not wait_chromium(install, log=log):
                    checks.run("browser", _fail("/usr/bin/chromium is missing (see chromium-install.log)"))
                else:
                    try:
                        _browser_checks(checks, smoke)
                    except Exception as err:  # the browser did not start or stop
                        checks.run("browser", _fail(f"{type(err).__name__}: {err}"))
                if not any(name == "rest_run_success" for name, _, _ in checks.results):
                    checks.run("rest_run_success", lambda: smoke.wait_success(smoke.rest_run_id))
                checks.run("rest_other_examples", smoke.rest_other_examples)
    finally:
        checks.run("stop", smoke.stop)
    seconds = round(time.monotonic() - t0, 1)
    summary: dict[str, Any] = {
        "seconds": seconds,
        "timings": {**smoke.timings, **smoke.local.timings},
        "checks": [{"name": n, "ok": ok, "detail": d} for n, ok, d in checks.results],
    }
    (ARTIFACTS / "summary.json").write_text(json.dumps(summary, indent=1))
    log(f"took {seconds} s; artifacts in {ARTIFACTS.relative_to(ROOT)}/")
    passed = len(checks.results) - checks.failed
    print(f"airflow-smoke: {passed} passed, {checks.failed} failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
