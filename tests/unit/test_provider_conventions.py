"""Conventions of Airflow's own provider checks, adapted to this package: every operator is shown in an example
DAG, and ruff's Airflow rules stay on (AIR202: a ``@task`` returning a dict says ``multiple_outputs``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from airflow_provider_brev._compat import BaseOperator

ROOT = Path(__file__).resolve().parents[2]
#: Operators no example DAG uses yet (each a known gap; remove a name once an example shows it).
NOT_IN_AN_EXAMPLE = {"LeptonTaoOperator"}


#: The bases DAG authors subclass rather than use (besides the classes named ``*Base*``).
STEP_BASES = {"BrevStepOperator", "LeptonStepOperator"}


def _concrete_operators() -> set[str]:
    """Every operator class the provider defines for DAG authors (operators, sensors, transfers)."""
    found = set()
    for kind in ("operators", "sensors", "transfers"):
        package = importlib.import_module(f"airflow_provider_brev.{kind}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and obj.__module__ == module.__name__ and issubclass(obj, BaseOperator):
                    found.add(name)
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


#: ``# noqa: AIRxxx - why``: a rule is silenced on one line only, and says why.
_AIR_NOQA = re.compile(r"#\s*noqa:\s*(AIR\d+)(?P<reason>.*)$")


def test_airflows_rules_pass_and_each_exception_says_why():
    """``ruff check --select AIR`` (all of Airflow's rules, AIR202 included) is clean on the whole repository, and
    each line that silences one names the reason after the code."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", "--select", "AIR,AIR202", "--output-format", "concise"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    files = [p for folder in ("airflow_provider_brev", "dags_examples", "tests") for p in (ROOT / folder).rglob("*.py")]
    silenced = [
        (str(path.relative_to(ROOT)), number, match)
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if (match := _AIR_NOQA.search(line))
    ]
    assert silenced  # the metadata database's own models, where no task runs (tests/helpers.py, warm_reuse.py)
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
