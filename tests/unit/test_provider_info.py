"""Provider registration: the entry point, Airflow's schema, and what `airflow providers ...` shows."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path

import jsonschema

from airflow_provider_brev.get_provider_info import get_provider_info


def _provider_entry_point():
    (ep,) = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_provider_brev")]
    return ep


def test_entry_point_returns_the_dict():
    assert _provider_entry_point().load()() == get_provider_info()


def test_provider_info_validates_against_airflows_schema():
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_package_name_equals_distribution_name():
    assert get_provider_info()["package-name"] == distribution("airflow-provider-brev").metadata["Name"]


def test_every_listed_module_and_class_imports():
    info = get_provider_info()
    modules = [
        m
        for kind in ("hooks", "operators", "sensors", "triggers")
        for entry in info[kind]
        for m in entry["python-modules"]
    ]
    for module in modules:
        importlib.import_module(module)
    for transfer in info["transfers"]:
        importlib.import_module(transfer["python-module"])
    for conn in info["connection-types"]:
        module, _, cls = conn["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), cls)
        assert hook.conn_type == conn["connection-type"] == "brev"
        assert hook.default_conn_name == "brev_default"
    for link in info.get("extra-links", []):
        module, _, cls = link.rpartition(".")
        getattr(importlib.import_module(module), cls)


def test_get_provider_info_module_has_no_imports():
    source = Path(sys.modules["airflow_provider_brev.get_provider_info"].__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations"]


def _airflow(*args: str) -> str:
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_airflow_cli_lists_the_provider_and_connection_type():
    provider = _airflow("providers", "get", "airflow-provider-brev", "-o", "json")
    assert "airflow-provider-brev" in provider
    hooks = _airflow("providers", "hooks", "-o", "json")
    entries = {row["connection_type"]: row for row in json.loads(hooks)}
    assert entries["brev"]["class"] == "airflow_provider_brev.hooks.brev.BrevHook"
