"""Which tests a mutant runs: those that execute its lines, by the baseline's coverage map.

* A mutant inside a function runs the tests that execute any of its lines.
* A mutant of a module-level assignment (``LOGGED_OUT_MARKERS = (...)``, ``MAX_POLL_INTERVAL = 2.0``) runs when the
  module is imported, before any test: it runs the tests that execute a line *reading* that name, in its module
  or (for public names) in any module of the core, and every test of a test file that imports the name.
* Anything else that runs at import time (class bodies, default values), or a mutant whose lines no test
  reaches, runs every test that executes a line of its module and every test of a test file that imports a name
  from it or the module itself (a dataclass's ``frozen=True`` or a field default: its generated methods have no
  lines of their own).
* A mutant none of these reach runs nothing (reported as ``no-tests``).

Tests are ordered fastest first (with ``-x`` a killed mutant then stops early).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mutation.operators import module_key

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from mutation.operators import Mutant


@dataclass
class CoverageMap:
    """The baseline's per-test coverage (written by :mod:`mutation.plugin`)."""

    tests: list[str]
    durations: dict[str, float]
    files: dict[str, dict[int, set[int]]]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CoverageMap:
        files = {
            name: {int(line): set(tests) for line, tests in lines.items()} for name, lines in data["files"].items()
        }
        return cls(tests=list(data["tests"]), durations=dict(data["durations"]), files=files)

    def module_tests(self, file_name: str) -> set[int]:
        found: set[int] = set()
        for tests in self.files.get(file_name, {}).values():
            found |= tests
        return found

    def line_tests(self, file_name: str, lines: Iterable[int]) -> set[int]:
        by_line = self.files.get(file_name, {})
        found: set[int] = set()
        for line in lines:
            found |= by_line.get(line, set())
        return found


def _top_level_names(tree: ast.Module) -> list[tuple[int, int, set[str]]]:
    """``(first line, last line, assigned names)`` of each module-level assignment."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if names:
                found.append((node.lineno, node.end_lineno or node.lineno, names))
    return found


def _reads(tree: ast.Module) -> dict[str, set[int]]:
    """Lines that read each name (``Name`` loads)."""
    reads: dict[str, set[int]] = defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads[node.id].add(node.lineno)
    return reads


def _users(source_file: Path, test_dir: Path, tests: list[Path]) -> set[str]:
    """The test files (as a node id names them: the path from the root) whose tests run ``source_file``'s imports:
    itself (a test file), every test file below it (a conftest.py), or those importing it (a helper module)."""
    root = test_dir.parent.parent

    def node_path(path: Path) -> str:
        return path.relative_to(root).as_posix()

    if source_file.name.startswith("test_"):
        return {node_path(source_file)}
    if source_file.name == "conftest.py":
        return {node_path(t) for t in tests if source_file.parent in t.parents}
    dotted = ".".join(source_file.relative_to(test_dir.parent).with_suffix("").parts)
    return {node_path(t) for t in tests if re.search(rf"^from {re.escape(dotted)} import", t.read_text(), re.M)}


class Selector:
    """Picks and orders the tests of each mutant of the modules in ``package_dir``."""

    def __init__(self, coverage_map: CoverageMap, package_dir: Path, test_dir: Path | None = None) -> None:
        self.map = coverage_map
        #: (module file name, imported name) -> the test files that import it from that module
        self.importers: dict[tuple[str, str], set[str]] = defaultdict(set)
        package = ".".join(package_dir.parts[-2:])
        # The unit tests mirror the source tree (tests/unit/<package path>/test_<module>.py), at every level. A
        # helper module or a conftest.py beside them imports for the test files that use it: its imports count for
        # each of them (the test files that import it; a conftest's: every test file below it).
        sources = sorted(test_dir.rglob("*.py")) if test_dir is not None else []
        tests = [path for path in sources if path.name.startswith("test_")]
        for source_file in sources:
            assert test_dir is not None  # (else there is no source file)
            tree = ast.parse(source_file.read_text(encoding="utf-8"))
            users = _users(source_file, test_dir, tests)
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom):
                    continue
                module = node.module or ""
                if module != package and not module.startswith(package + "."):
                    continue
                module_file = module.removeprefix(package).removeprefix(".")
                for alias in node.names:
                    self.importers[(module_file, alias.name)].update(users)
                    # ``from ...core.staging import manifest``: the test file imports the module itself
                    submodule = f"{module_file}.{alias.name}".removeprefix(".")
                    if package_dir.joinpath(*submodule.split(".")).with_suffix(".py").is_file():
                        self.importers[(submodule, "*")].update(users)
        self.assignments: dict[str, list[tuple[int, int, set[str]]]] = {}
        self.reads: dict[str, dict[str, set[int]]] = {}
        for path in sorted(package_dir.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            self.assignments[module_key(path)] = _top_level_names(tree)
            self.reads[module_key(path)] = _reads(tree)

    def tests_for(self, mutant: Mutant) -> list[str]:
        file_name = module_key(mutant.path)
        lines = range(mutant.line, mutant.end_line + 1)
        chosen: set[int] = set()
        chosen = self._readers(file_name, mutant.line) if mutant.module_level else self.map.line_tests(file_name, lines)
        if not chosen:
            files = {test for (module, _name), tests in self.importers.items() if module == file_name for test in tests}
            chosen = self.map.module_tests(file_name) | {
                i for i, test in enumerate(self.map.tests) if test.split("::", 1)[0] in files
            }
        return self.ordered(chosen)

    def _readers(self, file_name: str, line: int) -> set[int]:
        names = next((names for first, last, names in self.assignments[file_name] if first <= line <= last), set())
        chosen: set[int] = set()
        for name in names:
            for other, reads in self.reads.items():
                if other != file_name and name.startswith("_"):
                    continue
                chosen |= self.map.line_tests(other, reads.get(name, set()))
            files = self.importers.get((file_name, name), set())
            chosen |= {i for i, test in enumerate(self.map.tests) if test.split("::", 1)[0] in files}
        return chosen

    def ordered(self, chosen: Iterable[int]) -> list[str]:
        names = [self.map.tests[i] for i in chosen]
        return sorted(names, key=lambda name: (self.map.durations.get(name, 0.0), name))

    def expected_seconds(self, tests: Sequence[str]) -> float:
        return sum(self.map.durations.get(name, 1.0) for name in tests)
