"""Suite-wide set-up: an isolated AIRFLOW_HOME with a migrated SQLite metadata DB, and dag.test() helpers.

Environment variables are set before anything imports Airflow. DAG files (``dags_examples/`` and
``tests/dags/``) are copied into the temporary dags folder because ``dag.test()`` on Airflow 3 re-parses
the DAG's bundle from the configured dags folder.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="brev-airflow-home-"))
DAGS_FOLDER = AIRFLOW_HOME / "dags"
DAGS_FOLDER.mkdir()
for source in (ROOT / "dags_examples", ROOT / "tests" / "dags"):
    for path in source.glob("*.py"):
        shutil.copy(path, DAGS_FOLDER / path.name)

os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
    }
)
atexit.register(shutil.rmtree, AIRFLOW_HOME, True)


@pytest.fixture(scope="session")
def airflow_db():
    """Migrate the metadata DB once per test session (about 5 s)."""
    from airflow.utils.db import initdb

    initdb()
    return AIRFLOW_HOME


@pytest.fixture(scope="session")
def dagbag(airflow_db):
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(DAGS_FOLDER), include_examples=False)
    assert not bag.import_errors, bag.import_errors
    return bag


@pytest.fixture
def run_dag(dagbag, brev_sim, monkeypatch):
    """Run a DAG from the dags folder with ``dag.test()`` against the simulator; return the DagRun.

    The ``brev_default`` connection points at the simulator with a valid token unless the test already set
    ``AIRFLOW_CONN_BREV_DEFAULT``.
    """

    def _run(dag_id: str, *, conf: dict | None = None, connection: str | None = None):
        monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", connection or brev_sim.connection_json())
        dag = dagbag.get_dag(dag_id)
        assert dag is not None, f"no DAG {dag_id}"
        return dag.test(run_conf=conf)

    return _run

