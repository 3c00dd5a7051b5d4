"""The mutation run inside one pytest session: every test collected once, each mutant run in a forked child.

:class:`MutationSession` is a pytest plugin (given to ``pytest.main``). Its ``pytest_runtestloop`` replaces the
normal run: for each mutant it forks (:func:`mutation.execute.run_jobs`); the child puts the mutant into the
already imported module (:func:`mutation.patch.apply_mutant`) and runs the selected items through pytest's own
``runtestprotocol`` (fixtures, capture and logging as usual), stopping at the first failure. Nothing is imported
or collected per mutant, so a mutant costs its tests' time plus a few milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from _pytest.runner import runtestprotocol

from mutation.execute import HARNESS_FAILED, Job, Outcome, run_jobs
from mutation.patch import apply_mutant

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: Exit status of a child whose selected tests were not all collected.
MISSING_TESTS = 4
#: Exit status of a child whose mutant made its module fail to execute (as an import error would): killed.
MODULE_FAILED = 2


class MutationSession:
    """Runs ``jobs`` instead of the session's tests; the outcomes end up in :attr:`outcomes`."""

    def __init__(
        self, jobs: Sequence[Job], *, parallel: int, on_done: Callable[[Job, Outcome], None] | None = None
    ) -> None:
        self.jobs = list(jobs)
        self.parallel = parallel
        self.on_done = on_done
        self.outcomes: dict[str, Outcome] = {}
        self.collected = 0
        #: per module, how often each test killed one of its mutants: the next mutant runs the best killers first
        self.killers: dict[str, Counter[str]] = defaultdict(Counter)
        self.scratch = Path(tempfile.mkdtemp(prefix="mutation-killers-"))

    def _killer_file(self, job: Job) -> Path:
        return self.scratch / hashlib.sha256(job.key.encode()).hexdigest()[:16]

    def _prepare(self, job: Job) -> None:
        counts = self.killers[job.module]
        if counts:
            order = {name: index for index, name in enumerate(job.tests)}
            job.tests.sort(key=lambda name: (-counts[name], order[name]))

    def _done(self, job: Job, outcome: Outcome) -> None:
        killer = self._killer_file(job)
        if killer.exists():
            self.killers[job.module][killer.read_text()] += 1
            killer.unlink()
        if self.on_done:
            self.on_done(job, outcome)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed:
            raise session.Interrupted("collection failed")
        items = {item.nodeid: item for item in session.items}
        by_file: dict[str, list[pytest.Item]] = {}
        by_function: dict[str, list[pytest.Item]] = {}  # a test function's id without parameters: all of its cases
        for item in session.items:
            by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
            by_function.setdefault(item.nodeid.split("[", 1)[0], []).append(item)
        self.collected = len(items)
        conftests = [p for p in session.config.pluginmanager.get_plugins() if isinstance(p, ModuleType)]

        def body(job: Job) -> int:
            selected: list[pytest.Item] = []
            for name in job.tests:  # a node id, a test function or a test file; a stale map's gone ids are skipped
                selected += [items[name]] if name in items else by_file.get(name) or by_function.get(name, [])
            if not selected:
                return MISSING_TESTS
            if job.code is not None:
                try:
                    apply_mutant(job.module, job.code(), conftests)
                except Exception:
                    if os.environ.get("MUTATION_DEBUG"):
                        traceback.print_exc()
                    return MODULE_FAILED
            for index, item in enumerate(selected):
                following = selected[index + 1] if index + 1 < len(selected) else None
                reports = runtestprotocol(item, nextitem=following, log=False)
                if any(report.failed for report in reports):
                    with contextlib.suppress(OSError):
                        self._killer_file(job).write_text(item.nodeid)
                    if os.environ.get("MUTATION_DEBUG"):
                        print(f"killed by {item.nodeid}: {[r.longreprtext for r in reports if r.failed]}")
                    return 1
            return 0

        try:
            self.outcomes = run_jobs(self.jobs, body, parallel=self.parallel, on_done=self._done, prepare=self._prepare)
        except BaseException:
            self.outcomes = {job.key: Outcome("error", 0.0, HARNESS_FAILED) for job in self.jobs}
            raise
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return True
