"""The mutation tool (``mutation/``): its operators, where it does not mutate, stable ids, putting a mutant into a
live module, and the score it reports."""

from __future__ import annotations

import argparse
import sys
import textwrap
import types
from pathlib import Path

import pytest

# The mutation tool is a development tool at the repository's root, not part of the wheel: `make test-floor` imports
# the provider from site-packages (non-editable), so the root is appended (never prepended: the installed provider
# stays the one under test there).
sys.path.append(str(Path(__file__).resolve().parents[3]))

from mutation.execute import KILLED, SURVIVED, TIMEOUT, Outcome
from mutation.operators import list_mutants, module_key, mutated_tree
from mutation.patch import apply_mutant
from mutation.report import Thresholds, load_equivalents, summarize, write_reports

SOURCE = '''
"""Docstring: never mutated."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["decide"]

MARKERS = ("alpha", "beta")
LIMIT = 2


def decide(text: str, count: int) -> str:
    """Not mutated either."""
    if not text:
        raise ValueError(f"empty text {text!r}")
    if any(m in text for m in MARKERS) and count < LIMIT:
        return "match"
    return f"no match for {count + 1}"
'''


def _mutants(tmp_path, name="sample", source=SOURCE):
    path = tmp_path / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path, list_mutants(path, tmp_path)


def _load(path, mutant=None):
    source = path.read_text()
    tree = mutated_tree(source, module_key(path), mutant) if mutant else compile(source, str(path), "exec")
    namespace: dict = {"__name__": path.stem}
    exec(compile(tree, str(path), "exec") if mutant else tree, namespace)
    return namespace


def test_each_operator_finds_its_sites(tmp_path):
    _, mutants = _mutants(tmp_path)
    found = {(m.operator, m.description) for m in mutants}
    assert ("compare-negate", "'<' -> '>=' in count < LIMIT") in found
    assert ("compare-boundary", "'<' -> '<=' in count < LIMIT") in found
    assert ("compare-negate", "'in' -> 'not in' in m in text") in found
    assert ("boolop-swap", "'and' -> 'or' in any((m in text for m in MARKERS)) and count < LIMIT") in found
    assert ("boolop-drop", "drop 'count < LIMIT' from any((m in text for m in MARKERS)) and count < LIMIT") in found
    assert ("not-drop", "drop 'not' in not text") in found
    assert ("raise-delete", "delete raise ValueError(f'empty text {text!r}')") in found
    assert ("return-delete", "delete return 'match'") in found
    assert ("string", "'alpha' -> 'XXalphaXX'") in found
    assert ("element-drop", "drop 'beta' from ('alpha', 'beta')") in found
    assert ("number", "2 -> 3") in found


def test_docstrings_annotations_all_type_checking_and_messages_are_left_alone(tmp_path):
    _, mutants = _mutants(tmp_path)
    strings = {m.description for m in mutants if m.operator == "string"}
    assert strings == {"'alpha' -> 'XXalphaXX'", "'beta' -> 'XXbetaXX'", "'match' -> 'XXmatchXX'"}
    assert not [m for m in mutants if m.operator == "arith"]  # count + 1 is inside an f-string


def test_shell_script_builders_keep_their_string_literals(tmp_path):
    source = (
        'MARKER = "BREV_JOB_STATUS"\n\ndef build_poll_command(job):\n    return "\\n".join(["fi", MARKER, "exit 0"])\n'
    )
    _, mutants = _mutants(tmp_path, "core/jobs/scripts", source)  # a module of the core that builds scripts
    assert [m.description for m in mutants if m.operator == "string"] == ["'BREV_JOB_STATUS' -> 'XXBREV_JOB_STATUSXX'"]
    assert not [m for m in mutants if m.operator == "element-drop"]


def test_a_mutant_changes_behaviour_and_the_original_does_not(tmp_path):
    path, mutants = _mutants(tmp_path)
    assert _load(path)["decide"]("alpha", 1) == "match"
    flipped = next(m for m in mutants if m.description == "'<' -> '>=' in count < LIMIT")
    assert _load(path, flipped)["decide"]("alpha", 1).startswith("no match")
    dropped = next(m for m in mutants if m.description == "drop 'alpha' from ('alpha', 'beta')")
    assert _load(path, dropped)["decide"]("alpha", 1).startswith("no match")
    no_raise = next(m for m in mutants if m.operator == "raise-delete")
    assert _load(path, no_raise)["decide"]("", 1).startswith("no match")


def test_ids_are_unique_and_survive_an_edit_elsewhere(tmp_path):
    _, before = _mutants(tmp_path)
    assert len({m.id for m in before}) == len(before)
    _, after = _mutants(tmp_path, source=SOURCE.replace("LIMIT = 2\n", "LIMIT = 2\nOTHER = 7\n"))
    assert {m.id for m in before} <= {m.id for m in after}
    moved = {m.id: m.line for m in after}
    assert any(moved[m.id] == m.line + 1 for m in before)  # same id, new line


def test_a_trailing_bare_return_is_not_a_mutant(tmp_path):
    _, mutants = _mutants(
        tmp_path, "tail", "def f(x):\n    if x:\n        return None\n    print(x)\n    return None\n"
    )
    assert [m.line for m in mutants if m.operator == "return-delete"] == [3]


# a module of the package, and a test module as pytest imports it (tests/unit/... is the package ``unit``)
@pytest.mark.parametrize("user_name", ["airflow_provider_brev_sample_user", "unit.core.sample.test_sample_user"])
def test_a_patched_module_changes_every_reference(tmp_path, monkeypatch, user_name):
    live = types.ModuleType("mutation_sample_live")
    live.__file__ = str(tmp_path / "live.py")
    exec(compile(textwrap.dedent(SOURCE), live.__file__, "exec"), live.__dict__)
    user = types.ModuleType(user_name)  # imported the names, as a test module does
    user.decide, user.MARKERS = live.decide, live.MARKERS
    monkeypatch.setitem(sys.modules, live.__name__, live)
    monkeypatch.setitem(sys.modules, user.__name__, user)
    path = tmp_path / "sample.py"
    path.write_text(textwrap.dedent(SOURCE))
    dropped = next(m for m in list_mutants(path, tmp_path) if m.description == "drop 'alpha' from ('alpha', 'beta')")
    apply_mutant(live.__name__, compile(mutated_tree(path.read_text(), "sample", dropped), str(path), "exec"))
    assert user.MARKERS == ("beta",)
    assert user.decide("alpha", 1).startswith("no match")  # the function object it holds runs the mutant


def test_the_score_leaves_equivalents_out_and_flags_stale_ones(tmp_path):
    _, mutants = _mutants(tmp_path)
    first, second, third = mutants[:3]
    outcomes = {m.id: Outcome(KILLED, 0.1, 1) for m in mutants}
    outcomes[second.id] = Outcome(SURVIVED, 0.1, 0)
    outcomes[third.id] = Outcome(TIMEOUT, 9.0, None)
    equivalent = tmp_path / "equivalent.txt"
    equivalent.write_text(f"# comment\n{second.id} the two branches return the same value\nsample:gone:x:0 stale\n")
    summary = summarize(mutants, outcomes, load_equivalents(equivalent), full=True)
    assert summary.overall.score == 1.0  # the survivor is equivalent; the timeout counts as killed
    assert summary.stale_equivalents == ["sample:gone:x:0"]
    assert any("no longer exist" in p for p in summary.problems(Thresholds()))
    assert summary.status[first.id] == KILLED
    args = argparse.Namespace(report=tmp_path / "r.md", json=tmp_path / "r.json", modules=None, ids=None, sample=None)
    write_reports(summary, args, wall=60.0, jobs=2, tests_of={})
    assert "the two branches return the same value" in args.report.read_text()


def test_an_equivalent_entry_needs_a_reason(tmp_path):
    equivalent = tmp_path / "equivalent.txt"
    equivalent.write_text("sample:x:y:0\n")
    with pytest.raises(SystemExit, match="needs a reason"):
        load_equivalents(equivalent)


def test_a_module_of_plain_dataclasses_runs_the_tests_that_import_it(tmp_path):
    """Its class bodies run at import and its generated methods have no lines: no test "executes" it, yet the test
    files that import its names are the ones that can tell ``frozen=True`` from ``frozen=False``."""
    from mutation.select import CoverageMap, Selector

    package = tmp_path / "airflow_provider_brev" / "core"
    _path, mutants = _mutants(
        package,
        "shapes",
        'from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Shape:\n    """A shape."""\n\n    n: int\n',
    )
    tests = tmp_path / "tests" / "unit"
    tests.mkdir(parents=True)
    (tests / "test_shapes.py").write_text("from airflow_provider_brev.core.shapes import Shape\n")
    (tests / "test_other.py").write_text("from airflow_provider_brev.core.other import Other\n")
    coverage = CoverageMap(
        tests=["tests/unit/test_other.py::test_other", "tests/unit/test_shapes.py::test_frozen"],
        durations={},
        files={"other": {3: {0}}},
    )
    (frozen,) = [m for m in mutants if m.description == "True -> False"]
    assert Selector(coverage, package, tests).tests_for(frozen) == ["tests/unit/test_shapes.py::test_frozen"]


def test_a_test_file_that_imports_the_module_itself_counts_as_an_importer(tmp_path):
    """``from airflow_provider_brev.core.geometry import shapes`` then ``shapes.Shape(...)``: the file imports no
    name of the module, yet it is the one whose immutability test tells ``frozen=True`` from ``frozen=False``."""
    from mutation.select import CoverageMap, Selector

    package = tmp_path / "airflow_provider_brev" / "core"
    source = 'from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Shape:\n    """A shape."""\n'
    path = package / "geometry" / "shapes.py"
    path.parent.mkdir(parents=True)
    path.write_text(source + "\n    n: int\n")
    (package / "geometry" / "__init__.py").write_text("")
    mutants = list_mutants(path, package)
    tests = tmp_path / "tests" / "unit"
    tests.mkdir(parents=True)
    (tests / "test_modules.py").write_text("from airflow_provider_brev.core.geometry import shapes\n")
    (tests / "test_package.py").write_text("from airflow_provider_brev.core import geometry\n")  # a package: no
    coverage = CoverageMap(
        tests=["tests/unit/test_modules.py::test_frozen", "tests/unit/test_package.py::test_other"],
        durations={},
        files={},
    )
    (frozen,) = [m for m in mutants if m.description == "True -> False"]
    assert Selector(coverage, package, tests).tests_for(frozen) == ["tests/unit/test_modules.py::test_frozen"]


def test_the_mirrored_tree_and_its_helper_modules_count_as_importers(tmp_path):
    """The unit tests mirror the source tree: ``tests/unit/core/geometry/test_shapes.py`` imports the module it
    tests, and a helper module beside it imports for the test files that import the helper; each is named by its
    node id's file part (the path from the root), as the coverage map names it."""
    from mutation.select import CoverageMap, Selector

    package = tmp_path / "airflow_provider_brev" / "core"
    source = 'from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Shape:\n    """A shape."""\n'
    path = package / "geometry" / "shapes.py"
    path.parent.mkdir(parents=True)
    path.write_text(source + "\n    n: int\n")
    (package / "geometry" / "__init__.py").write_text("")
    mutants = list_mutants(path, package)
    tests = tmp_path / "tests" / "unit"
    nested = tests / "core" / "geometry"
    nested.mkdir(parents=True)
    (nested / "test_shapes.py").write_text("from airflow_provider_brev.core.geometry.shapes import Shape\n")
    (nested / "shape_helpers.py").write_text("from airflow_provider_brev.core.geometry.shapes import Shape\n")
    (nested / "test_drawing.py").write_text("from unit.core.geometry.shape_helpers import Shape\n")
    (tests / "test_flat.py").write_text("import json\n")
    coverage = CoverageMap(
        tests=[
            "tests/unit/test_flat.py::test_other",
            "tests/unit/core/geometry/test_shapes.py::test_frozen",
            "tests/unit/core/geometry/test_drawing.py::test_draw",
        ],
        durations={},
        files={},
    )
    (frozen,) = [m for m in mutants if m.description == "True -> False"]
    assert sorted(Selector(coverage, package, tests).tests_for(frozen)) == [
        "tests/unit/core/geometry/test_drawing.py::test_draw",
        "tests/unit/core/geometry/test_shapes.py::test_frozen",
    ]
