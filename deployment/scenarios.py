"""The checks of ``make deployment-test`` that drive the deployment from outside (see deployment/README.md).

REST calls go through the official client (deployment/airflow_api.py), the connection form through Playwright
and Debian's Chromium (deployment/browser.py). The worker-kill scenarios build on this in
deployment/worker_kills.py. Every client logs in as the deployment's ``admin`` (processes.Deployment.admin).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_api import AirflowApi, state_of
from processes import (
    ARTIFACTS,
    BRC_FIELDS,
    DAGS,
    DEFERRABLE_TASKS,
    MARKER,
    PRINTED_SECRET,
    ROOT,
    RUN_TIMEOUT,
    log,
)

from airflow_provider_brev.testing.evidence import cli_calls

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_client.client.models import DAGRunResponse, TaskInstanceResponse
    from processes import Deployment


class Scenarios:
    """Checks and DAG runs against a started :class:`processes.Deployment`."""

    def __init__(self, dep: Deployment) -> None:
        self.dep = dep
        self.observed: dict[str, dict[str, set[str]]] = {}  # dag_id -> task_id -> states seen while polling

    def api(self) -> AirflowApi:
        """A client of its own for the calling thread."""
        return AirflowApi(self.dep.api_url, user=self.dep.admin)

    def task_log_file(self, dag_id: str, run_id: str, task_id: str) -> Path:
        """Airflow's log folder of one task (shared by workers, triggerer and api-server)."""
        return self.dep.workdir / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"

    # ------------------------------------------------------------------------------------ installation
    def check_wheel(self) -> str:
        import airflow_provider_brev

        location = Path(airflow_provider_brev.__file__).resolve()
        venv = Path(sys.prefix).resolve()
        if not str(location).startswith(str(venv)):
            raise AssertionError(f"airflow_provider_brev imported from {location}, not from the venv {venv}")
        dist = importlib.metadata.distribution("airflow-provider-brev")
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct.get("dir_info", {}).get("editable") or not direct.get("url", "").endswith(".whl"):
            raise AssertionError(f"not installed from a wheel: {direct}")
        providers = {p.package_name: p for p in self.api().providers()}
        brev = providers.get("airflow-provider-brev")
        if not brev:
            raise AssertionError(f"the API server does not list the provider: {sorted(providers)}")
        return f"{Path(direct['url']).name} in site-packages; API server lists {brev.package_name} {brev.version}"

    def check_hook_meta(self) -> str:
        meta = self.api().hook_meta()
        (ARTIFACTS / "hook_meta.json").write_text(json.dumps(meta, indent=1))
        brev = next((m for m in meta if m.get("connection_type") == "brev"), None)
        if brev is None:
            raise AssertionError(
                f"connection type brev missing from hook_meta: {[m.get('connection_type') for m in meta]}"
            )
        (ARTIFACTS / "hook_meta_brev.json").write_text(json.dumps(brev, indent=1))
        extra = brev.get("extra_fields") or {}
        missing = [f for f in BRC_FIELDS if f not in extra]
        if missing:
            raise AssertionError(f"brev extra fields missing: {missing}; got {sorted(extra)}")
        std = brev.get("standard_fields") or {}
        password = std.get("password") or {}
        if password.get("title") != "Brev API token":
            raise AssertionError(f"password field not relabelled: {password}")
        hidden = sorted(k for k, v in std.items() if isinstance(v, dict) and v.get("hidden"))
        return f"{brev.get('hook_name')!r}: extra fields {sorted(extra)}; hidden {hidden}"

    def check_screenshot(self) -> str:
        """Connections -> Add Connection -> "NVIDIA Brev" in headless Chromium (Playwright), two screenshots."""
        from browser import brev_connection_form, chromium_page, describe

        home = self.dep.workdir / "chromium-home"
        home.mkdir(exist_ok=True)
        env = {**os.environ, MARKER: self.dep.test_id, "HOME": str(home)}
        token = self.api().login()
        with chromium_page(ARTIFACTS, env=env, failure_name="connection-form-failure.png") as page:
            form = brev_connection_form(page, self.dep.api_url, ARTIFACTS, token=token)
        size = form.extra_png.stat().st_size
        if size < 10_000:
            raise AssertionError(f"screenshot suspiciously small ({size} bytes)")
        return describe(form, ROOT)

    # ------------------------------------------------------------------------------------ DAG runs
    def observer(self, dag_id: str) -> Callable[[DAGRunResponse, list[TaskInstanceResponse]], None]:
        """Records every task state seen while polling (a ``deferred`` in passing, for instance)."""
        seen = self.observed.setdefault(dag_id, {})

        def on_poll(run: DAGRunResponse, tis: list[TaskInstanceResponse]) -> None:
            for ti in tis:
                seen.setdefault(ti.task_id, set()).add(state_of(ti))

        return on_poll

    def run_and_wait(self, key: str, conf: dict[str, Any] | None = None) -> dict[str, Any]:
        """Unpause and trigger one DAG through the REST API, wait for it and for the runs the scheduler made."""
        dag_id = DAGS[key]
        api = self.api()
        api.unpause(dag_id)
        run_id = api.trigger(dag_id, conf=conf)
        log(f"triggered {dag_id} via REST: {run_id}")
        t0 = time.monotonic()
        final = api.wait_run(dag_id, run_id, timeout=RUN_TIMEOUT, on_poll=self.observer(dag_id))
        elapsed = time.monotonic() - t0
        self.dep.timings[f"{key}_run_seconds"] = round(elapsed, 1)
        tis = api.task_instances(dag_id, run_id)
        self.save_task_logs(api, dag_id, run_id, tis)
        # Runs the scheduler made on its own once the DAG was unpaused (the flagship must make none: no surprise
        # billed run on first unpause): wait for them too, nothing may still be creating instances at the end.
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            others = [r for r in api.dag_runs(dag_id) if r.dag_run_id != run_id]
            if all(state_of(r) in ("success", "failed") for r in others) or time.monotonic() > deadline:
                break
            time.sleep(1)
        for other in others:
            self.save_task_logs(api, dag_id, other.dag_run_id, api.task_instances(dag_id, other.dag_run_id))
        return {
            "dag_id": dag_id,
            "run_id": run_id,
            "state": final,
            "states": {ti.task_id: state_of(ti) for ti in tis},
            "tis": tis,
            "seconds": elapsed,
            "others": [(r.dag_run_id, str(getattr(r.run_type, "value", r.run_type)), state_of(r)) for r in others],
        }

    def save_task_logs(self, api: AirflowApi, dag_id: str, run_id: str, tis: list[TaskInstanceResponse]) -> None:
        out = ARTIFACTS / "task-logs" / dag_id
        out.mkdir(parents=True, exist_ok=True)
        for ti in tis:
            for try_number in range(1, int(ti.try_number or 0) + 1):
                try:
                    text = api.task_log(dag_id, run_id, ti.task_id, try_number)
                except Exception as err:
                    text = f"<could not fetch: {err}>"
                (out / f"{ti.task_id}.try{try_number}.log").write_text(text)

    def check_lifecycle(self, result: dict[str, Any]) -> str:
        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}")
        bad = {t: s for t, s in result["states"].items() if s != "success"}
        if bad:
            raise AssertionError(f"tasks not successful: {bad}")
        if any(o[2] != "success" for o in result["others"]):
            raise AssertionError(f"other runs: {result['others']}")
        return f"success in {result['seconds']:.0f} s: {result['states']}"

    def check_flagship(self, result: dict[str, Any]) -> str:
        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}")
        if result["others"]:
            raise AssertionError(f"unpausing the flagship started runs nobody asked for: {result['others']}")
        if result["states"].get("promote") != "success":
            raise AssertionError(f"promote {result['states'].get('promote')}")
        bucket = self.dep.bucket
        keys = [o["Key"] for o in self.dep.s3.list_objects_v2(Bucket=bucket, Prefix="runs/").get("Contents", [])]
        if not any(k.endswith("/train/status.json") for k in keys):
            raise AssertionError(f"no train/status.json uploaded under s3://{bucket}/runs/: {keys[:20]}")
        return (
            f"success in {result['seconds']:.0f} s: {len(result['states'])} tasks; {len(keys)} result objects in "
            f"s3://{bucket}/runs/; unpausing made no run of its own"
        )

    def check_secret_printed(self, result: dict[str, Any]) -> str:
        """A secret printed by the remote commands is in no task log, trigger log file or XCom; ``key=***`` is."""
        if result["state"] != "success":
            raise AssertionError(f"run {result['state']}: {result['states']}")
        api = self.api()
        dag_id, run_id = result["dag_id"], result["run_id"]
        trigger_logs = sorted(self.task_log_file(dag_id, run_id, "deferred").glob("attempt=*.log.trigger.*.log"))
        if not trigger_logs:
            raise AssertionError("the deferred task left no trigger log file")
        texts = {f"{p.parent.name}/{p.name}": p.read_text(errors="replace") for p in trigger_logs}
        for task_id in ("detached", "foreground", "deferred"):
            texts[f"{task_id} task log"] = api.task_log(dag_id, run_id, task_id, 1)
            value = api.xcom(dag_id, run_id, task_id)
            texts[f"{task_id} XCom"] = json.dumps(value)
            if "key=***" not in texts[f"{task_id} XCom"]:
                raise AssertionError(f"{task_id}: the XCom lacks the redacted line: {value}")
        leaked = [name for name, text in texts.items() if PRINTED_SECRET in text]
        if leaked:
            raise AssertionError(f"the printed secret appears in {leaked}")
        if not any("key=***" in text for name, text in texts.items() if "trigger" in name):
            raise AssertionError("the trigger log does not show the redacted line")
        return f"secret in none of {len(texts)} logs/XComs (task logs, {len(trigger_logs)} trigger log file(s))"

    def check_deferred(self, results: list[dict[str, Any]]) -> str:
        """Every deferrable task deferred on its worker and its trigger ran in our triggerer process."""
        api = self.api()
        triggerer_jobs = api.triggerer_job_ids()
        if not triggerer_jobs:
            raise AssertionError("no TriggererJob in the database")
        if len(results) < 2:
            raise AssertionError("the lifecycle and flagship runs did not both finish")
        notes = []
        for result in results:
            dag_id, run_id = result["dag_id"], result["run_id"]
            for task_id in DEFERRABLE_TASKS.get(dag_id, []):
                ti = next(t for t in result["tis"] if t.task_id == task_id)
                try_number = int(ti.try_number)
                text = api.task_log(dag_id, run_id, task_id, try_number)
                needed = [
                    "Pausing task as DEFERRED",
                    f"{task_id}/-1/{try_number} (ID",
                    "Trigger fired event",
                    "trigger completed",
                ]
                missing = [n for n in needed if n not in text]
                if missing:
                    raise AssertionError(f"{dag_id}.{task_id}: the task log lacks {missing}")
                folder = self.task_log_file(dag_id, run_id, task_id)
                trigger_logs = sorted(folder.glob(f"attempt={try_number}.log.trigger.*.log"))
                jobs = {int(p.name.rsplit(".", 2)[-2]) for p in trigger_logs}
                if not jobs or not jobs <= triggerer_jobs:
                    raise AssertionError(
                        f"{dag_id}.{task_id}: trigger log files {[p.name for p in trigger_logs]} do not name the "
                        f"triggerer job(s) {sorted(triggerer_jobs)}"
                    )
                seen = self.observed.get(dag_id, {}).get(task_id, set())
                notes.append(f"{task_id}" + (" (deferred seen via REST)" if "deferred" in seen else ""))
        return (
            f"{len(notes)} tasks deferred on a worker, their triggers ran in TriggererJob {sorted(triggerer_jobs)} "
            f"(trigger log files) and fired: {', '.join(notes)}"
        )

    # ------------------------------------------------------------------------------------ the end
    def delete_instances(self, names: list[str]) -> str:
        """``brev delete`` the instances runs left on purpose (a warm one stopped, one billing), by id, logged in
        with a ``HOME`` of its own (the components' stays theirs)."""
        if not names:
            raise AssertionError("no instance to delete: the runs that keep one did not finish")
        home = self.dep.workdir / "cleanup-home"
        self.dep.sim.login(home)
        for name in names:
            instance = self.dep.sim.instance(name)
            if instance is None:
                raise AssertionError(f"{name} is gone already")
            done = subprocess.run(
                ["brev", "delete", instance["id"]],
                env={**self.dep.env, "HOME": str(home)},
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            if done.returncode != 0:
                raise AssertionError(f"brev delete {instance['id']} ({name}): {done.stderr[-500:]}")
        return f"deleted {names}"

    def check_no_instances(self) -> str:
        sim = self.dep.sim
        deadline = time.monotonic() + 60
        while sim.instances() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = sim.instances()
        if left:
            raise AssertionError(f"{len(left)} instance(s) left: {[i['name'] for i in left]}")
        api = self.api()
        runs = sum(len(api.dag_runs(dag_id)) for dag_id in DAGS.values())
        calls = sim.calls()
        names = [
            c["argv"][1]
            for c in calls
            if c.get("argv", [])[:1] == ["create"] and len(c["argv"]) > 1 and not c["argv"][1].startswith("-")
        ]
        # one instance per DAG run, never a second one; a warm run starts the stopped instance instead
        starts = len(cli_calls(sim, "start"))
        if len(names) + starts != runs or len(set(names)) != len(names):
            raise AssertionError(f"{len(names)} brev create and {starts} start calls for {runs} DAG runs: {names}")
        return (
            f"0 instances left; {len(names)} brev create and {starts} brev start calls for {runs} DAG runs, "
            f"{len(calls)} brev invocations in all"
        )
