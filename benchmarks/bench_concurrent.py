"""50 concurrent lifecycles on one worker's credentials (one HOME, one ``~/.brev``).

A pool of worker processes (forked after the provider is imported, one fresh process per lifecycle, as
Airflow runs each task in its own process) runs 50 lifecycles: ``create_instance`` (distinct names) →
``wait_until_ready`` → ``run_command`` appending the instance name to a per-instance counter file →
``delete_instance(wait=True)``. Every process starts with empty per-process caches, so each one probes the
CLI and goes through the login lock on the shared credentials file.

Reported: failures, leaked instances (still listed afterwards) and leftover sandbox processes, duplicate
launches (counter files with more than one line, and more than one instance created for a name), logins
(``brev login`` invocations), wall time.

    python benchmarks/bench_concurrent.py --out result.json [--lifecycles 50 --workers 20]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from _common import WORK_DIR, progress, quiet_provider_logs, subcommand, summary, use_simulator, write_json

TIMINGS = {
    "deploy_seconds": 1.0,
    "build_seconds": 0.3,
    "ssh_seconds": 1.0,
    "delete_seconds": 0.5,
    "poll_seconds": 0.2,
    "probe_seconds": 0.2,
}
BASE = WORK_DIR / "concurrent"
COUNTERS = BASE / "counters"


def lifecycle(index: int) -> dict[str, Any]:
    from airflow_provider_brev.hooks.brev import BrevHook

    name = f"bench-c-{index:02d}"
    started = time.time()
    phase = "create"
    try:
        hook = BrevHook(log_cli_output=False)
        hook.create_instance(name, gpu="L40S:1")
        phase = "wait_until_ready"
        hook.wait_until_ready(name, timeout=180)
        phase = "run_command"
        result = hook.run_command(name, f"echo {name} >> {COUNTERS / name}", log_output=False)
        phase = "delete_instance"
        hook.delete_instance(name, wait=True, timeout=180)
        ok = result.exit_code == 0
        error = None if ok else f"exit code {result.exit_code}"
    except Exception as err:
        ok = False
        error = f"{phase}: {type(err).__name__}: {err}"[:500]
        traceback.print_exc()
    return {"name": name, "ok": ok, "error": error, "seconds": round(time.time() - started, 3)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--lifecycles", type=int, default=50)
    parser.add_argument("--workers", type=int, default=20)
    args = parser.parse_args()

    from airflow_provider_brev.testing.simulator import BrevSimulator

    shutil.rmtree(BASE, ignore_errors=True)
    COUNTERS.mkdir(parents=True)
    sim = BrevSimulator(BASE / "sim", **TIMINGS).install()
    use_simulator(sim, BASE / "shared-home")
    quiet_provider_logs()
    import airflow_provider_brev.hooks.brev  # noqa: F401  (imported once, before the workers fork)

    progress(f"concurrent: {args.lifecycles} lifecycles on {args.workers} worker processes, one shared HOME")
    started = time.monotonic()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes=args.workers, maxtasksperchild=1) as pool:
        results = pool.map(lifecycle, range(args.lifecycles), chunksize=1)
    wall = time.monotonic() - started
    time.sleep(TIMINGS["delete_seconds"] + 0.2)

    names = [r["name"] for r in results]
    counter_lines = {}
    for n in names:
        path = COUNTERS / n
        counter_lines[n] = len(path.read_text().splitlines()) if path.exists() else 0
    created_per_name: Counter[str] = Counter()
    for meta_path in (sim.root / "instances").glob("*/meta.json"):
        created_per_name[json.loads(meta_path.read_text())["name"]] += 1
    runs_per_name: Counter[str] = Counter(r["instance"] for r in sim.runs() if str(COUNTERS) in r.get("command", ""))
    calls = sim.calls()
    leaked = [i["name"] for i in sim.instances()]
    leftover_pids = sim.sandbox_pids()
    if leftover_pids:
        sim.kill_all()
    failures = [r for r in results if not r["ok"]]
    extra_executions = sum(max(0, c - 1) for c in counter_lines.values())
    extra_instances = sum(max(0, c - 1) for c in created_per_name.values())
    missing_executions = sum(1 for r in results if r["ok"] and counter_lines[r["name"]] == 0)
    result = {
        "lifecycles": args.lifecycles,
        "workers": args.workers,
        "worker_model": "multiprocessing fork pool, maxtasksperchild=1 (a fresh process per lifecycle)",
        "shared_home": True,
        "timings": TIMINGS,
        "failures": len(failures),
        "failure_messages": sorted({f["error"] or "" for f in failures}),
        "leaked_instances": len(leaked),
        "leaked_instance_names": leaked,
        "leftover_sandbox_processes": len(leftover_pids),
        "duplicate_launches": extra_executions + extra_instances,
        "duplicate_command_executions": extra_executions,
        "duplicate_instances": extra_instances,
        "missing_command_executions": missing_executions,
        "work_exec_runs_beyond_one": sum(max(0, c - 1) for c in runs_per_name.values()),
        "logins": sum(1 for c in calls if subcommand(c["argv"]) == "login"),
        "cli_calls_total": len(calls),
        "cli_calls_by_subcommand": dict(Counter(subcommand(c["argv"]) for c in calls)),
        "cli_nonzero_exits": sum(1 for c in calls if c.get("exit_code") not in (0, None)),
        "wall_time_s": round(wall, 1),
        "lifecycle_seconds": summary(r["seconds"] for r in results),
    }
    write_json(Path(args.out), result)
    shutil.rmtree(BASE, ignore_errors=True)
    progress(
        f"concurrent: {result['failures']} failures, {result['leaked_instances']} leaked, "
        f"{result['duplicate_launches']} duplicate launches, {result['logins']} logins, {wall:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
