"""The rows of the benchmarks of one triggerer event loop in ``results.md`` (used by ``run.py``): many readiness
waits (``bench_concurrent_waits.py``) and many followed jobs (``bench_fleet.py``, with its growth table)."""

from __future__ import annotations

from typing import Any

#: Budgets: readiness waits; followed jobs at N = 100, the provider's way.
TRIGGERER_BUDGETS = {
    "concurrent_waits_brev_processes_per_s": 2.0,
    "concurrent_waits_max_detection_lag_s": 2.0,
    "concurrent_waits_failed": 0,
    "fleet_peak_alive": 25,
    "fleet_starts_per_s": 5.0,
    "fleet_max_detection_lag_s": 3.0,
    "fleet_max_loop_lag_s": 0.5,
    "fleet_failures": 0,
}
COLUMNS = (
    ("starts_per_s", "brev starts/s"),
    ("peak_alive_brev", "peak alive brev"),
    ("peak_rss_mb", "peak RSS (MB)"),
    ("left_processes", "left processes"),
    ("median_detection_lag_s", "median lag (s)"),
    ("max_detection_lag_s", "max lag (s)"),
    ("max_loop_lag_s", "max loop lag (s)"),
    ("failures", "failures"),
    ("load_average_1m_at_start", "load at start"),
)


def _within(value: float | None, budget: float) -> bool | None:
    return None if value is None else value <= budget


def wait_checks(waits: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows of ``bench_concurrent_waits.py``: many deferred readiness waits in one event loop."""
    label = f"{waits.get('waits', 50)} readiness waits in one triggerer loop"
    rate, lag, failed = waits.get("brev_processes_per_s"), waits.get("max_detection_lag_s"), waits.get("failed_waits")
    return [
        (
            f"{label}: brev processes per second",
            rate,
            "≤ 2",
            _within(rate, TRIGGERER_BUDGETS["concurrent_waits_brev_processes_per_s"]),
        ),
        (
            f"{label}: max detection lag, ready → event (s)",
            lag,
            "≤ 2",
            _within(lag, TRIGGERER_BUDGETS["concurrent_waits_max_detection_lag_s"]),
        ),
        (f"{label}: median detection lag (s)", waits.get("median_detection_lag_s"), "—", None),
        (f"{label}: failed waits", failed, "0", _within(failed, TRIGGERER_BUDGETS["concurrent_waits_failed"])),
    ]


def _runs(fleet: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return sorted((r for r in fleet.get("runs", []) if r["method"] == method), key=lambda r: r["jobs"])


def fleet_checks(fleet: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows: the budgets at the largest N the provider's way (N = 100 in a full run)."""
    runs = _runs(fleet, "provider")
    if not runs:
        return [("fleet of followed jobs in one triggerer loop: peak alive brev processes", None, "≤ 25", None)]
    run = runs[-1]
    label = f"{run['jobs']} followed jobs in one triggerer loop"
    rows: list[tuple[str, Any, str, bool | None]] = []
    for key, text, budget, bound in (
        ("peak_alive_brev", "peak alive brev processes", "≤ 25", TRIGGERER_BUDGETS["fleet_peak_alive"]),
        ("starts_per_s", "brev starts per second", "≤ 5", TRIGGERER_BUDGETS["fleet_starts_per_s"]),
        ("max_detection_lag_s", "max detection lag (s)", "≤ 3", TRIGGERER_BUDGETS["fleet_max_detection_lag_s"]),
        ("max_loop_lag_s", "max event-loop lag (s)", "≤ 0.5", TRIGGERER_BUDGETS["fleet_max_loop_lag_s"]),
        ("failures", "failures", "0", TRIGGERER_BUDGETS["fleet_failures"]),
        ("left_processes", "processes left (agents included)", "0", 0),
    ):
        rows.append((f"{label}: {text}", run.get(key), budget, _within(run.get(key), bound)))
    return rows


def fleet_markdown(fleet: dict[str, Any]) -> list[str]:
    """The growth table: each N, the provider's way beside one ``brev exec`` per poll per job (same run)."""
    if not fleet.get("runs"):
        return []
    lines = [
        "",
        f"Followed jobs in one triggerer event loop (`bench_fleet.py`; {fleet['jobs_per_instance']} jobs per instance, "
        f"poll interval {fleet['poll_interval_s']:g} s, jobs of {fleet['job_seconds'][0]:g}-{fleet['job_seconds'][1]:g} s; "
        f"the simulator's CPU per `brev exec` call: {fleet['cpu_per_exec_call_ms']:g} ms; 'one exec per poll' is the "
        "method before shared polls, measured in the same run):",
        "",
        "| N | method | " + " | ".join(title for _, title in COLUMNS) + " |",
        "| --- | --- |" + " --- |" * len(COLUMNS),
    ]
    for provider, per_job in zip(_runs(fleet, "provider"), _runs(fleet, "per_job"), strict=False):
        for run, method in ((provider, "provider"), (per_job, "one exec per poll")):
            values = " | ".join(str(run.get(key)) for key, _ in COLUMNS)
            lines.append(f"| {run['jobs']} | {method} | {values} |")
    return lines
