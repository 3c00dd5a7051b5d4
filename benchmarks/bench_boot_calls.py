"""``brev`` calls of one lifecycle whose instance needs 5 minutes to boot (the sync readiness wait).

One lifecycle as ``BrevCreateInstanceOperator`` runs it without deferral: ``BrevHook.create_instance`` (``--gpu
L40S:1``), ``BrevHook.wait_until_ready(poll_interval=1.0)`` (the operator's and sensor's default), a trivial
``run_command``, ``delete_instance``. The instance deploys for ``--boot-seconds`` minus the build time, then
builds (``build_seconds``) with sshd up before the build ends: it is ready exactly ``--boot-seconds`` after it
was created.

**Virtual clock.** The simulator's status transitions follow its clock (``BrevSimulator.now()`` /
``advance()``), but the hook's waits are real ``time.sleep`` calls. So, for the lifecycle, this process swaps
``time.sleep`` / ``time.monotonic`` / ``time.time`` for a virtual clock: a sleep of the main thread returns at
once after moving both this process's clock and the simulator's forward by the same amount, while the ``brev``
processes themselves take their real time (it counts on both clocks). The hook therefore sees exactly the
sequence of statuses and the elapsed times it would see in real time, and a 300 s boot takes a few seconds.
Only sleeps reached through ``time.sleep`` in the main thread are skipped; a wait implemented otherwise would
take real time, so a watchdog ends the run with an error after ``--real-limit`` seconds instead of hanging.
``--check-seconds N`` cross-checks the method: the same lifecycle with an N-second boot, once on the virtual
clock and once in real time; the two call counts should agree (±1 or 2).

Reported: ``boot_wait_calls`` (every ``brev`` invocation started while ``wait_until_ready`` ran),
``calls_per_boot_second`` (that, divided by the boot time), ``lifecycle_calls`` (create → delete, the
once-per-process capability probes excluded, as in ``bench_idle.py``), ``detection_lag_s`` (ready → the wait
returned, on the simulated clock), all broken down by subcommand.

    python benchmarks/bench_boot_calls.py --out result.json [--boot-seconds 300 --check-seconds 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import (
    WORK_DIR,
    calls_between,
    count_by_subcommand,
    is_probe,
    progress,
    quiet_provider_logs,
    use_simulator,
    write_json,
)

if TYPE_CHECKING:
    from types import TracebackType

BUILD_SECONDS = 10.0
TIMINGS = {
    "build_seconds": BUILD_SECONDS,
    "ssh_seconds": 5.0,  # sshd is up before the build completes: ready = created + deploy + build
    "delete_seconds": 0.5,
    "poll_seconds": 0.2,
    "probe_seconds": 0.2,
}
#: BrevCreateInstanceOperator's and BrevReadySensor's default poll interval, passed as they pass it
OPERATOR_POLL_INTERVAL = 1.0
BASE = WORK_DIR / "boot_calls"

REAL_SLEEP = time.sleep
REAL_MONOTONIC = time.monotonic
REAL_TIME = time.time


class VirtualClock:
    """Inside ``with``: the main thread's ``time.sleep`` advances this process's clock and the simulator's.

    :param sim: the simulator whose clock moves with this one.
    :param real_limit: wall-clock seconds after which a watchdog ends the process (a wait that does not sleep
        through ``time.sleep`` would otherwise take the whole boot in real time).
    """

    def __init__(self, sim: Any, real_limit: float) -> None:
        self.sim = sim
        self.real_limit = real_limit
        self.offset: float = float(sim.now()) - REAL_TIME()  # the simulator's clock may be ahead already (earlier runs)
        self.skipped = 0.0
        self.sleeps = 0
        self._advancing = False
        self._done = threading.Event()

    def sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._advancing or threading.current_thread() is not threading.main_thread():
            REAL_SLEEP(max(seconds, 0.0))
            return
        self._advancing = True
        try:
            self.sim.advance(seconds)
            self.offset += seconds
            self.skipped += seconds
            self.sleeps += 1
        finally:
            self._advancing = False
        REAL_SLEEP(0)

    def monotonic(self) -> float:
        return REAL_MONOTONIC() + self.offset

    def time(self) -> float:
        return REAL_TIME() + self.offset

    def _watchdog(self) -> None:
        if not self._done.wait(self.real_limit):
            progress(
                f"boot_calls: the lifecycle took more than {self.real_limit:.0f} s of real time on the virtual "
                "clock: the wait does not sleep through time.sleep in the main thread; giving up"
            )
            os._exit(3)

    def __enter__(self) -> VirtualClock:
        time.sleep, time.monotonic, time.time = self.sleep, self.monotonic, self.time  # type: ignore[assignment]
        threading.Thread(target=self._watchdog, daemon=True, name="virtual-clock-watchdog").start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        time.sleep, time.monotonic, time.time = REAL_SLEEP, REAL_MONOTONIC, REAL_TIME
        self._done.set()


def lifecycle(sim: Any, name: str, boot: float, clock: VirtualClock | None) -> dict[str, Any]:
    """One create → wait → run → delete; call windows on the wall clock, readiness on the simulated one."""
    from airflow_provider_brev.hooks.brev import BrevHook

    sim.set_timings(deploy_seconds=boot - BUILD_SECONDS)
    now = clock.time if clock else sim.now  # the simulated clock
    hook = BrevHook(log_cli_output=False)
    real_start = REAL_TIME()
    hook.create_instance(name, gpu="L40S:1")
    created = sim.instance(name)
    if created is None:
        raise RuntimeError(f"{name} was not created")
    ready_at = float(created["created_at"]) + boot  # simulated clock (deploy + build; sshd is up before)
    wait_start = REAL_TIME()
    hook.wait_until_ready(name, timeout=boot + 600, poll_interval=OPERATOR_POLL_INTERVAL)
    wait_end, detected = REAL_TIME(), now()
    hook.run_command(name, "true", log_output=False)
    hook.delete_instance(name)
    real_end = REAL_TIME()
    wait_calls = calls_between(sim, wait_start, wait_end)
    lifecycle_calls = [c for c in calls_between(sim, real_start, real_end) if not is_probe(c["argv"])]
    return {
        "boot_s": boot,
        "virtual_clock": clock is not None,
        "boot_wait_calls": len(wait_calls),
        "boot_wait_calls_by_subcommand": count_by_subcommand(wait_calls),
        "calls_per_boot_second": round(len(wait_calls) / boot, 3),
        "lifecycle_calls": len(lifecycle_calls),
        "lifecycle_calls_by_subcommand": count_by_subcommand(lifecycle_calls),
        "detection_lag_s": round(detected - ready_at, 3),
        "wall_s": round(real_end - real_start, 1),
    }


def measure(sim: Any, name: str, boot: float, virtual: bool, real_limit: float) -> dict[str, Any]:
    if not virtual:
        return lifecycle(sim, name, boot, None)
    with VirtualClock(sim, real_limit) as clock:
        row = lifecycle(sim, name, boot, clock)
    row["virtual_seconds_skipped"] = round(clock.skipped, 1)
    row["sleeps_skipped"] = clock.sleeps
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--boot-seconds", type=float, default=300.0)
    parser.add_argument("--check-seconds", type=float, default=0.0, help="also compare virtual vs real (0: off)")
    parser.add_argument("--real-limit", type=float, default=150.0, help="wall-clock bound of a virtual lifecycle")
    args = parser.parse_args()
    if min(args.boot_seconds, args.check_seconds or args.boot_seconds) <= BUILD_SECONDS:
        parser.error(f"boot times must exceed the {BUILD_SECONDS:g} s build")

    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.testing.simulator import BrevSimulator

    shutil.rmtree(BASE, ignore_errors=True)
    sim = BrevSimulator(BASE / "sim", deploy_seconds=args.boot_seconds, **TIMINGS).install()
    use_simulator(sim, BASE / "home")
    quiet_provider_logs()
    BrevHook(log_cli_output=False).list_instances()  # capability probes and login before anything is counted

    progress(f"boot_calls: one lifecycle, {args.boot_seconds:g} s boot on the virtual clock")
    try:
        main_row = measure(sim, "bench-boot", args.boot_seconds, True, args.real_limit)
        check = None
        if args.check_seconds:
            progress(f"boot_calls: cross-check, {args.check_seconds:g} s boot, virtual then real clock")
            check = {
                "boot_s": args.check_seconds,
                "virtual": measure(sim, "bench-check-virtual", args.check_seconds, True, args.real_limit),
                "real": measure(sim, "bench-check-real", args.check_seconds, False, args.real_limit),
            }
    finally:
        leftover_pids = sim.sandbox_pids()
        sim.kill_all()
    time.sleep(TIMINGS["delete_seconds"] + 0.3)
    leaked = [i["name"] for i in sim.instances()]
    result = {
        "timings": {**TIMINGS, "boot_seconds": args.boot_seconds},
        "poll_interval_s": OPERATOR_POLL_INTERVAL,
        "method": "virtual clock: the main thread's time.sleep advances this process's and the simulator's clock",
        **main_row,
        "check": check,
        "leaked_instances": len(leaked),
        "leftover_sandbox_processes": len(leftover_pids),
    }
    write_json(Path(args.out), result)
    shutil.rmtree(BASE, ignore_errors=True)
    progress(
        f"boot_calls: {main_row['boot_wait_calls']} calls while waiting {args.boot_seconds:g} s "
        f"({main_row['calls_per_boot_second']}/s of boot), {main_row['lifecycle_calls']} per lifecycle, "
        f"detection lag {main_row['detection_lag_s']} s, {main_row['wall_s']} s wall"
        + (
            f"; check {args.check_seconds:g} s boot: virtual {check['virtual']['boot_wait_calls']}, "
            f"real {check['real']['boot_wait_calls']} calls"
            if check
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
