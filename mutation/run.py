"""``make mutation``: mutate every module of the pure core and run the unit tests that execute each mutant.

Steps: list the mutants (:mod:`mutation.operators`); run the unit tests once with a per-test coverage map
(:mod:`mutation.plugin`); give each mutant the tests that execute it (:mod:`mutation.select`); run the mutants in
forked children, ``--jobs`` at a time, each with a timeout derived from its tests' baseline durations
(:mod:`mutation.execute`); write the report (:mod:`mutation.report`). ``--check`` fails the run below the
thresholds in ``mutation/README.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mutation.execute import ERROR, KILLED, SURVIVED, TIMEOUT, Job, Outcome
from mutation.operators import Mutant, list_mutants, module_key, mutated_tree
from mutation.report import Thresholds, load_equivalents, summarize, write_reports
from mutation.select import CoverageMap, Selector
from mutation.session import MutationSession

if TYPE_CHECKING:
    from types import CodeType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_brev.core"
PACKAGE_DIR = ROOT / "airflow_provider_brev" / "core"
TEST_DIR = "tests/unit"
#: Test files the mutants never run: they build wheels, run the Airflow CLI or the docs site (slow, no decision
#: of the core in them), or test this tool itself.
SLOW_TEST_FILES = (
    "tests/unit/project/test_packaging.py",
    "tests/unit/project/test_provider_info.py",
    "tests/unit/project/test_docs.py",
    "tests/unit/project/test_mutation_smoke.py",
    "tests/unit/project/test_mutation_tool.py",
)


#: A baseline run with more failing tests than this is broken, not flaky.
MAX_BASELINE_FAILURES = 3


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__)
    parser.add_argument("--modules", help="comma-separated module names of core/ (default: all)")
    parser.add_argument("--ids", help="comma-separated mutant ids to run (default: all)")
    parser.add_argument("--sample", type=int, help="run a random sample of this many mutants")
    parser.add_argument("--seed", type=int, default=17, help="seed of --sample (default 17)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants at once (default: CPUs)")
    parser.add_argument(
        "--tests",
        nargs="+",
        help="run these tests (files, test functions or node ids) for every mutant (no coverage map)",
    )
    parser.add_argument("--map", type=Path, help="reuse this coverage map instead of running the baseline")
    parser.add_argument("--keep-map", type=Path, help="write the baseline's coverage map here")
    parser.add_argument("--report", type=Path, default=ROOT / "mutation" / "report.md")
    parser.add_argument("--json", type=Path, default=ROOT / "mutation" / "report.json")
    parser.add_argument("--equivalent", type=Path, default=ROOT / "mutation" / "equivalent.txt")
    parser.add_argument("--timeout-factor", type=float, default=3.0, help="timeout = factor x baseline + 20 s")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--check", action="store_true", help="exit 1 below the thresholds (full runs)")
    return parser.parse_args(argv)


def choose_mutants(args: argparse.Namespace) -> list[Mutant]:
    mutants: list[Mutant] = []
    modules = [path for path in sorted(PACKAGE_DIR.rglob("*.py")) if path.name != "__init__.py"]
    for path in modules:
        mutants += list_mutants(path, ROOT)
    if args.modules:
        wanted = {name.strip() for name in args.modules.split(",")}
        unknown = wanted - {module_key(p) for p in modules}
        if unknown:
            raise SystemExit(f"unknown modules: {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if module_key(m.path) in wanted]
    if args.ids:
        wanted = {name.strip() for name in args.ids.split(",") if name.strip()}
        by_id = {m.id: m for m in mutants}
        missing = sorted(wanted - by_id.keys())
        if missing:
            raise SystemExit(f"unknown mutant ids (the code changed?): {', '.join(missing)}")
        mutants = [by_id[i] for i in sorted(wanted)]
    if args.sample is not None and args.sample < len(mutants):
        mutants = random.Random(args.seed).sample(mutants, args.sample)
    return sorted(mutants, key=lambda m: (m.path, m.line, m.id))


def baseline_map(keep: Path | None) -> CoverageMap:
    """Run the unit tests once with the coverage map plugin (they must all pass)."""
    with tempfile.TemporaryDirectory(prefix="mutation-map-") as scratch:
        out = keep or Path(scratch) / "map.json"
        env = {**os.environ, "MUTATION_MAP_OUT": str(out), "MUTATION_SOURCE": str(PACKAGE_DIR)}
        command = [sys.executable, "-m", "pytest", TEST_DIR, "-q", "-p", "mutation.plugin"]
        command += [f"--ignore={name}" for name in SLOW_TEST_FILES]
        started = time.monotonic()
        print(f"baseline: {' '.join(command[2:])}", flush=True)
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        data = json.loads(out.read_text()) if out.exists() else {}
        failed = data.get("failed", [])
        if done.returncode not in (0, 1) or not data or len(failed) > MAX_BASELINE_FAILURES:
            sys.stdout.write(done.stdout[-5000:])
            raise SystemExit("the unit tests fail without any mutant: fix them first")
        for name in failed:  # a flaky test under load: left out of the map (it cannot judge a mutant)
            print(f"baseline: {name} failed; not used", flush=True)
        print(f"baseline: {len(data['tests'])} tests in {time.monotonic() - started:.0f} s", flush=True)
        return CoverageMap.from_json(data)


def build_jobs(mutants: list[Mutant], args: argparse.Namespace) -> tuple[list[Job], dict[str, list[str]]]:
    coverage_map = None if args.tests else baseline_map(args.keep_map) if not args.map else _load(args.map)
    selector = Selector(coverage_map, PACKAGE_DIR, ROOT / TEST_DIR) if coverage_map else None
    sources: dict[str, str] = {}
    jobs, tests_of = [], {}
    for mutant in mutants:
        path = ROOT / mutant.path
        source = sources.setdefault(mutant.path, path.read_text(encoding="utf-8"))
        code = functools.partial(_compile, source, path, mutant)
        if selector is None:
            tests, expected = list(args.tests), 30.0
        else:
            tests = selector.tests_for(mutant)
            expected = selector.expected_seconds(tests)
        tests_of[mutant.id] = tests
        timeout = args.timeout_factor * expected + 20.0
        jobs.append(Job(mutant.id, f"{PACKAGE}.{module_key(path)}", code, tests, timeout))
    return jobs, tests_of


def _compile(source: str, path: Path, mutant: Mutant) -> CodeType:
    return compile(mutated_tree(source, module_key(path), mutant), str(path), "exec", dont_inherit=True)


def _load(path: Path) -> CoverageMap:
    return CoverageMap.from_json(json.loads(path.read_text()))


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds through run_jobs, which kills the children
    started = time.monotonic()
    mutants = choose_mutants(args)
    if args.list:
        for mutant in mutants:
            print(f"{mutant.id}\t{mutant.path}:{mutant.line}\t{mutant.description}")
        return 0
    equivalents = load_equivalents(args.equivalent)
    jobs, tests_of = build_jobs(mutants, args)
    files = sorted({name.split("::", 1)[0] for tests in tests_of.values() for name in tests})
    first = next((tests[0] for tests in tests_of.values() if tests), None)
    sanity = [Job("unmutated", "-", None, [first], 300.0)] if first else []
    counts: dict[str, int] = {}

    def progress(job: Job, outcome: Outcome) -> None:
        if job.key == "unmutated":
            return
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
        done = sum(counts.values())
        if done % 100 == 0 or done == len(jobs):
            detected = counts.get(KILLED, 0) + counts.get(TIMEOUT, 0)
            print(
                f"  {done}/{len(jobs)} ({time.monotonic() - started:.0f} s): {detected} killed, "
                f"{done - detected} not ({counts.get(ERROR, 0)} errors)",
                flush=True,
            )

    plugin = MutationSession([*sanity, *jobs], parallel=args.jobs, on_done=progress)
    print(f"running {len(jobs)} mutants over {len(files)} test files, {args.jobs} at a time", flush=True)
    # no per-test timer thread, log capture or warnings capture: a child's verdict is its exit status (no unit test
    # uses caplog or recwarn), and a hung child is timed out by the parent
    quiet = [f"-pno:{name}" for name in ("cacheprovider", "timeout", "logging", "warnings", "faulthandler")]
    pytest_args = ["-qq", "-s", *quiet, *files]
    code = pytest.main(pytest_args, plugins=[plugin]) if files else 0
    if code not in (0, pytest.ExitCode.NO_TESTS_COLLECTED) or (sanity and "unmutated" not in plugin.outcomes):
        raise SystemExit(f"the mutation session failed (pytest exit {code})")
    if sanity and plugin.outcomes["unmutated"].status != SURVIVED:
        raise SystemExit(f"the harness does not work: an unmutated run ended {plugin.outcomes['unmutated']}")
    outcomes = plugin.outcomes
    wall = time.monotonic() - started
    summary = summarize(mutants, outcomes, equivalents, full=not (args.ids or args.sample or args.modules))
    write_reports(summary, args, wall=wall, jobs=args.jobs, tests_of=tests_of)
    print(summary.headline(wall), flush=True)
    if args.check:
        problems = summary.problems(Thresholds())
        for problem in problems:
            print(f"FAIL: {problem}", flush=True)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
