"""Import overhead of every provider module over ``import airflow.sdk``.

For each public provider module (discovered from the source tree, so new operators/transfers are picked up),
``--runs`` fresh interpreters each time ``import airflow.sdk`` and then ``import <module>`` with
``time.perf_counter()``; the overhead of one run is the second interval (what the module adds on top of an
already imported ``airflow.sdk``). Rounds go round-robin over the modules so drift hits all of them alike.
Each run also reports whether ``boto3``/``botocore`` or the Amazon provider's AWS hooks (S3Hook) got imported.

Bytecode: the measured runs read ``.pyc`` files from ``benchmarks/.work/pycache`` (``PYTHONPYCACHEPREFIX``,
filled by one warm-up run), because an installed provider and Airflow have compiled bytecode; this machine's
environment sets ``PYTHONDONTWRITEBYTECODE`` and the venv has no ``.pyc`` files, which would otherwise make
every run compile every module from source. One extra round without any bytecode cache is reported as
``cold_no_bytecode_ms`` for comparison. For the worst module, one ``-X importtime`` run lists what its
import spends the time on.

    python benchmarks/bench_import.py --out result.json [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import REPO_ROOT, child_env, progress, summary, write_json

PACKAGE = "airflow_provider_brev"
SUBPACKAGES = ("hooks", "operators", "sensors", "triggers", "transfers")
#: Internal base classes are imported by the public modules above; they are covered through them.
SKIP_STEMS = ("__init__", "base")
HEAVY_PREFIXES = ("boto3", "botocore", "s3transfer", "airflow.providers.amazon.aws")

CHILD = r"""
import importlib, json, sys, time
mods = sys.argv[1:]
t0 = time.perf_counter()
import airflow.sdk
t1 = time.perf_counter()
before = set(sys.modules)
sys.stderr.write("-- provider --\n"); sys.stderr.flush()
for m in mods:
    importlib.import_module(m)
t2 = time.perf_counter()
new = sorted(set(sys.modules) - before)
heavy = ("boto3", "botocore", "s3transfer", "airflow.providers.amazon.aws")
print(json.dumps({
    "sdk_ms": (t1 - t0) * 1000.0,
    "module_ms": (t2 - t1) * 1000.0,
    "new_modules": len(new),
    "heavy_loaded": sorted(m for m in sys.modules if m.startswith(heavy)),
    "boto3_loaded": "boto3" in sys.modules,
}))
"""


def discover_modules() -> list[str]:
    root = REPO_ROOT / PACKAGE
    modules = [f"{PACKAGE}.get_provider_info"]
    for sub in SUBPACKAGES:
        directory = root / sub
        if not directory.is_dir():
            continue
        stems = sorted(p.stem for p in directory.glob("*.py") if p.stem not in SKIP_STEMS)
        if stems:
            modules += [f"{PACKAGE}.{sub}.{stem}" for stem in stems]
        elif (directory / "__init__.py").exists():
            modules.append(f"{PACKAGE}.{sub}")  # an empty subpackage still costs an import
    return modules


def run_child(modules: list[str], *, bytecode_cache: bool = True, importtime: bool = False) -> dict:
    env = child_env(bytecode_cache=bytecode_cache)
    flags = ["-X", "importtime"] if importtime else []
    out = subprocess.run(
        [sys.executable, *flags, "-c", CHILD, *modules],
        cwd=str(REPO_ROOT),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"importing {modules} failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    if importtime:
        data["importtime"] = parse_importtime(out.stderr)
    return data


def parse_importtime(stderr: str) -> dict:
    """Self time of the modules imported after the ``-- provider --`` marker of :data:`CHILD`, by origin."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if "-- provider --" in line), None)
    rows = []
    for line in lines[(start or 0) + 1 :]:
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, cumulative_us, module = (part.strip() for part in line[len("import time:") :].split("|", 2))
        if self_us.isdigit():
            rows.append({"module": module, "self_ms": int(self_us) / 1000, "cumulative_ms": int(cumulative_us) / 1000})
    rows.sort(key=lambda r: r["self_ms"], reverse=True)

    def origin(module: str) -> str:
        if module.startswith(PACKAGE):
            return "provider"
        return "airflow" if module.startswith("airflow") else "other"

    by_origin: dict[str, float] = {}
    for row in rows:
        by_origin[origin(row["module"])] = by_origin.get(origin(row["module"]), 0.0) + row["self_ms"]
    return {
        "note": "one `python -X importtime` run (its own overhead inflates the numbers)",
        "self_ms_by_origin": {k: round(v, 1) for k, v in sorted(by_origin.items())},
        "modules_imported": len(rows),
        "top_self_ms": rows[:12],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    modules = discover_modules()
    targets: list[tuple[str, list[str]]] = [(m, [m]) for m in modules]
    targets.append(("<all provider modules>", modules))
    progress(f"import: {len(modules)} modules x {args.runs} fresh interpreters (+ all modules together)")
    samples: dict[str, list[dict]] = {label: [] for label, _ in targets}
    started = time.monotonic()
    run_child(modules)  # warm-up: fills the bytecode cache under benchmarks/.work/pycache
    for round_no in range(args.runs):
        for label, mods in targets:
            samples[label].append(run_child(mods))
        progress(f"import: round {round_no + 1}/{args.runs} done ({time.monotonic() - started:.0f} s)")

    cold = {label: run_child(mods, bytecode_cache=False) for label, mods in targets}
    progress(f"import: cold round (no bytecode cache) done ({time.monotonic() - started:.0f} s)")

    per_module: dict[str, dict] = {}
    for label, runs in samples.items():
        per_module[label] = {
            "overhead_ms": summary((r["module_ms"] for r in runs), 1),
            "cold_no_bytecode_ms": round(cold[label]["module_ms"], 1),
            "sdk_import_ms": summary((r["sdk_ms"] for r in runs), 1),
            "new_modules": runs[0]["new_modules"],
            "heavy_modules_loaded": sorted({m for r in runs for m in r["heavy_loaded"]}),
            "boto3_loaded": any(r["boto3_loaded"] for r in runs),
        }
    single = {k: v for k, v in per_module.items() if not k.startswith("<")}
    worst = max(single, key=lambda k: single[k]["overhead_ms"]["median"])
    breakdown = run_child([worst], importtime=True)["importtime"]
    result = {
        "method": "median over fresh interpreters of perf_counter() around `import <module>` right after "
        "`import airflow.sdk` in the same interpreter",
        "bytecode": "measured runs use a warm bytecode cache (PYTHONPYCACHEPREFIX=benchmarks/.work/pycache); "
        "cold_no_bytecode_ms is one run compiling everything from source",
        "runs_per_module": args.runs,
        "modules": modules,
        "per_module": per_module,
        "worst_module": worst,
        "import_overhead_ms": single[worst]["overhead_ms"]["median"],
        "all_modules_overhead_ms": per_module["<all provider modules>"]["overhead_ms"]["median"],
        "sdk_import_ms_median": summary(
            (r["sdk_ms"] for runs in samples.values() for r in runs),
            1,
        )["median"],
        "boto3_imported": any(v["boto3_loaded"] for v in per_module.values()),
        "aws_modules_imported": sorted({m for v in per_module.values() for m in v["heavy_modules_loaded"]}),
        "worst_module_importtime": breakdown,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    write_json(Path(args.out), result)
    progress(f"import: worst {worst} {result['import_overhead_ms']} ms; boto3 imported: {result['boto3_imported']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
