"""What a DAG file, a worker and a triggerer pay to import the provider: every module of the layers they load
(operators, sensors, transfers, triggers, hooks, the task-side machinery and the UI plugin) imports no heavy library
Airflow does not already load, none of the page's code outside the API server, and nothing of the simulator.

Run in a fresh interpreter: the test process itself has imported much more."""

from __future__ import annotations

import json
import os
import subprocess
import sys

#: The package folders whose every module a DAG file, a worker or a triggerer may import.
TASK_SIDE = (
    "operators",
    "sensors",
    "transfers",
    "triggers",
    "hooks",
    "steps",
    "instances",
    "jobs",
    "staging",
    "cost",
    "utils",
)

#: Libraries none of them may load (beyond what Airflow itself already loaded): the page's web stack, AWS, Lepton,
#: browsers, data frames, SSH.
HEAVY = ("fastapi", "starlette", "boto3", "botocore", "leptonai", "playwright", "pandas", "paramiko")

PROBE = """
import importlib, json, pkgutil, sys
import airflow.sdk, airflow.plugins_manager, airflow.models.baseoperator  # what Airflow loads anyway
baseline = set(sys.modules)
modules = ["airflow_provider_brev.ui.plugin", "airflow_provider_brev.get_provider_info"]
for folder in FOLDERS:
    package = importlib.import_module("airflow_provider_brev." + folder)
    modules += [package.__name__ + "." + info.name for info in pkgutil.iter_modules(package.__path__)]
for name in modules:
    importlib.import_module(name)
print(json.dumps({"modules": modules, "new": sorted(set(sys.modules) - baseline)}))
"""


def _imported() -> dict[str, list[str]]:
    probe = PROBE.replace("FOLDERS", repr(TASK_SIDE))
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False, env=_env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}


def test_task_side_modules_import_nothing_heavy_nor_the_page_nor_the_simulator():
    found = _imported()
    for wanted in (
        "airflow_provider_brev.hooks.job_polls",
        "airflow_provider_brev.hooks.transcript",
        "airflow_provider_brev.instances.warm_pool_stores",
        "airflow_provider_brev.ui.plugin",
    ):
        assert wanted in found["modules"], wanted  # the probe covers the modules it is meant to
    new = found["new"]
    heavy = sorted(name for name in new if name.split(".")[0] in HEAVY)
    assert heavy == [], f"imported at parse time: {heavy}"
    page = sorted(
        name for name in new if name.startswith(("airflow_provider_brev.ui.", "airflow_provider_brev.core.ui"))
    )
    assert page == ["airflow_provider_brev.ui.plugin"], "outside the API server the plugin builds no page"
    assert [name for name in new if name.startswith("airflow_provider_brev.testing")] == []
