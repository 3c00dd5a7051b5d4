"""A step's spec (airflow_provider_brev/steps/spec.py) is built from the pure core alone: its imports reach no I/O
module, and the import contract in pyproject.toml keeps it so (and breaks when one comes back)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

# The dev tools (import-linter and its grimp) are not in the floor venv (floor/requirements.txt): there this module is
# skipped; `make test` and `make lint` run it.
grimp = pytest.importorskip("grimp", reason="import-linter (a dev tool) is not installed")
configure = pytest.importorskip("importlinter.configuration").configure
ForbiddenContract = pytest.importorskip("importlinter.contracts.forbidden").ForbiddenContract

ROOT = Path(__file__).resolve().parents[3]
SPEC = "airflow_provider_brev.steps.spec"


def product_graph():  # grimp.ImportGraph
    return grimp.build_graph("airflow_provider_brev", include_external_packages=True, cache_dir=None)


def test_a_step_spec_imports_only_the_pure_core_and_the_exceptions_directly_or_not():
    reached = {m for m in product_graph().find_upstream_modules(SPEC) if m.startswith("airflow_provider_brev")}
    outside = sorted(m for m in reached if not m.startswith("airflow_provider_brev.core."))
    assert outside == ["airflow_provider_brev.exceptions"]


def spec_contract():  # ForbiddenContract
    """The contract as ``lint-imports`` reads it from pyproject.toml."""
    configure()  # what ``lint-imports`` does first (the clock that times a check)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (options,) = (c for c in config["contracts"] if c.get("source_modules") == [SPEC])
    options = {key: value for key, value in options.items() if key not in ("name", "type")}
    session = {"root_packages": [config["root_package"]], "include_external_packages": True}
    return ForbiddenContract(name="steps.spec", session_options=session, contract_options=options)


@pytest.mark.parametrize(
    "imported",
    [
        "airflow_provider_brev.instances.provisioning",  # where InstanceRequest used to live
        "airflow_provider_brev.instances.release",  # where release_policy used to live
        "airflow_provider_brev.staging.step_data",
        "airflow_provider_brev.cost.meter",
        "airflow_provider_brev.steps.workload",
        "airflow_provider_brev.utils.task_memory",
        "airflow_provider_brev.hooks.brev",
        "airflow",
    ],
)
def test_the_import_contract_breaks_when_an_io_import_comes_back(imported):
    contract = spec_contract()
    graph = product_graph()
    assert contract.check(product_graph(), verbose=False).kept  # a check removes the ignored imports: a graph each
    graph.add_import(importer=SPEC, imported=imported, line_number=1, line_contents=f"import {imported}")
    assert not contract.check(graph, verbose=False).kept


def test_also_an_indirect_one():
    contract = spec_contract()
    graph = product_graph()
    graph.add_import(
        importer="airflow_provider_brev.core.values",
        imported="airflow_provider_brev.utils.task_memory",
        line_number=1,
        line_contents="import airflow_provider_brev.utils.task_memory",
    )
    assert not contract.check(graph, verbose=False).kept
