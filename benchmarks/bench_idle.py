"""Billed idle overhead per lifecycle: the provider's hook path vs the seed's shell recipe, same timings.

Each round creates one instance through the provider (``create_instance`` → ``wait_until_ready`` with the
provider's default poll → ``run_command`` → ``delete_instance``) and, at the same time on a second simulator
root with identical timings, one through ``benchmarks/seed_recipe.sh``. Both do the same work command.

Idle overhead = ready-detection lag + end-of-work → delete lag, all from the simulator's own records:

* ready-detection lag: sshd up on the instance (state ``t_ssh_up``) → the work command started on the
  instance (``runs.jsonl`` ts);
* end-of-work → delete: the work command's last statement (it writes ``date +%s.%N``) → the ``brev delete``
  invocation (``calls.jsonl`` ts).

Timings: cloud-side *durations* (deploy/build/sshd/delete) are compressed; every *interval* stays at its real
value (provider poll 1 s, the seed's ``sleep 5``, the CLI's 5 s create poll and 1 s WaitForSSH probe), because
the lag being measured is a function of the intervals and per-call latency, not of how long the boot takes.
The deploy time is drawn per round (seeded) so the poll phase is not the same in every round.

    python benchmarks/bench_idle.py --out result.json [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import (
    BENCH_DIR,
    WORK_DIR,
    InstanceWatcher,
    is_probe,
    median,
    progress,
    quiet_provider_logs,
    subcommand,
    summary,
    use_simulator,
    write_json,
)

TIMINGS = {
    "build_seconds": 1.0,
    "ssh_seconds": 6.0,  # > the CLI's 5 s create poll, as sshd comes up well after RUNNING on real instances
    "delete_seconds": 1.0,
    "poll_seconds": 5.0,  # `brev create` (no --detached) polls the instance every 5 s (reference 2.5)
    "probe_seconds": 1.0,  # WaitForSSHToBeAvailable sleeps 1 s between its ssh probes (reference 2.7)
}
DEPLOY_RANGE = (2.0, 7.0)
WORK_SECONDS = 0.5
GPU = "L40S:1"  # the seed asks for an L40S; the provider resolves it through `brev search`


def work_command(marker_dir: Path, name: str) -> str:
    return f"sleep {WORK_SECONDS}; date +%s.%N > {marker_dir / ('work-end-' + name)}"


def provider_lifecycle(name: str, command: str) -> dict[str, Any]:
    from airflow_provider_brev.hooks.base import _reset_process_caches
    from airflow_provider_brev.hooks.brev import BrevHook

    _reset_process_caches()  # one lifecycle per task process, as on an Airflow worker
    started = time.time()
    hook = BrevHook(log_cli_output=False)
    hook.create_instance(name, gpu=GPU)
    hook.wait_until_ready(name, timeout=300)  # the provider's default poll interval
    result = hook.run_command(name, command, log_output=False)
    hook.delete_instance(name)
    return {"started": started, "ended": time.time(), "exit_code": result.exit_code}


def seed_lifecycle(sim: Any, home: Path, name: str, command: str, token: str, step_log: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        **sim.env(),
        "HOME": str(home),
        "BREV_API_TOKEN": token,
        "SEED_STEP_LOG": str(step_log),
    }
    env.pop("AIRFLOW_CONN_BREV_DEFAULT", None)
    started = time.time()
    proc = subprocess.run(
        ["bash", str(BENCH_DIR / "seed_recipe.sh"), name, command],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    return {
        "started": started,
        "ended": time.time(),
        "exit_code": proc.returncode,
        "stdout_tail": proc.stdout[-500:],
        "stderr_tail": proc.stderr[-500:],
    }


def measure(
    sim: Any, watcher: InstanceWatcher, name: str, marker_dir: Path, window: tuple[float, float]
) -> dict[str, Any]:
    """Phase lags of one lifecycle from the simulator's records."""
    records = watcher.by_name(name)
    if len(records) != 1:
        raise RuntimeError(f"expected one instance named {name}, saw {len(records)}")
    inst = records[0]
    marker = str(marker_dir / ("work-end-" + name))
    runs = [r for r in sim.runs() if r.get("instance_id") == inst["id"]]
    work_runs = [r for r in runs if marker in r.get("command", "")]
    work_start = work_runs[0]["ts"]
    work_end = float((marker_dir / ("work-end-" + name)).read_text().strip())
    calls = [c for c in sim.calls() if window[0] <= c["ts"] <= window[1] + 1]
    delete_calls = [c for c in calls if subcommand(c["argv"]) == "delete" and name in c["argv"]]
    delete_ts = delete_calls[0]["ts"]
    ready = float(inst["t_ssh_up"])
    ready_lag = work_start - ready
    end_lag = delete_ts - work_end
    lifecycle_calls = [c for c in calls if not is_probe(c["argv"])]
    return {
        "name": name,
        "deploy_s": round(float(inst["t_running"]) - float(inst["created_at"]), 3),
        "ready_detection_lag_s": round(ready_lag, 3),
        "end_to_delete_lag_s": round(end_lag, 3),
        "idle_overhead_s": round(ready_lag + end_lag, 3),
        "billed_s": round(float(inst.get("t_deleting", delete_ts)) - float(inst["created_at"]), 3),
        "work_runs": len(work_runs),
        "instance_commands": [r["command"][:80] for r in runs if marker not in r.get("command", "")],
        "cli_calls": len(lifecycle_calls),
        "cli_calls_by_subcommand": dict(Counter(subcommand(c["argv"]) for c in lifecycle_calls)),
        "probe_calls": len(calls) - len(lifecycle_calls),
        "exec_calls": [
            {"argv_tail": c["argv"][1:4], "exit_code": c["exit_code"], "duration": c["duration"]}
            for c in calls
            if subcommand(c["argv"]) == "exec" and marker not in " ".join(c["argv"])
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args()

    from airflow_provider_brev.testing.simulator import BrevSimulator

    base = WORK_DIR / "idle"
    if base.exists():
        subprocess.run(["rm", "-rf", str(base)], check=True)
    marker_dir = base / "markers"
    marker_dir.mkdir(parents=True)
    rng = random.Random(args.seed)
    deploys = [round(rng.uniform(*DEPLOY_RANGE), 2) for _ in range(args.rounds)]
    sim_p = BrevSimulator(base / "provider-sim", deploy_seconds=deploys[0], **TIMINGS).install()
    sim_s = BrevSimulator(base / "seed-sim", deploy_seconds=deploys[0], **TIMINGS).install()
    use_simulator(sim_p, base / "provider-home")
    (base / "seed-home").mkdir()
    quiet_provider_logs()
    import airflow_provider_brev.hooks.brev  # noqa: F401  (import before timing anything)

    watchers = {"provider": InstanceWatcher(sim_p), "seed": InstanceWatcher(sim_s)}
    for w in watchers.values():
        w.start()
    rounds: list[dict[str, Any]] = []
    try:
        for i, deploy in enumerate(deploys):
            sim_p.set_timings(deploy_seconds=deploy)
            sim_s.set_timings(deploy_seconds=deploy)
            p_name, s_name = f"bench-prov-{i}", f"bench-seed-{i}"
            seed_out: dict[str, Any] = {}

            def run_seed(name: str = s_name, out: dict[str, Any] = seed_out, index: int = i) -> None:
                out.update(
                    seed_lifecycle(
                        sim_s,
                        base / "seed-home",
                        name,
                        work_command(marker_dir, name),
                        sim_s.valid_token,
                        base / f"seed-steps-{index}.log",
                    )
                )

            seed_thread = threading.Thread(target=run_seed)
            seed_thread.start()
            prov = provider_lifecycle(p_name, work_command(marker_dir, p_name))
            seed_thread.join()
            time.sleep(0.3)  # let the watchers see the DELETING records
            if seed_out.get("exit_code") != 0:
                raise RuntimeError(f"seed recipe failed: {seed_out}")
            row = {
                "round": i,
                "deploy_seconds": deploy,
                "provider": measure(sim_p, watchers["provider"], p_name, marker_dir, (prov["started"], prov["ended"])),
                "seed_recipe": measure(
                    sim_s, watchers["seed"], s_name, marker_dir, (seed_out["started"], seed_out["ended"])
                ),
            }
            rounds.append(row)
            progress(
                f"idle: round {i + 1}/{len(deploys)} deploy {deploy:.2f} s: provider "
                f"{row['provider']['idle_overhead_s']:.3f} s, seed recipe {row['seed_recipe']['idle_overhead_s']:.3f} s"
            )
    finally:
        for w in watchers.values():
            w.stop()
        sim_p.kill_all()
        sim_s.kill_all()

    def side(key: str) -> dict[str, Any]:
        rows = [r[key] for r in rounds]
        return {
            "idle_overhead_s": summary(r["idle_overhead_s"] for r in rows),
            "ready_detection_lag_s": summary(r["ready_detection_lag_s"] for r in rows),
            "end_to_delete_lag_s": summary(r["end_to_delete_lag_s"] for r in rows),
            "billed_s": summary(r["billed_s"] for r in rows),
            "cli_calls_per_lifecycle": summary((r["cli_calls"] for r in rows), 1),
            "work_command_runs": sorted({r["work_runs"] for r in rows}),
        }

    probe_calls = [c for c in sim_p.calls() if is_probe(c["argv"])]
    seed_probe_runs = [
        {"instance": r["instance"], "command": r["command"]} for r in sim_s.runs() if "work-end-" not in r["command"]
    ]
    seed_probe_calls = [c for c in sim_s.calls() if subcommand(c["argv"]) == "exec" and "true" in c["argv"][-1:]]
    result = {
        "timings": {**TIMINGS, "deploy_seconds_per_round": deploys, "deploy_range": list(DEPLOY_RANGE)},
        "intervals": {
            "provider_wait_until_ready_poll_s": 1.0,
            "seed_sleep_s": 5.0,
            "cli_create_poll_s": TIMINGS["poll_seconds"],
            "cli_wait_for_ssh_probe_s": TIMINGS["probe_seconds"],
        },
        "work_seconds": WORK_SECONDS,
        "rounds_run": len(rounds),
        "concurrency": "each round runs the provider lifecycle and the seed recipe at the same time, "
        "on two simulator roots with identical timings",
        "provider": side("provider"),
        "seed_recipe": side("seed_recipe"),
        "idle_overhead_s": median(r["provider"]["idle_overhead_s"] for r in rounds),
        "seed_recipe_idle_overhead_s": median(r["seed_recipe"]["idle_overhead_s"] for r in rounds),
        "cli_calls_per_lifecycle": median(r["provider"]["cli_calls"] for r in rounds),
        "cli_calls_by_subcommand_median": {
            cmd: median(r["provider"]["cli_calls_by_subcommand"].get(cmd, 0) for r in rounds)
            for cmd in sorted({k for r in rounds for k in r["provider"]["cli_calls_by_subcommand"]})
        },
        "capability_probe_calls_per_process": len(probe_calls) / max(1, len(rounds)),
        "capability_probe_argvs": sorted({" ".join(c["argv"]) for c in probe_calls}),
        "logins": {"provider": len(sim_p.calls("login")), "seed_recipe": len(sim_s.calls("login"))},
        "seed_probe_observed": {
            "argv": ["exec", "<name>", "--", "true"],
            "exec_calls": len(seed_probe_calls),
            "exit_codes": dict(Counter(str(c["exit_code"]) for c in seed_probe_calls)),
            "commands_started_on_instances": dict(Counter(f"{r['command']!r}" for r in seed_probe_runs)),
            "instances_targeted": sorted({r["instance"] for r in seed_probe_runs}),
        },
        "rounds": rounds,
    }
    write_json(Path(args.out), result)
    progress(
        f"idle: provider median {result['idle_overhead_s']:.3f} s, seed recipe median "
        f"{result['seed_recipe_idle_overhead_s']:.3f} s, {result['cli_calls_per_lifecycle']} CLI calls/lifecycle"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
