"""Many deferred readiness waits in one triggerer process: ``brev`` processes per second and detection lag.

One event loop drives ``--waits`` :class:`~airflow_provider_brev.triggers.brev.BrevInstanceReadyTrigger`
``run()`` generators at once with ``asyncio`` (as the triggerer runs every deferred task of its process in one
loop), each until its first event. Their instances are seeded in the simulator as DEPLOYING
(``create_instance_directly``) with a boot time drawn per instance (seeded) from ``--boot-min``..``--boot-max``
seconds of real time, so the waits end one after another, as deferred tasks started at different moments do.

Reported, all from the simulator's own records:

* ``brev_processes_per_s``: ``brev`` invocations recorded by the simulator (``calls.jsonl``) that started
  inside the wait window (the first trigger started → the last event), divided by the window; also the busiest
  one-second bucket and the count by subcommand;
* ``max_detection_lag_s`` / ``median_detection_lag_s``: per instance, from the moment the simulator made it
  ready (creation + deploy + max(build, sshd): status RUNNING, shell READY, exec probe answers) to the moment its
  trigger yielded its event. Which listing a given wait saw is not observable without instrumenting the
  product, so this end-to-end lag stands in for the longest gap between fresh statuses;
* ``max_listing_gap_s``: the longest gap between two consecutive ``brev ls`` starts in the window (how stale the
  freshest listing the process had could get);
* ``max_loop_lag_s``: the largest overshoot of a 50 ms ``asyncio.sleep`` in the same loop (a blocked loop
  delays every trigger of the triggerer);
* ``failed_waits``: waits that raised, yielded anything but ``success``, or had not finished by the bound.

    python benchmarks/bench_concurrent_waits.py --out result.json [--waits 50 --boot-min 20 --boot-max 90]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    WORK_DIR,
    calls_between,
    count_by_subcommand,
    progress,
    quiet_provider_logs,
    subcommand,
    summary,
    use_simulator,
    write_json,
)

TIMINGS = {
    "build_seconds": 2.0,
    "ssh_seconds": 1.0,  # sshd is up before the shell is READY: readiness is gated by the listing alone
    "delete_seconds": 0.5,
    "poll_seconds": 0.2,
    "probe_seconds": 0.2,
}
#: the poll interval BrevCreateInstanceOperator and BrevReadySensor hand to the trigger by default
POLL_INTERVAL = 1.0
#: seconds a trigger may go on after the slowest boot before it counts as failed
GRACE_SECONDS = 60.0
BASE = WORK_DIR / "concurrent_waits"
NAME_PREFIX = "bench-w-"


def seed_instances(sim: Any, count: int, boot_range: tuple[float, float], seed: int) -> dict[str, dict[str, float]]:
    """Create ``count`` DEPLOYING instances; name -> its deploy time and the wall-clock moment it becomes ready."""
    rng = random.Random(seed)
    clock_offset = sim.now() - time.time()  # simulated minus wall clock (0 unless someone advanced it)
    settle = max(TIMINGS["build_seconds"], TIMINGS["ssh_seconds"])
    seeded: dict[str, dict[str, float]] = {}
    for i in range(count):
        deploy = round(rng.uniform(*boot_range), 2)
        sim.set_timings(deploy_seconds=deploy)
        view = sim.create_instance_directly(f"{NAME_PREFIX}{i:02d}", status="DEPLOYING", ready=False)
        ready_at = float(view["created_at"]) - clock_offset + deploy + settle
        seeded[view["name"]] = {"deploy_s": deploy, "ready_at": ready_at}
    return seeded


async def first_event(trigger: Any) -> tuple[dict[str, Any], float]:
    """Drive one trigger's ``run()`` until its first event, as the triggerer does; (payload, wall-clock time)."""
    agen = trigger.run()
    try:
        event = await agen.__anext__()
        seen = time.time()
    finally:
        await agen.aclose()
    return dict(event.payload), seen


async def watch_loop_lag(stop: asyncio.Event, lags: list[float], interval: float = 0.05) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(interval)
        lags.append(loop.time() - before - interval)


async def run_waits(names: list[str], bound: float) -> dict[str, Any]:
    """All waits in this loop at once; returns per-name outcomes, the window and the loop lags."""
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.triggers.brev import BrevInstanceReadyTrigger

    await BrevHook(log_cli_output=False).alist_instances()  # login before the window, as on a warm triggerer
    stop = asyncio.Event()
    lags: list[float] = []
    monitor = asyncio.create_task(watch_loop_lag(stop, lags))
    started = time.time()
    deadline = started + bound
    tasks = {
        name: asyncio.create_task(
            first_event(BrevInstanceReadyTrigger(instance_name=name, deadline=deadline, poll_interval=POLL_INTERVAL))
        )
        for name in names
    }
    await asyncio.wait(tasks.values(), timeout=bound + 15)
    outcomes: dict[str, dict[str, Any]] = {}
    for name, task in tasks.items():
        if not task.done():
            task.cancel()
            outcomes[name] = {"ok": False, "error": f"no event within {bound + 15:.0f} s"}
        elif task.exception() is not None:
            err = task.exception()
            outcomes[name] = {"ok": False, "error": f"{type(err).__name__}: {err}"[:300]}
        else:
            payload, seen = task.result()
            ok = payload.get("status") == "success"
            outcomes[name] = {"ok": ok, "seen": seen, "status": payload.get("status")}
            if not ok:
                outcomes[name]["error"] = str(payload.get("message"))[:300]
    pending = [t for t in tasks.values() if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=10)
    stop.set()
    await monitor
    seen_times = [o["seen"] for o in outcomes.values() if "seen" in o]
    ended = max(seen_times) if seen_times else time.time()
    return {"outcomes": outcomes, "started": started, "ended": ended, "loop_lags": lags}


def listing_gaps(calls: list[dict[str, Any]], started: float, ended: float) -> list[float]:
    """Gaps between consecutive ``brev ls`` starts in the window, including from its start to the first one."""
    stamps = [started, *sorted(float(c["ts"]) for c in calls if subcommand(c["argv"]) == "ls"), ended]
    return [b - a for a, b in itertools.pairwise(stamps)]


def busiest_second(calls: list[dict[str, Any]], started: float) -> int:
    buckets: dict[int, int] = {}
    for call in calls:
        key = int(float(call["ts"]) - started)
        buckets[key] = buckets.get(key, 0) + 1
    return max(buckets.values(), default=0)


def delete_all(sim: Any, names: list[str]) -> list[str]:
    """Delete every seeded instance; returns the names still listed afterwards."""
    from airflow_provider_brev.hooks.brev import BrevHook

    hook = BrevHook(log_cli_output=False)
    listed = {i.name for i in hook.list_instances()}
    for name in names:
        if name in listed:
            hook.delete_instance(name)
    deadline = time.monotonic() + 30
    remaining = [i["name"] for i in sim.instances() if i["name"] in names]
    while remaining and time.monotonic() < deadline:
        time.sleep(TIMINGS["delete_seconds"])
        remaining = [i["name"] for i in sim.instances() if i["name"] in names]
    return remaining


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--waits", type=int, default=50)
    parser.add_argument("--boot-min", type=float, default=20.0, help="shortest deploy time (s)")
    parser.add_argument("--boot-max", type=float, default=90.0, help="longest deploy time (s)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    from airflow_provider_brev.testing.simulator import BrevSimulator

    shutil.rmtree(BASE, ignore_errors=True)
    sim = BrevSimulator(BASE / "sim", deploy_seconds=args.boot_min, **TIMINGS).install()
    use_simulator(sim, BASE / "home")
    quiet_provider_logs()
    import airflow_provider_brev.triggers.brev  # noqa: F401  (import before timing anything)

    seeded = seed_instances(sim, args.waits, (args.boot_min, args.boot_max), args.seed)
    names = sorted(seeded)
    bound = args.boot_max + max(TIMINGS["build_seconds"], TIMINGS["ssh_seconds"]) + GRACE_SECONDS
    progress(f"concurrent_waits: {args.waits} triggers in one loop, boots {args.boot_min:g}-{args.boot_max:g} s")
    try:
        run = asyncio.run(run_waits(names, bound))
    finally:
        leaked = delete_all(sim, names)
        leftover_pids = sim.sandbox_pids()
        sim.kill_all()

    outcomes = run["outcomes"]
    started, ended = run["started"], run["ended"]
    window = max(ended - started, 1e-6)
    calls = calls_between(sim, started, ended)
    lags = {n: o["seen"] - seeded[n]["ready_at"] for n, o in outcomes.items() if o["ok"]}
    gaps = listing_gaps(calls, started, ended)
    failures = {n: o.get("error") or o.get("status") for n, o in outcomes.items() if not o["ok"]}
    lag_summary = summary(lags.values())
    result = {
        "waits": args.waits,
        "timings": {**TIMINGS, "deploy_seconds_range": [args.boot_min, args.boot_max], "seed": args.seed},
        "poll_interval_s": POLL_INTERVAL,
        "model": "one asyncio loop, every BrevInstanceReadyTrigger.run() driven at once until its first event",
        "window_s": round(window, 3),
        "brev_processes": len(calls),
        "brev_processes_per_s": round(len(calls) / window, 3),
        "brev_processes_busiest_second": busiest_second(calls, started),
        "brev_processes_by_subcommand": count_by_subcommand(calls),
        "ls_per_s": round(sum(1 for c in calls if subcommand(c["argv"]) == "ls") / window, 3),
        "max_detection_lag_s": lag_summary.get("max"),
        "median_detection_lag_s": lag_summary.get("median"),
        "detection_lag_s": lag_summary,
        "max_listing_gap_s": round(max(gaps), 3) if gaps else None,
        "max_loop_lag_s": round(max(run["loop_lags"]), 3) if run["loop_lags"] else None,
        "loop_stalls_over_200ms": sum(1 for lag in run["loop_lags"] if lag > 0.2),
        "failed_waits": len(failures),
        "failure_messages": sorted({str(m) for m in failures.values()})[:10],
        "leaked_instances": len(leaked),
        "leftover_sandbox_processes": len(leftover_pids),
        "per_instance": {
            n: {"deploy_s": seeded[n]["deploy_s"], "detection_lag_s": round(lags[n], 3) if n in lags else None}
            for n in names
        },
    }
    write_json(Path(args.out), result)
    shutil.rmtree(BASE, ignore_errors=True)
    progress(
        f"concurrent_waits: {result['brev_processes_per_s']} brev processes/s over {window:.0f} s, detection lag "
        f"median {result['median_detection_lag_s']} s max {result['max_detection_lag_s']} s, "
        f"{result['failed_waits']} failed, {result['leaked_instances']} leaked"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
