"""Run every benchmark and write ``benchmarks/results.json`` and ``benchmarks/results.md`` (``make bench``).

Each benchmark runs in its own fresh interpreter (``bench_*.py``) against the bundled Brev simulator; its
result JSON lands in ``benchmarks/.work/`` and is merged here with the budgets from ``design.md``. Progress
goes to stderr; the provider's own log lines of each child go to ``benchmarks/.work/<name>.log``.

    .venv/bin/python benchmarks/run.py            # everything (about 30 minutes on 2 cores)
    .venv/bin/python benchmarks/run.py --only idle,concurrent --quick   # development: partial, not saved
    .venv/bin/python benchmarks/run.py --only bill --merge   # re-run one, merged into the saved results
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _bill_report import BILL_BUDGETS, bill_checks, bill_markdown
from _common import BENCH_DIR, WORK_DIR, child_env, progress, write_json
from _rerun import merged, rerun_lines, saved_details
from _triggerer_report import TRIGGERER_BUDGETS, fleet_checks, fleet_markdown, wait_checks

RESULTS_JSON = BENCH_DIR / "results.json"
RESULTS_MD = BENCH_DIR / "results.md"

BUDGETS = {
    "import_overhead_ms": 50.0,
    "idle_overhead_s": 0.5,
    "idle_overhead_ahead_of_seed": 1.5,  # at least: seed recipe's median / the provider's, same run
    "log_stream_peak_rss_growth_mb": 100.0,
    "concurrent_failures": 0,
    "concurrent_leaked_instances": 0,
    "concurrent_duplicate_launches": 0,
    "boot_calls_per_boot_second": 1.0,  # strictly less
    "restage_objects_downloaded": 0,
    "stage_small_provider_vs_boto3_speed": 1.0,  # at least: not slower than boto3's TransferManager
    "instance_loss_recovered": True,  # the three instance_loss budgets hold for the side with recovery
    "instance_loss_wasted_work_fraction": 0.15,
    "instance_loss_leaked_instances": 0,
    "page_render_s": 1.0,  # the Brev page with 200 billing instances and 1,000 runs (median)
    **BILL_BUDGETS,
    **TRIGGERER_BUDGETS,
}

BENCHMARKS: dict[str, dict[str, Any]] = {
    "import": {"script": "bench_import.py", "args": ["--runs", "5"], "quick": ["--runs", "1"], "timeout": 600},
    "idle": {"script": "bench_idle.py", "args": ["--rounds", "7"], "quick": ["--rounds", "2"], "timeout": 400},
    "log_stream": {
        "script": "bench_log_stream.py",
        "args": ["--bytes", str(1024**3)],
        "quick": ["--bytes", str(64 * 1024**2)],
        "timeout": 400,
    },
    "concurrent": {
        "script": "bench_concurrent.py",
        "args": ["--lifecycles", "50", "--workers", "20"],
        "quick": ["--lifecycles", "10", "--workers", "5"],
        "timeout": 300,
    },
    "concurrent_waits": {
        "script": "bench_concurrent_waits.py",
        "args": ["--waits", "50", "--boot-min", "20", "--boot-max", "90"],
        "quick": ["--waits", "10", "--boot-min", "5", "--boot-max", "20"],
        "timeout": 300,
    },
    "boot_calls": {
        "script": "bench_boot_calls.py",
        "args": ["--boot-seconds", "300", "--check-seconds", "20"],
        "quick": ["--boot-seconds", "60"],
        "timeout": 300,
    },
    "restage_unchanged": {
        "script": "bench_restage.py",
        "args": ["--objects", "10000"],
        "quick": ["--objects", "1000"],
        "timeout": 400,
    },
    "stage_small_objects": {
        "script": "bench_stage_small.py",
        "args": ["--objects", "10000"],
        "quick": ["--objects", "1000"],
        "timeout": 400,
    },
    "instance_loss": {
        "script": "bench_instance_loss.py",
        "args": ["--epoch-seconds", "3"],
        "quick": ["--epoch-seconds", "1.5"],
        "timeout": 400,
    },
    "page": {
        "script": "bench_page.py",
        "args": ["--instances", "200", "--runs", "1000", "--rounds", "5"],
        "quick": ["--instances", "200", "--runs", "1000", "--rounds", "1"],
        "timeout": 300,
    },
    "bill": {
        "script": "bench_bill.py",
        "args": ["--scale", "20", "--objects", "10000"],
        "quick": ["--scale", "100", "--objects", "1000"],
        "timeout": 1800,
    },
    "fleet": {"script": "bench_fleet.py", "args": [], "quick": ["--sizes", "10", "--job-max", "12"], "timeout": 1500},
}


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem_gb = round(pages / 1024**3, 1)
    except (OSError, ValueError):
        pass

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "apache_airflow": version("apache-airflow"),
        "apache_airflow_task_sdk": version("apache-airflow-task-sdk"),
        "load_average_at_start": list(os.getloadavg()),
    }


def run_benchmark(name: str, quick: bool) -> dict[str, Any]:
    spec = BENCHMARKS[name]
    out = WORK_DIR / f"{name}.json"
    log = WORK_DIR / f"{name}.log"
    out.unlink(missing_ok=True)
    argv = [sys.executable, str(BENCH_DIR / spec["script"]), "--out", str(out), *spec["quick" if quick else "args"]]
    progress(f"--- {name}: {' '.join(argv[1:])}")
    started = time.monotonic()
    with open(log, "w") as log_handle:
        try:
            proc = subprocess.run(
                argv,
                cwd=str(BENCH_DIR.parent),
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=log_handle,
                timeout=spec["timeout"],
                check=False,
            )
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = f"timed out after {spec['timeout']} s"
    elapsed = round(time.monotonic() - started, 1)
    if code != 0 or not out.exists():
        progress(f"--- {name}: FAILED ({code}); see {log}")
        return {"error": f"benchmark {name} failed: {code}; log in {log}", "elapsed_s": elapsed}
    data = json.loads(out.read_text())
    data["elapsed_s"] = elapsed
    progress(f"--- {name}: done in {elapsed:.0f} s")
    return data


def _met(value: Any, budget: float, strict_less: bool = False) -> bool | None:
    if value is None:
        return None
    return value < budget if strict_less else value <= budget


def assemble(details: dict[str, dict[str, Any]], started: float, quick: bool, host: dict[str, Any]) -> dict[str, Any]:
    imp = details.get("import", {})
    idle = details.get("idle", {})
    logs = details.get("log_stream", {})
    conc = details.get("concurrent", {})
    waits = details.get("concurrent_waits", {})
    boot = details.get("boot_calls", {})
    results: dict[str, Any] = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "quick_mode": quick,
        "machine": {**host, "load_average_at_end": list(os.getloadavg())},
        "budgets": BUDGETS,
        # 1. import overhead
        "import_overhead_ms": imp.get("import_overhead_ms"),
        "import_overhead_worst_module": imp.get("worst_module"),
        "import_overhead_per_module_ms": {
            m: v["overhead_ms"]["median"] for m, v in imp.get("per_module", {}).items() if not m.startswith("<")
        },
        "import_overhead_all_modules_ms": imp.get("all_modules_overhead_ms"),
        "import_overhead_cold_no_bytecode_ms": {
            m: v.get("cold_no_bytecode_ms") for m, v in imp.get("per_module", {}).items() if not m.startswith("<")
        },
        "import_worst_module_self_ms_by_origin": (imp.get("worst_module_importtime") or {}).get("self_ms_by_origin"),
        "import_bytecode": imp.get("bytecode"),
        "import_airflow_sdk_ms": imp.get("sdk_import_ms_median"),
        "boto3_imported_by_provider_modules": imp.get("boto3_imported"),
        "aws_modules_imported_by_provider_modules": imp.get("aws_modules_imported"),
        # 2. idle overhead (provider vs seed recipe, same run, same timings)
        "idle_overhead_s": idle.get("idle_overhead_s"),
        "seed_recipe_idle_overhead_s": idle.get("seed_recipe_idle_overhead_s"),
        "idle_overhead_phases_median_s": {
            side: {
                "ready_detection_lag": idle[side]["ready_detection_lag_s"]["median"],
                "end_to_delete_lag": idle[side]["end_to_delete_lag_s"]["median"],
                "total": idle[side]["idle_overhead_s"]["median"],
            }
            for side in ("provider", "seed_recipe")
            if side in idle
        },
        "idle_rounds": idle.get("rounds_run"),
        "seed_probe_observed": idle.get("seed_probe_observed"),
        # 3. CLI invocations
        "cli_calls_per_lifecycle": idle.get("cli_calls_per_lifecycle"),
        "cli_calls_per_lifecycle_by_subcommand": idle.get("cli_calls_by_subcommand_median"),
        "capability_probe_calls_per_process": idle.get("capability_probe_calls_per_process"),
        "seed_recipe_cli_calls_per_lifecycle": (idle.get("seed_recipe") or {})
        .get("cli_calls_per_lifecycle", {})
        .get("median"),
        # 4. 1 GiB log stream
        "log_stream_1gib": {
            k: logs.get(k)
            for k in (
                "peak_rss_growth_mb",
                "throughput_mb_s",
                "bytes_received",
                "bytes_exact",
                "lines",
                "polls",
                "seconds",
                "rss_before_mb",
                "peak_rss_mb",
            )
        },
        # 5. 50 concurrent lifecycles
        "concurrent_50": {
            k: conc.get(k)
            for k in (
                "lifecycles",
                "workers",
                "failures",
                "leaked_instances",
                "duplicate_launches",
                "duplicate_command_executions",
                "duplicate_instances",
                "leftover_sandbox_processes",
                "logins",
                "wall_time_s",
                "failure_messages",
            )
        },
        # 6. many readiness waits in one triggerer event loop
        "concurrent_waits": {
            k: waits.get(k)
            for k in (
                "waits",
                "brev_processes_per_s",
                "brev_processes_busiest_second",
                "brev_processes_by_subcommand",
                "max_detection_lag_s",
                "median_detection_lag_s",
                "max_listing_gap_s",
                "max_loop_lag_s",
                "failed_waits",
                "leaked_instances",
                "window_s",
            )
        },
        # 7. CLI calls of one lifecycle with a 5-minute boot (sync wait, virtual clock)
        "boot_calls": {
            k: boot.get(k)
            for k in (
                "boot_s",
                "boot_wait_calls",
                "boot_wait_calls_by_subcommand",
                "calls_per_boot_second",
                "lifecycle_calls",
                "lifecycle_calls_by_subcommand",
                "detection_lag_s",
                "wall_s",
                "check",
            )
        },
        # 8. re-staging an unchanged input prefix; 9. first sync of many small objects vs boto3
        "bill": details.get("bill", {}),
        "fleet": details.get("fleet", {}),
        "restage_unchanged": details.get("restage_unchanged", {}),
        "stage_small_objects": details.get("stage_small_objects", {}),
        # 11. the Brev page of the Airflow UI
        "page": details.get("page", {}),
        # 10. a checkpointed training step whose instance is lost at 70 %: recovered vs redone by hand
        "instance_loss": {
            side: {k: details.get("instance_loss", {}).get(side, {}).get(k) for k in INSTANCE_LOSS_KEYS}
            for side in ("with_recovery", "without_recovery")
        },
        "timings": {
            "idle": idle.get("timings"),
            "idle_intervals": idle.get("intervals"),
            "concurrent": conc.get("timings"),
            "concurrent_waits": waits.get("timings"),
            "boot_calls": boot.get("timings"),
            "log_stream": "simulator defaults; instance seeded ready",
        },
        "errors": {k: v["error"] for k, v in details.items() if "error" in v},
        "elapsed_s": round(time.monotonic() - started, 1),
        "details": details,
    }
    rss = logs.get("peak_rss_growth_mb")
    checks = [
        (
            f"import overhead over `import airflow.sdk`, worst module ({results['import_overhead_worst_module']}), ms",
            results["import_overhead_ms"],
            "≤ 50",
            _met(results["import_overhead_ms"], BUDGETS["import_overhead_ms"]),
        ),
        (
            "import overhead, worst module, without any bytecode cache (1 run), ms",
            max((v for v in results["import_overhead_cold_no_bytecode_ms"].values() if v is not None), default=None),
            "—",
            None,
        ),
        (
            "import overhead, all provider modules together, ms",
            results["import_overhead_all_modules_ms"],
            "—",
            None,
        ),
        (
            "boto3 imported by a provider module",
            results["boto3_imported_by_provider_modules"],
            "no",
            None
            if results["boto3_imported_by_provider_modules"] is None
            else not results["boto3_imported_by_provider_modules"],
        ),
        (
            "billed idle overhead per lifecycle, provider (median s)",
            results["idle_overhead_s"],
            "≤ 0.5",
            _met(results["idle_overhead_s"], BUDGETS["idle_overhead_s"]),
        ),
        (
            "billed idle overhead per lifecycle, seed recipe (median s)",
            results["seed_recipe_idle_overhead_s"],
            "—",
            None,
        ),
        (
            "billed idle overhead: seed recipe's median / the provider's (same run)",
            ahead := _ratio(results["seed_recipe_idle_overhead_s"], results["idle_overhead_s"]),
            "≥ 1.5",
            None if ahead is None else ahead >= BUDGETS["idle_overhead_ahead_of_seed"],
        ),
        ("CLI calls per provider lifecycle (median, excl. probes)", results["cli_calls_per_lifecycle"], "—", None),
        (
            "1 GiB log stream: peak RSS growth (MB)",
            rss,
            "< 100",
            _met(rss, BUDGETS["log_stream_peak_rss_growth_mb"], True),
        ),
        ("1 GiB log stream: throughput (MB/s)", logs.get("throughput_mb_s"), "—", None),
        ("1 GiB log stream: every byte received exactly once", logs.get("bytes_exact"), "yes", logs.get("bytes_exact")),
        ("50 concurrent: failures", conc.get("failures"), "0", _met(conc.get("failures"), 0)),
        ("50 concurrent: leaked instances", conc.get("leaked_instances"), "0", _met(conc.get("leaked_instances"), 0)),
        (
            "50 concurrent: duplicate launches",
            conc.get("duplicate_launches"),
            "0",
            _met(conc.get("duplicate_launches"), 0),
        ),
        ("50 concurrent: brev logins", conc.get("logins"), "—", None),
        ("50 concurrent: wall time (s)", conc.get("wall_time_s"), "—", None),
        *wait_checks(waits),
        *boot_checks(boot),
        *staging_checks(details.get("restage_unchanged", {}), details.get("stage_small_objects", {})),
        *instance_loss_checks(details.get("instance_loss", {})),
        *bill_checks(details.get("bill", {})),
        *page_checks(details.get("page", {})),
        *fleet_checks(details.get("fleet", {})),
    ]
    results["budget_checks"] = [{"metric": m, "value": v, "budget": b, "met": ok} for m, v, b, ok in checks]
    results["all_budgets_met"] = all(c["met"] is True for c in results["budget_checks"] if c["budget"] != "—")
    return results


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if not numerator or not denominator else round(numerator / denominator, 2)


def boot_checks(boot: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows of ``bench_boot_calls.py``: one lifecycle with a long boot, sync wait."""
    label = f"{boot.get('boot_s') or 300:g} s boot, sync wait"
    per_second = boot.get("calls_per_boot_second")
    return [
        (f"{label}: brev calls while waiting", boot.get("boot_wait_calls"), "—", None),
        (
            f"{label}: brev calls per second of boot",
            per_second,
            "< 1",
            _met(per_second, BUDGETS["boot_calls_per_boot_second"], True),
        ),
        (f"{label}: CLI calls per lifecycle (excl. probes)", boot.get("lifecycle_calls"), "—", None),
        (f"{label}: detection lag, ready → wait returned (s)", boot.get("detection_lag_s"), "—", None),
    ]


def staging_checks(restage: dict[str, Any], small: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows of ``bench_restage.py`` and ``bench_stage_small.py`` (step staging, moto in its own process)."""
    n_re, n_small = restage.get("objects", 10_000), small.get("objects", 10_000)
    downloaded, ratio = restage.get("objects_downloaded"), small.get("provider_vs_boto3_speed")
    return [
        (
            f"re-stage {n_re} unchanged objects: objects downloaded",
            downloaded,
            "0",
            _met(downloaded, BUDGETS["restage_objects_downloaded"]),
        ),
        (f"re-stage {n_re} unchanged objects: second sync (s)", restage.get("second_sync_s"), "—", None),
        (f"re-stage {n_re} unchanged objects: first sync (s)", restage.get("first_sync_s"), "—", None),
        (
            f"first sync of {n_small} small objects: provider objects/s",
            (small.get("provider") or {}).get("objects_per_s"),
            "—",
            None,
        ),
        (
            f"first sync of {n_small} small objects: boto3 TransferManager (10) objects/s",
            (small.get("boto3") or {}).get("objects_per_s"),
            "—",
            None,
        ),
        (
            f"first sync of {n_small} small objects: provider speed / boto3 speed",
            ratio,
            "≥ 1",
            None if ratio is None else ratio >= BUDGETS["stage_small_provider_vs_boto3_speed"],
        ),
    ]


INSTANCE_LOSS_KEYS = (
    "recovered",
    "epochs_needed",
    "epochs_run",
    "wasted_work_fraction",
    "wall_s",
    "brev_create_calls",
    "leaked_instances",
    "final_checkpoint_in_s3",
)


def instance_loss_checks(loss: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows of ``bench_instance_loss.py``: a TAO training step whose instance is lost at 70 %, both sides."""
    rec, base = loss.get("with_recovery") or {}, loss.get("without_recovery") or {}
    label = "instance lost at 70 % of training"
    wasted, leaked, recovered = rec.get("wasted_work_fraction"), rec.get("leaked_instances"), rec.get("recovered")
    return [
        (
            f"{label}, with recovery: recovered",
            recovered,
            "yes",
            None if recovered is None else recovered == BUDGETS["instance_loss_recovered"],
        ),
        (
            f"{label}, with recovery: wasted work (extra epochs / epochs needed)",
            wasted,
            "≤ 0.15",
            _met(wasted, BUDGETS["instance_loss_wasted_work_fraction"]),
        ),
        (
            f"{label}, with recovery: leaked instances",
            leaked,
            "0",
            _met(leaked, BUDGETS["instance_loss_leaked_instances"]),
        ),
        (f"{label}, with recovery: brev create calls", rec.get("brev_create_calls"), "—", None),
        (f"{label}, with recovery: wall time (s)", rec.get("wall_s"), "—", None),
        (f"{label}, with recovery: final checkpoint in S3", rec.get("final_checkpoint_in_s3"), "—", None),
        (f"{label}, redone by hand: wasted work", base.get("wasted_work_fraction"), "—", None),
        (f"{label}, redone by hand: wall time of both DAG runs (s)", base.get("wall_s"), "—", None),
        (f"{label}, redone by hand: leaked instances", base.get("leaked_instances"), "—", None),
    ]


def page_checks(page: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows of ``bench_page.py``: the Brev page made for one request (shaping and HTML, plots included)."""
    label = f"Brev page, {page.get('instances', 200)} billing instances and {page.get('runs', 1000)} runs"
    median_s = page.get("render_s_median")
    return [
        (f"{label}: render (median s)", median_s, "< 1", _met(median_s, BUDGETS["page_render_s"], True)),
        (f"{label}: render (worst of {page.get('rounds', 5)}, s)", page.get("render_s_max"), "—", None),
        (f"{label}: page size (KiB)", page.get("page_kib"), "—", None),
    ]


def _fmt(value: Any) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    phases = results.get("idle_overhead_phases_median_s") or {}
    lines = [
        "# Benchmark results",
        "",
        f"Generated {results['generated_at']} by `make bench` on {m['nproc']} CPU(s) ({m['cpu'] or 'unknown CPU'}), "
        f"Python {m['python']}, Airflow {m['apache_airflow']}"
        + (" — **quick mode, not representative**" if results["quick_mode"] else "")
        + ". Method: `benchmarks/README.md`; raw numbers: `results.json`.",
        "",
        f"1-min load average at start / end: {m['load_average_at_start'][0]:.1f} / {m['load_average_at_end'][0]:.1f} "
        "(other processes on the same CPUs add noise, mostly to the import timings).",
        "",
        *rerun_lines(results),
        "| metric | value | budget | met? |",
        "| --- | --- | --- | --- |",
    ]
    for check in results["budget_checks"]:
        met = {True: "✅", False: "❌", None: "—" if check["budget"] == "—" else "not measured"}[check["met"]]
        lines.append(f"| {check['metric']} | {_fmt(check['value'])} | {check['budget']} | {met} |")
    if phases:
        lines += [
            "",
            "Idle overhead per phase (median s, same run, identical simulator timings):",
            "",
            "| | ready-detection lag | end of work → delete | total |",
            "| --- | --- | --- | --- |",
        ]
        for side, label in (("provider", "provider (BrevHook)"), ("seed_recipe", "seed recipe (`seed_recipe.sh`)")):
            if side in phases:
                p = phases[side]
                lines.append(
                    f"| {label} | {_fmt(p['ready_detection_lag'])} | {_fmt(p['end_to_delete_lag'])} | "
                    f"{_fmt(p['total'])} |"
                )
    lines += bill_markdown(results.get("bill") or {}) + fleet_markdown(results.get("fleet") or {})
    if results.get("errors"):
        lines += ["", "Errors:", ""] + [f"- {k}: {v}" for k, v in results["errors"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions / smaller sizes (development)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a budget is not met")
    parser.add_argument("--merge", action="store_true", help="with --only: merge into the saved results")
    args = parser.parse_args()
    selected = [b.strip() for b in args.only.split(",") if b.strip()] or list(BENCHMARKS)
    unknown = sorted(set(selected) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")

    WORK_DIR.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    host = machine()
    if args.merge and (args.quick or not args.only):
        parser.error("--merge re-runs the benchmarks of --only at full size into the saved results")
    details = {name: run_benchmark(name, args.quick) for name in selected}
    saved = saved_details(RESULTS_JSON) if args.merge else {}  # the saved run's numbers, the new ones replacing
    details, overrides = merged(saved, details, host["load_average_at_start"]) if saved else (details, {})
    results = assemble(details, started, args.quick, host) | overrides
    partial = (selected != list(BENCHMARKS) or args.quick) and not saved
    json_path = WORK_DIR / "results.partial.json" if partial else RESULTS_JSON
    md_path = WORK_DIR / "results.partial.md" if partial else RESULTS_MD
    write_json(json_path, results)
    md_path.write_text(markdown(results), encoding="utf-8")
    sys.stdout.write(markdown(results))
    progress(f"wrote {json_path} and {md_path} in {results['elapsed_s']:.0f} s")
    if results["errors"]:
        return 1
    if args.strict and not results["all_budgets_met"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
