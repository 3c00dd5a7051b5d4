"""``make deployment-test``: the provider in a real distributed Airflow 3.3 deployment.

PostgreSQL metadata database, CeleryExecutor with Redis as broker, and scheduler, dag-processor, triggerer,
api-server and two Celery workers as separate processes, with the provider installed from its wheel into a
venv of its own. The Brev simulator and a moto S3 server stand in for Brev and S3. See deployment/README.md.

Two stages in one file:

* ``bootstrap`` (default; any Python 3.11 with the standard library): skips loudly when PostgreSQL or Redis is
  unreachable, builds the wheel, creates the deployment venv from uv.lock's ``deploy`` group plus the wheel, runs
  the ``run`` stage with that venv's Python, and afterwards kills anything left behind and drops the database.
* ``run`` (inside the deployment venv): starts everything, runs the checks, stops everything, prints a summary.

The API server's auth manager has users (``admin``; ``outsider``, who may not read the flagship's DAG): no
all-admins mode. The flagship runs twice with its default params (warm: the second run starts the first one's
stopped instance, deployment/warm_run.py) and ``brev_page_billing`` leaves an instance running; then the Brev page
is checked in Chromium (deployment/brev_page.py) and those two instances are deleted before the end's
"0 instances left".

Process, marker, database and Redis handling: deployment/processes.py; the checks: deployment/scenarios.py,
deployment/warm_run.py, deployment/brev_page.py and deployment/worker_kills.py; REST through the official client:
deployment/airflow_api.py; the browser (Playwright, Debian's Chromium): deployment/browser.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from browser import ensure_chromium, wait_chromium
from processes import (
    ARTIFACTS,
    DAGS,
    DATASET_PREFIX,
    MARKER,
    REDIS_HOST,
    REDIS_PORT,
    ROOT,
    Deployment,
    banner,
    describe_pid,
    drop_database_cli,
    kill_marked,
    log,
    marked_pids,
    services_missing,
    tcp_ok,
)

if TYPE_CHECKING:
    from scenarios import Scenarios


def bootstrap(args: argparse.Namespace) -> int:
    started = time.monotonic()
    missing = services_missing()
    if missing:
        banner(
            [
                "DEPLOYMENT TEST SKIPPED",
                f"Not reachable: {', '.join(missing)}.",
                "It needs PostgreSQL (trust auth for user postgres) and Redis on 127.0.0.1.",
                "On the python-svc machine they are started before each session and before CI.",
                "Nothing was tested.",
            ]
        )
        print("deployment-test: 0 passed, 0 failed, 1 skipped", flush=True)
        return 0
    uv = str(Path(args.uv).resolve())

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    workdir = Path(tempfile.mkdtemp(prefix="brev-deploy-"))
    test_id = secrets.token_hex(6)
    rc = 1
    (ARTIFACTS / "logs").mkdir()
    apt = ensure_chromium(ARTIFACTS / "logs" / "apt-chromium.log", log)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "UV_PROJECT"))}
        env["UV_LINK_MODE"] = "copy"
        t0 = time.monotonic()
        log("building the provider wheel")
        dist = workdir / "dist"
        subprocess.run([uv, "build", "--wheel", "--quiet", "-o", str(dist)], cwd=ROOT, env=env, check=True)
        wheels = sorted(dist.glob("airflow_provider_brev-*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"expected one wheel in {dist}, found {wheels}")
        wheel = wheels[0]
        requirements = workdir / "requirements-deploy.txt"
        subprocess.run(
            [
                uv, "export", "--frozen", "--quiet", "--no-default-groups", "--group", "deploy",
                "--no-emit-project", "--no-hashes", "--format", "requirements.txt", "-o", str(requirements),
            ],
            cwd=ROOT, env=env, check=True,
        )  # fmt: skip
        venv = workdir / "venv"
        log(f"creating the deployment venv ({wheel.name} + uv.lock's deploy group)")
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=workdir, env=env, check=True)
        py = venv / "bin" / "python"
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", str(py), "-r", str(requirements), str(wheel)],
            cwd=workdir, env=env, check=True,
        )  # fmt: skip
        install_seconds = time.monotonic() - t0
        log(f"wheel built and venv installed in {install_seconds:.1f} s")
        wait_chromium(apt, log)
        child_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("VIRTUAL_ENV", "PYTHON", "AIRFLOW", "AWS_", "BREV_", "FAKE_BREV", "UV_"))
        }
        child_env[MARKER] = test_id
        child_env["PATH"] = f"{venv / 'bin'}{os.pathsep}{child_env.get('PATH', '')}"
        cmd = [
            str(py), str(Path(__file__).resolve()), "run",
            "--workdir", str(workdir), "--wheel", str(wheel), "--test-id", test_id,
            "--install-seconds", f"{install_seconds:.1f}", "--started-at", str(time.time() - (time.monotonic() - started)),
        ]  # fmt: skip
        if args.keep_running:
            cmd.append("--keep-running")
        proc = subprocess.Popen(cmd, cwd=workdir, env=child_env, start_new_session=True)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                rc = proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                rc = 1
            rc = rc or 130
    except subprocess.CalledProcessError as err:
        log(f"bootstrap failed: {err}")
        rc = 1
    finally:
        if apt is not None and apt.poll() is None:
            apt.wait()  # never leave dpkg half-done
        t1 = time.monotonic()
        killed = kill_marked(test_id)
        log(f"leftover process sweep ({time.monotonic() - t1:.1f} s)")
        if killed:
            log(f"FAILED: {len(killed)} process(es) of this run were still alive and had to be killed:")
            for line in killed:
                print(f"    {line}")
            (ARTIFACTS / "leftover-processes.txt").write_text("\n".join(killed) + "\n")
            rc = rc or 1
        state_file = workdir / "state.json"
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if state.get("database") and not state.get("database_dropped"):
                drop_database_cli(state["database"])
            if state.get("redis_db") is not None and not state.get("redis_flushed"):
                tcp_ok(REDIS_HOST, REDIS_PORT, f"SELECT {int(state['redis_db'])}\r\nFLUSHDB\r\n".encode(), b"+OK")
        if not args.keep_workdir:
            t1 = time.monotonic()
            shutil.rmtree(workdir, ignore_errors=True)
            log(f"work directory removed ({time.monotonic() - t1:.0f} s)")
        else:
            log(f"work directory kept: {workdir}")
    log(f"total {time.monotonic() - started:.0f} s, exit code {rc}; artifacts in {ARTIFACTS.relative_to(ROOT)}/")
    passed = failed = 0
    with contextlib.suppress(OSError, ValueError):
        results = json.loads((ARTIFACTS / "summary.json").read_text())["checks"]
        passed = sum(1 for r in results if r["ok"])
        failed = len(results) - passed
    if rc and not failed:
        failed = 1  # the run stage never got to its checks, or something was left running
    print(f"deployment-test: {passed} passed, {failed} failed", flush=True)
    return rc


class Checks:
    """Named checks with a pass/fail outcome and details, printed at the end."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, name: str, ok: bool, detail: str = "") -> bool:
        with self._lock:
            self.results.append({"check": name, "ok": bool(ok), "detail": detail})
        log(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""))
        return ok

    def run(self, name: str, fn: Any, *args: Any) -> Any:
        try:
            detail = fn(*args)
        except Exception as err:
            self.record(name, False, f"{type(err).__name__}: {err}")
            traceback.print_exc()
            return None
        self.record(name, True, detail if isinstance(detail, str) else "")
        return detail

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if not r["ok"]]


def flagship_twice(scen: Scenarios, results: dict[str, Any]) -> dict[str, Any]:
    """The flagship triggered twice through REST with its default params (warm by default): the first run's
    result goes to ``results["flagship"]``; returns both runs and the evidence :func:`warm_run.check_warm_run`
    needs (the first run's stopped instance, when the second was triggered, the dataset's object count)."""
    from warm_run import kept_instance

    conf = {"bucket": scen.dep.bucket, "dataset_prefix": DATASET_PREFIX}
    first = results["flagship"] = scen.run_and_wait("flagship", conf)
    if first["state"] != "success":
        raise AssertionError(f"the first flagship run is {first['state']}: {first['states']}")
    kept = kept_instance(scen.api(), scen.dep.sim, first["run_id"])
    since = time.time()
    second = scen.run_and_wait("flagship", conf)
    if second["state"] != "success":
        raise AssertionError(f"the second flagship run is {second['state']}: {second['states']}")
    evidence = {"kept": kept, "since": since, "objects": scen.dep.dataset_objects}
    return {"first": first, "second": second, "evidence": evidence}


def run_stage(args: argparse.Namespace) -> int:
    from brev_page import check_brev_page
    from warm_run import check_warm_run
    from worker_kills import KillScenarios

    dep = Deployment(args)
    checks = Checks()
    scen = KillScenarios(dep)
    interrupted = False

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    try:
        dep.pick_redis_db()
        dep.create_database()
        log(f"PostgreSQL database {dep.database}, Redis db {dep.redis_db}, API on {dep.api_url}")
        dep.prepare()
        dep.start_s3()
        dep.start_airflow()
        checks.run("provider installed from the wheel", scen.check_wheel)
        checks.run("connection form metadata lists brev", scen.check_hook_meta)

        results: dict[str, Any] = {}

        def scenario(key: str, fn: Any, *a: Any) -> None:
            try:
                results[key] = fn(*a)
            except Exception as err:
                results[key] = err
                traceback.print_exc()

        t0 = time.monotonic()
        threads = [
            threading.Thread(target=scenario, args=("lifecycle", scen.run_and_wait, "lifecycle")),
            # the flagship twice with its default params (warm: the second run starts the first one's stopped
            # instance); results["flagship"] is the first run
            threading.Thread(target=scenario, args=("flagship_warm", flagship_twice, scen, results)),
            threading.Thread(target=scenario, args=("worker_kill", scen.worker_kill_scenario)),
            threading.Thread(target=scenario, args=("secret", scen.run_and_wait, "secret")),
            # an instance left billing, for the Brev page's fleet
            threading.Thread(target=scenario, args=("billing", scen.run_and_wait, "billing")),
        ]
        for t in threads:
            t.start()
        checks.run("headless Chromium screenshot of the brev add-connection form", scen.check_screenshot)
        for t in threads:
            t.join()
        dep.timings["dag_runs_wall_seconds"] = round(time.monotonic() - t0, 1)

        def from_result(key: str, check: Any) -> Any:
            value = results.get(key)
            if isinstance(value, Exception) or value is None:
                raise AssertionError(f"{type(value).__name__}: {value}")
            return check(value)

        checks.run("lifecycle DAG triggered via REST succeeds", from_result, "lifecycle", scen.check_lifecycle)
        checks.run("flagship DAG triggered via REST succeeds", from_result, "flagship", scen.check_flagship)
        checks.run(
            "a printed secret_env value is redacted in task logs, trigger logs and XCom",
            from_result,
            "secret",
            scen.check_secret_printed,
        )
        ok_runs = [results[k] for k in ("lifecycle", "flagship") if isinstance(results.get(k), dict)]
        checks.run("deferrable tasks went through the triggerer", scen.check_deferred, ok_runs)
        checks.run(
            "flagship triggered again (default params): starts the first run's instance, 0 image bytes, 0 unchanged"
            " objects downloaded, its cost report puts the bill first",
            from_result,
            "flagship_warm",
            lambda r: check_warm_run(scen.api(), dep.sim, r["second"]["run_id"], **r["evidence"]),
        )
        warm = results.get("flagship_warm")
        kept = [warm["evidence"]["kept"][0]] if isinstance(warm, dict) else []
        billing = results.get("billing")
        if isinstance(billing, dict) and billing["state"] == "success":
            kept.append(str(scen.api().xcom(DAGS["billing"], billing["run_id"], "create", native=True)))
        checks.run(
            "Brev page in Chromium: running and stopped instances, two flagship bars; outsider sees no flagship"
            " row; 401 without credentials; no request elsewhere",
            lambda: check_brev_page(
                dep, flagship_runs=[warm["first"]["run_id"], warm["second"]["run_id"]], warm=kept[0], billing=kept[1]
            ),
        )
        # what the janitor does once max_idle passed, and whoever left brev_page_billing's instance running
        checks.run("the warm and the billing instance deleted", scen.delete_instances, kept)
        checks.run(
            "task SIGKILLed on a worker is retried and finishes without a second launch",
            from_result,
            "worker_kill",
            lambda r: scen.check_worker_kill(r, 3),
        )
        # last: it takes a whole worker down
        scenario("worker_lost", scen.worker_lost_scenario)
        checks.run(
            "whole worker SIGKILLed: heartbeat timeout, retried on the other worker, no second launch",
            from_result,
            "worker_lost",
            lambda r: scen.check_worker_kill(r, 2),
        )
        checks.run("0 instances left", scen.check_no_instances)
        used = dep.workers_used()
        dep.timings["workloads_per_worker"] = used  # type: ignore[assignment]
        log(f"task workloads executed per Celery worker: {used}")
        if args.keep_running:
            log(f"--keep-running: API at {dep.api_url}; Ctrl-C to stop")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    except KeyboardInterrupt as err:
        interrupted = True
        checks.record("deployment test finished", False, f"interrupted ({err})")
    except Exception as err:
        checks.record("deployment set-up", False, f"{type(err).__name__}: {err}")
        traceback.print_exc()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        t0 = time.monotonic()
        stragglers = dep.stop_all()
        time.sleep(1)
        described = [d for d in map(describe_pid, marked_pids(dep.test_id)) if d]
        checks.record(
            "every process stopped",
            not described,
            f"{len(dep.procs)} components stopped in {time.monotonic() - t0:.0f} s"
            + (f" (SIGKILL needed for {stragglers})" if stragglers else "")
            + (f"; still running: {described}" if described else ""),
        )
        # keep Airflow's own task logs with the artifacts
        logs_dir = dep.workdir / "airflow" / "logs"
        if logs_dir.exists():
            shutil.copytree(logs_dir, ARTIFACTS / "airflow-logs", dirs_exist_ok=True)
        if dep.state.get("database"):
            try:
                dep.drop_database()
                checks.record("database dropped", True, dep.database)
            except Exception as err:
                checks.record("database dropped", False, str(err))
        with contextlib.suppress(Exception):
            dep.flush_redis_db()
    dep.timings["total_seconds"] = round(time.time() - float(args.started_at), 1)
    summary = {"checks": checks.results, "timings": dep.timings, "api_url": dep.api_url, "database": dep.database}
    (ARTIFACTS / "summary.json").write_text(json.dumps(summary, indent=1))
    passed = sum(1 for r in checks.results if r["ok"])
    failed = len(checks.failed)
    print()
    banner(
        [f"{'PASS' if r['ok'] else 'FAIL'}  {r['check']}" for r in checks.results]
        + [""]
        + [f"{k}: {v}" for k, v in dep.timings.items()],
        char="=",
    )
    print(f"checks: {passed} passed, {failed} failed", flush=True)
    return 130 if interrupted else (1 if failed else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="stage")
    boot = sub.add_parser("bootstrap")
    for p in (parser, boot):
        p.add_argument("--uv", default=str(ROOT / ".tools" / "bin" / "uv"))
        p.add_argument("--keep-workdir", action="store_true", help="do not delete the temporary work directory")
        p.add_argument("--keep-running", action="store_true", help="after the checks, keep the deployment up")
    run = sub.add_parser("run")
    run.add_argument("--workdir", required=True)
    run.add_argument("--wheel", required=True)
    run.add_argument("--test-id", required=True)
    run.add_argument("--install-seconds", default="0")
    run.add_argument("--started-at", default=str(time.time()))
    run.add_argument("--keep-running", action="store_true")
    args = parser.parse_args(argv)
    if args.stage == "run":
        return run_stage(args)
    return bootstrap(args)


if __name__ == "__main__":
    sys.exit(main())
