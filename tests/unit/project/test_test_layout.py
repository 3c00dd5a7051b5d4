"""The test suite's own layout (tests/README.md): Airflow's three test folders, and unit tests that mirror the
package (``tests/unit/<package path>/test_<module>.py``), every test folder a package."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "airflow_provider_brev"
#: Unit test folders that mirror no package folder: the project's own checks (docs, packaging, conventions).
PROJECT = TESTS / "unit" / "project"
#: Test files named after no single module, and why.
PACKAGE_WIDE = {
    "operators/test_style.py": "one style rule over every operator module of operators/",
}


def _python_folders(top: Path) -> set[Path]:
    return {p.parent for p in top.rglob("*.py") if "__pycache__" not in p.parts}


def test_the_tests_live_in_airflows_three_test_folders():
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == ["integration", "system", "unit"]


def test_every_test_folder_is_a_package_except_the_dag_folders():
    """Test modules are named by their path (``unit.core.staging.test_paths``): two folders may hold files of the
    same name. A DAG folder (``dags/``) holds DAG files that Airflow parses, not test modules."""
    folders = set().union(*(_python_folders(TESTS / name) for name in ("unit", "integration", "system")))
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if f.name != "dags" and not (f / "__init__.py").exists())
    assert missing == [], f"add an __init__.py to {missing}"


def test_unit_tests_mirror_the_package():
    """``tests/unit/<package path>/test_<module>.py`` for ``airflow_provider_brev/<package path>/<module>.py``; a
    second file of one module names its aspect after the module's name (``test_spec_contract.py``)."""
    unit = TESTS / "unit"
    assert sorted(p.name for p in unit.glob("test_*.py")) == [], "a unit test file goes beside its module's mirror"
    wrong = []
    for path in sorted(unit.rglob("test_*.py")):
        relative = path.relative_to(unit)
        if PROJECT in path.parents or relative.as_posix() in PACKAGE_WIDE:
            continue
        package = PACKAGE.joinpath(*relative.parts[:-1])
        stem = path.stem.removeprefix("test_")
        prefixes = [stem] + [stem[:i] for i, char in enumerate(stem) if char == "_"]
        if not any((package / f"{prefix}.py").is_file() for prefix in prefixes):
            wrong.append(relative.as_posix())
    assert wrong == [], f"no module of the package mirrors these: {wrong}"
