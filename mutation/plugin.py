"""A pytest plugin that writes the coverage map of a test run: which test executes which line of the pure core.

Loaded by :mod:`mutation.run` (``-p mutation.plugin``) for the baseline run only, with the environment variables
``MUTATION_MAP_OUT`` (the JSON file to write) and ``MUTATION_SOURCE`` (the directory to measure). It uses
coverage.py's dynamic contexts: one context per test (set-up, call and tear-down), so each mutant later runs only
the tests that execute its line. It also records how long each test took (the runner orders tests fastest first
and derives each mutant's timeout from them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import coverage
import pytest

from mutation.operators import module_key

if TYPE_CHECKING:
    from collections.abc import Generator


class CoverageMap:
    """Records per-test line coverage of ``source`` and writes it to ``out`` when the session ends."""

    def __init__(self, source: str, out: str) -> None:
        self.source = Path(source).resolve()
        self.out = Path(out)
        self.durations: dict[str, float] = {}
        self.failed: set[str] = set()
        self.cov = coverage.Coverage(data_file=None, source=[str(self.source)], config_file=False)
        self.cov.start()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
        self.cov.switch_context(item.nodeid)
        started = time.perf_counter()
        yield
        self.durations[item.nodeid] = round(time.perf_counter() - started, 4)
        self.cov.switch_context("")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.cov.stop()
        data = self.cov.get_data()
        tests = sorted(set(self.durations) - self.failed)  # a failing test cannot judge a mutant
        index = {name: number for number, name in enumerate(tests)}
        files: dict[str, dict[str, list[int]]] = {}
        for measured in sorted(data.measured_files()):
            path = Path(measured).resolve()
            if self.source not in path.parents:
                continue
            lines: dict[str, list[int]] = {}
            for line, contexts in sorted((data.contexts_by_lineno(measured) or {}).items()):
                lines[str(line)] = sorted({index[c] for c in contexts if c in index})
            files[module_key(path)] = lines
        self.out.write_text(
            json.dumps(
                {
                    "exit_status": int(exitstatus),
                    "failed": sorted(self.failed),
                    "tests": tests,
                    "durations": self.durations,
                    "files": files,
                }
            )
        )


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get("MUTATION_MAP_OUT")
    source = os.environ.get("MUTATION_SOURCE")
    if out and source:
        config.pluginmanager.register(CoverageMap(source, out), "mutation-coverage-map")
