"""Conventions of Airflow's own provider checks, adapted to this package: every operator is shown in an example
DAG, every example carries the system-test block, every package folder is a regular package, and ruff's Airflow
rules hold everywhere (AIR202: a ``@task`` returning a dict says ``multiple_outputs``)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers import provider_operator_classes

ROOT = Path(__file__).resolve().parents[3]
#: Operators no example DAG uses yet (each a known gap; remove a name once an example shows it).
NOT_IN_AN_EXAMPLE = {"LeptonTaoOperator"}


#: The bases DAG authors subclass rather than use (besides the classes named ``*Base*``).
STEP_BASES = {"BrevStepOperator", "LeptonStepOperator"}


def _concrete_operators() -> set[str]:
    """Every operator class the provider defines for DAG authors (operators, sensors, transfers)."""
    found = {cls.__name__ for cls in provider_operator_classes()}
    assert found >= STEP_BASES
    return {name for name in found if "Base" not in name} - STEP_BASES


def _called_in_examples() -> set[str]:
    called = set()
    for path in (ROOT / "dags_examples").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    return called


def test_every_operator_is_used_in_an_example_dag():
    operators = _concrete_operators()
    assert {"TaoOperator", "VisualChangeNetExportOperator", "VisualChangeNetInferenceOperator"} <= operators
    assert operators >= NOT_IN_AN_EXAMPLE  # the known gaps are real operators
    missing = operators - NOT_IN_AN_EXAMPLE - _called_in_examples()
    assert missing == set(), f"use these operators in an example DAG in dags_examples/: {sorted(missing)}"


def test_ruff_runs_airflows_rules_including_air202():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "AIR" in lint["select"] and "AIR202" in lint["select"]
    assert lint.get("preview") is True and lint.get("explicit-preview-rules") is True  # AIR202 is a preview rule
    ignored = [*lint.get("ignore", []), *(c for codes in lint.get("per-file-ignores", {}).values() for c in codes)]
    assert [code for code in ignored if code.startswith("AIR")] == []  # no file is exempt from Airflow's rules


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end (at most 5 minutes), its output captured as text."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, **kwargs)


#: A noqa comment of one of Airflow's rules (AIRxxx) silences it on one line only, and says why after a " - ".
_AIR_NOQA = re.compile(r"#\s*noqa:\s*(AIR\d+)(?P<reason>.*)$")


def test_airflows_rules_pass_and_each_exception_says_why():
    """``ruff check --select AIR`` (all of Airflow's rules, AIR202 included) is clean on the whole repository, and
    each line that silences one names the reason after the code."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():  # the floor venv (floor/requirements.txt) has no dev tools; `make test` runs this
        pytest.skip("ruff (a dev tool) is not installed in this environment")
    done = _run([str(ruff), "check", "--select", "AIR,AIR202", "--output-format", "concise"], cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    files = [p for folder in ("airflow_provider_brev", "dags_examples", "tests") for p in (ROOT / folder).rglob("*.py")]
    silenced = [
        (str(path.relative_to(ROOT)), number, match)
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if (match := _AIR_NOQA.search(line))
    ]
    for where, number, match in silenced:
        assert re.match(r"\s+-\s+\S", match["reason"]), f"{where}:{number}: say why {match[1]} does not apply"


def test_every_package_folder_has_an_init_module():
    """Airflow's providers check: every folder of the package that holds Python or data files is a regular package
    (``remote/``'s scripts are package data, loaded with :mod:`importlib.resources` from it)."""
    package = ROOT / "airflow_provider_brev"
    folders = {p.parent for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert package / "remote" in folders
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert missing == [], f"add an __init__.py to {missing}"


#: The block every example ends with (Airflow's system-test convention; tests/system/system_tests.py says why the
#: import is guarded).
SYSTEM_TEST_BLOCK = """\
try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
"""


@pytest.mark.parametrize("path", sorted((ROOT / "dags_examples").glob("*.py")), ids=lambda p: p.name)
def test_every_example_ends_with_the_system_test_block(path):
    """As in Airflow's providers: ``test_run = get_test_run(dag)`` after the example's last ``# [END ...]`` marker
    (outside every snippet the docs show), on the example's one DAG, bound to ``dag``."""
    source = path.read_text()
    assert source.endswith("\n\n" + SYSTEM_TEST_BLOCK), f"end {path.name} with the system-test block"
    block_at = source.rindex(SYSTEM_TEST_BLOCK)
    assert source.rfind("# [END ") < block_at
    tree = ast.parse(source)
    dags = [
        item
        for node in tree.body
        if isinstance(node, ast.With)
        for item in node.items
        if isinstance(item.context_expr, ast.Call) and getattr(item.context_expr.func, "id", "") == "DAG"
    ]
    assert [ast.unparse(item.optional_vars) for item in dags if item.optional_vars] == ["dag"]
    assert len(dags) == 1


def test_outside_the_test_suite_an_example_is_its_dag_alone(tmp_path):
    """Where the test suite is not on ``sys.path`` (a deployment, ``make demo``), parsing an example imports
    nothing of the tests and defines no test; the DAG is the same."""
    probe = (
        "import json, runpy, sys\n"
        "found = {}\n"
        "for path in sys.argv[1:]:\n"
        "    namespace = runpy.run_path(path)\n"
        "    found[path] = [namespace['dag'].dag_id, 'test_run' in namespace, 'system' in sys.modules]\n"
        "print(json.dumps(found))\n"
    )
    examples = sorted(str(p) for p in (ROOT / "dags_examples").glob("*.py"))
    env = {"PATH": os.environ["PATH"], "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    done = _run([sys.executable, "-I", "-c", probe, *examples], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert sorted(found) == examples
    assert {path: (test_run, system) for path, (_, test_run, system) in found.items()} == dict.fromkeys(
        examples, (False, False)
    )
