"""Following N detached jobs from one triggerer event loop: the cost of the provider's way against one ``brev exec``
per poll per job (the method before shared polls), measured in the same run.

For each N (``--sizes``) the jobs are launched on ``N / --jobs-per-instance`` ready simulated instances (a mapped sweep
on a small pool), each running ``--job-min`` .. ``--job-max`` seconds (spread evenly) and printing a line every 2 s.
Then they are followed in one fresh ``asyncio`` loop, twice:

* ``provider``: N ``BrevRemoteJobTrigger.run()`` generators, the way the triggerer runs them (shared instance polls,
  the loop's process cap ``[brev] triggerer_max_processes``, first polls spread);
* ``per_job``: N ``JobRunner.afollow()`` with ``apoll_job(shared=False)`` and no cap: one ``brev exec`` per poll per
  job, first polls at once -- what each trigger did before.

Measured per run: ``brev`` process starts per second (the simulator's record of calls), peak alive ``brev``
processes (children of this process, sampled every 20 ms) and their peak summed RSS (with everything they started),
processes left afterwards (the simulator's ``processes()`` and ``agent_pids()``, agents included), detection lag
(event received - the job's ``exit_code`` file written; median and max), max event-loop lag (a 50 ms ticker) and
failures (an event other than ``finished`` with exit code 0). The simulator's CPU per ``brev exec`` call is measured
first (``cpu_per_exec_call_ms``), so a saturated host is visible.

    python benchmarks/bench_fleet.py --out result.json [--sizes 10,50,100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import WORK_DIR, progress, quiet_provider_logs, use_simulator, write_json

POLL_INTERVAL = 5.0  # the trigger's default


class ProcessSampler(threading.Thread):
    """Peak count of this process's children (each a ``brev`` call) and peak RSS of all its descendants."""

    def __init__(self, interval: float = 0.02) -> None:
        super().__init__(daemon=True, name="process-sampler")
        import psutil

        self.me = psutil.Process()
        self.interval = interval
        self.peak_alive = 0
        self.peak_rss = 0
        self._stop_event = threading.Event()

    def sample(self) -> None:
        import psutil

        children = self.me.children(recursive=False)
        self.peak_alive = max(self.peak_alive, len(children))
        rss = 0
        for proc in self.me.children(recursive=True):
            try:
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, rss)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


def cpu_per_exec_call(name: str, env: dict[str, str], calls: int = 10) -> float:
    """CPU seconds (user + system) of one ``brev exec <name> true`` of the simulator, all its processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(calls):
        subprocess.run(
            ["brev", "exec", name, "true"], stdin=subprocess.DEVNULL, env=env, capture_output=True, check=True
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / calls


def run_fleet(sim: Any, jobs: list[tuple[str, Any]], method: str) -> dict[str, Any]:
    from airflow_provider_brev.core.jobs.follower import FollowPolicy
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.jobs.runner import JobRunner
    from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger

    class PerJobHook(BrevHook):
        async def apoll_job(self, name: str, job: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return await super().apoll_job(name, job, **kwargs, shared=False)

    os.environ["AIRFLOW__BREV__TRIGGERER_MAX_PROCESSES"] = "16" if method == "provider" else "0"
    received: dict[str, float] = {}
    outcomes: dict[str, tuple[str, Any]] = {}
    loop_lag = 0.0

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal loop_lag
        while not stop.is_set():
            expected = time.monotonic() + 0.05
            await asyncio.sleep(0.05)
            loop_lag = max(loop_lag, time.monotonic() - expected)

    async def follow(name: str, job: Any) -> None:
        if method == "provider":
            trigger = BrevRemoteJobTrigger(instance_name=name, job=job.to_dict(), poll_interval=POLL_INTERVAL)
            async for event in trigger.run():
                outcomes[job.job_id] = (event.payload["status"], event.payload.get("exit_code"))
                break
        else:
            runner = JobRunner(PerJobHook(log_cli_output=False), name, job, FollowPolicy(), quiet_log)
            outcome = await runner.afollow()
            outcomes[job.job_id] = (outcome.state, outcome.exit_code)
        received[job.job_id] = time.time()

    async def main() -> None:
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        await asyncio.gather(*(follow(name, job) for name, job in jobs))
        stop.set()
        await tick

    sampler = ProcessSampler()
    calls_before = len(sim.calls("exec"))
    sampler.start()
    started = time.time()
    asyncio.run(main())
    ended = time.time()
    sampler.stop()
    starts = len(sim.calls("exec")) - calls_before
    lags = []
    for name, job in jobs:
        exit_file = sim.sandbox(name) / job.exit_code_path
        lags.append(received[job.job_id] - exit_file.stat().st_mtime)
    time.sleep(0.5)  # a process stopped at the end has a moment to go
    left = sorted(set(sim.processes()) | set(sim.agent_pids()))
    failures = sum(1 for state, code in outcomes.values() if state != "finished" or code != 0)
    return {
        "method": method,
        "jobs": len(jobs),
        "seconds": round(ended - started, 1),
        "brev_starts": starts,
        "starts_per_s": round(starts / (ended - started), 2),
        "peak_alive_brev": sampler.peak_alive,
        "peak_rss_mb": round(sampler.peak_rss / 2**20, 1),
        "left_processes": len(left),
        "median_detection_lag_s": round(statistics.median(lags), 3),
        "max_detection_lag_s": round(max(lags), 3),
        "max_loop_lag_s": round(loop_lag, 3),
        "failures": failures + len(jobs) - len(outcomes),
    }


class _QuietLog:
    def info(self, *args: Any, **kwargs: Any) -> None: ...

    def warning(self, *args: Any, **kwargs: Any) -> None: ...

    def log(self, *args: Any, **kwargs: Any) -> None: ...


quiet_log = _QuietLog()


def launch(sim: Any, size: int, per_instance: int, job_min: float, job_max: float, tag: str) -> list[tuple[str, Any]]:
    from airflow_provider_brev.core.jobs.remote import RemoteJob
    from airflow_provider_brev.hooks.brev import BrevHook

    instances = max(1, size // per_instance)
    names = [f"fleet-{tag}-{k}" for k in range(instances)]
    for name in names:
        sim.create_instance_directly(name, ready=True)
    hook = BrevHook(log_cli_output=False)
    jobs = []
    for index in range(size):
        seconds = job_min + (job_max - job_min) * index / max(1, size - 1)
        command = (
            f"end=$((SECONDS + {round(seconds)})); while [ $SECONDS -lt $end ]; do echo tick $SECONDS; sleep 2; done"
        )
        jobs.append((names[index % instances], RemoteJob(job_id=f"fleet-{tag}-{index}"), command))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda item: hook.launch_job(item[0], item[1], item[2]), jobs))
    return [(name, job) for name, job, _ in jobs]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--sizes", default="10,50,100")
    parser.add_argument("--jobs-per-instance", type=int, default=10)
    parser.add_argument("--job-min", type=float, default=20.0)
    parser.add_argument("--job-max", type=float, default=40.0)
    args = parser.parse_args()

    from airflow_provider_brev.testing.simulator import BrevSimulator

    base = WORK_DIR / "fleet"
    shutil.rmtree(base, ignore_errors=True)
    sim = BrevSimulator(base / "sim").install()
    use_simulator(sim, base / "home")
    os.environ.pop("SSH_AUTH_SOCK", None)  # as on a triggerer without a login session: the CLI starts agents
    quiet_provider_logs()
    sim.create_instance_directly("fleet-probe", ready=True)
    from airflow_provider_brev.hooks.brev import BrevHook

    hook = BrevHook(log_cli_output=False)
    hook.run_command("fleet-probe", "true", log_output=False)  # capabilities, login
    cpu = cpu_per_exec_call("fleet-probe", hook._env())
    progress(f"fleet: the simulator's CPU per brev exec call: {cpu * 1000:.0f} ms")
    runs = []
    for size in (int(s) for s in args.sizes.split(",")):
        for method in ("provider", "per_job"):
            load = os.getloadavg()[0]
            jobs = launch(
                sim,
                size,
                args.jobs_per_instance,
                args.job_min,
                args.job_max,
                ("new" if method == "provider" else "old") + str(size),
            )
            result = run_fleet(sim, jobs, method) | {"load_average_1m_at_start": round(load, 2)}
            result["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
            progress(f"fleet: N={size} {method}: {result}")
            runs.append(result)
            sim.kill_all()
    write_json(
        Path(args.out),
        {
            "cpu_per_exec_call_ms": round(cpu * 1000, 1),
            "jobs_per_instance": args.jobs_per_instance,
            "poll_interval_s": POLL_INTERVAL,
            "job_seconds": [args.job_min, args.job_max],
            "runs": runs,
        },
    )
    sim.kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
