"""Suite-wide set-up: an isolated AIRFLOW_HOME with a migrated SQLite metadata DB, and dag.test() helpers.

Environment variables are set before anything imports Airflow. DAG files (``dags_examples/`` and
``tests/integration/dags/``) are copied into the temporary dags folder because ``dag.test()`` on Airflow 3 re-parses
the DAG's bundle from the configured dags folder.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import functools
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import (
    add_dag_files,
    airflow_logs_through_stdlib,
    bundles_already_parsed,
    check_param_schemas_once,
    configure_dag_test_logging,
)

# The simulator plugin is opt-in (no pytest11 entry point): users add the same line to their conftest.py.
pytest_plugins = ["airflow_provider_brev.testing.pytest_plugin", "fixtures_s3"]
ROOT = Path(__file__).resolve().parents[1]
#: What every process of one run shares: the dags folder and a metadata DB migrated and synced once (the template
#: each process copies). The first process to import this file (pytest itself, or xdist's controller, whose
#: environment its workers inherit) makes it and removes it when it exits.
SHARED_ENV = "BREV_TEST_SHARED_DIR"
_MADE_SHARED = SHARED_ENV not in os.environ
if _MADE_SHARED:  # (only then: a worker that made its own and left it would leak an empty directory per run)
    os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="brev-airflow-shared-")
    atexit.register(shutil.rmtree, os.environ[SHARED_ENV], True)
SHARED = Path(os.environ[SHARED_ENV])
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="brev-airflow-home-"))
DAGS_FOLDER = SHARED / "dags"
DAGS_FOLDER.mkdir(exist_ok=True)
add_dag_files(
    DAGS_FOLDER, [*(ROOT / "dags_examples").glob("*.py"), *(ROOT / "tests" / "integration" / "dags").glob("*.py")]
)

os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        # dag.test() has no scheduler, so no deferral race for the settling time to guard against
        # (airflow_provider_brev/triggers/brev.py); its own tests set it explicitly.
        "AIRFLOW__BREV__DEFERRAL_SETTLE_SECONDS": "0",
    }
)
atexit.register(shutil.rmtree, AIRFLOW_HOME, True)


@pytest.fixture(scope="session")
def airflow_db():
    """A metadata DB, migrated and holding every DAG of the dags folder: the first process of the run migrates its
    own and writes every bundle's DAGs to it (about 15 s of CPU), then leaves a copy that the other processes
    (xdist's workers) start from instead of doing the same."""
    template = SHARED / "airflow.db"
    with _shared_setup_lock():
        if template.exists():
            _copy_sqlite(template, AIRFLOW_HOME / "airflow.db")
        else:
            from airflow.utils.db import initdb

            from airflow_provider_brev.testing.dag_sync import sync_dag_bundles_to_db

            initdb()
            sync_dag_bundles_to_db()  # as the DAG processor would (and 3.0's dag.test() needs for assets)
            partial = SHARED / f"airflow.db.{os.getpid()}.partial"
            _copy_sqlite(AIRFLOW_HOME / "airflow.db", partial)
            partial.replace(template)
    configure_dag_test_logging()
    check_param_schemas_once()
    _build_the_in_process_execution_api_once()
    return AIRFLOW_HOME


def _build_the_in_process_execution_api_once() -> None:
    """Airflow 3.0's dag.test() builds a new in-process Execution API app for every task (about 1 s each); later
    releases build it once (``functools.lru_cache`` on ``in_process_api_server``). Do the same on 3.0."""
    from airflow.sdk.execution_time import supervisor

    if not hasattr(supervisor.in_process_api_server, "cache_info"):
        supervisor.in_process_api_server = functools.lru_cache(maxsize=1)(supervisor.in_process_api_server)


@pytest.fixture(scope="session")
def dagbag(airflow_db):
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert not bag.import_errors, bag.import_errors
    return bag


@contextlib.contextmanager
def _shared_setup_lock():
    import fcntl

    with (SHARED / "setup.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _copy_sqlite(source: Path, target: Path) -> None:
    """Copy a SQLite DB page by page (consistent even while another connection has it open)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


@pytest.fixture
def active_sim(request):
    """The simulator the test asked for (``brev_sim_both`` when parametrized over profiles, else ``brev_sim``)."""
    return request.getfixturevalue("brev_sim_both" if "brev_sim_both" in request.fixturenames else "brev_sim")


@pytest.fixture
def run_dag(dagbag, active_sim, monkeypatch):
    """Run a DAG from the dags folder with ``dag.test()`` against the simulator; return the DagRun.

    By default the run has no logical date (``logical_date=None``), like every manual run Airflow 3 creates from
    the UI, the CLI or the REST API: ``{{ ds }}`` and friends are undefined in it. ``dag.test()`` without a
    ``logical_date`` argument would instead use the current time (Airflow 3.0.6 and 3.3 alike), which hides
    templates that only work on scheduled runs. Pass ``logical_date=`` (and ``run_after=``) to run a specific,
    repeatable run (e.g. to re-run the same DagRun). With ``logical_date=None``, ``dag.test()`` clears the task
    instances of all earlier runs of that DAG before it starts (its clear has no date bounds): read an earlier
    run's task states before running the same DAG again.

    The ``brev_default`` connection points at the simulator with a valid token unless the test already set
    ``AIRFLOW_CONN_BREV_DEFAULT``.
    """

    def _run(dag_id: str, *, conf: dict | None = None, connection: str | None = None, **test_kwargs):
        monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", connection or active_sim.connection_json())
        dag = dagbag.get_dag(dag_id)
        assert dag is not None, f"no DAG {dag_id}"
        dag = copy.deepcopy(dag)  # dag.test(run_conf=...) would otherwise leak params into later tests
        for task in dag.tasks:  # a deep copy shares each task's params (BaseOperator's shallow-copy attrs), and
            task.params = copy.deepcopy(task.params)  # 3.0's dag.test() writes the run's conf into them
        test_kwargs.setdefault("logical_date", None)
        with bundles_already_parsed():
            return dag.test(run_conf=conf, **test_kwargs)

    return _run


# --- log capture ---------------------------------------------------------------------------------
# Airflow renders task logs with structlog into a stream bound when logging is configured, which under
# pytest is some earlier test's captured stdout. Every structlog configuration made in this process gets its
# final renderer wrapped so that the ``task_logs`` fixture sees every rendered line, whatever the stream.
import structlog  # noqa: E402

_ACTIVE_CAPTURES: list[list[str]] = []
_original_configure = structlog.configure


def _plain_exceptions(renderer) -> None:
    """Airflow 3.0's console renderer draws exceptions with rich at the terminal width (80 columns under pytest),
    wrapping messages mid-sentence (and printing locals); render them as plain tracebacks, as Airflow 3.1+ does."""
    if isinstance(getattr(renderer, "exception_formatter", None), structlog.dev.RichTracebackFormatter):
        renderer.exception_formatter = structlog.dev.plain_traceback


def _dispatching(renderer):
    if getattr(renderer, "_brev_capture", False):
        return renderer
    _plain_exceptions(renderer)

    def capture(logger, method_name, event_dict):
        rendered = renderer(logger, method_name, event_dict)
        if _ACTIVE_CAPTURES:
            text = rendered if isinstance(rendered, str) else bytes(rendered).decode("utf-8", "replace")
            for lines in _ACTIVE_CAPTURES:
                lines.append(text)
        return rendered

    capture._brev_capture = True  # type: ignore[attr-defined]
    return capture


def _configure(*args, **kwargs):
    processors = kwargs.get("processors")
    if processors:
        kwargs["processors"] = [*processors[:-1], _dispatching(processors[-1])]
    return _original_configure(*args, **kwargs)


structlog.configure = _configure


class LogCapture:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def as_read(self) -> str:
        """The text with whitespace folded and rich's box drawing (│ ╭ ─) removed: a sentence reads the same however
        a console renderer wrapped it."""
        return " ".join(re.sub("[\u2500-\u257f]", " ", self.text).split())


class _StdlibCapture(logging.Handler):
    """Airflow 3.0 logs tasks, hooks and triggers through stdlib ``logging`` (3.1+ through structlog)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("[%(asctime)s] {%(filename)s:%(lineno)d} %(levelname)s - %(message)s"))
        # Mask exactly like Airflow's own handlers do (their "mask_secrets" filter).
        from airflow.sdk.execution_time.secrets_masker import _secrets_masker

        self.addFilter(_secrets_masker())

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        for lines in _ACTIVE_CAPTURES:
            lines.append(text)


@pytest.fixture
def task_logs(airflow_db):
    """Every line Airflow/structlog renders during the test (task logs under dag.test(), hook logs)."""
    processors = structlog.get_config()["processors"]
    if processors:
        processors[-1] = _dispatching(processors[-1])
    handler = _StdlibCapture() if airflow_logs_through_stdlib() else None  # Airflow 3.0
    if handler:
        logging.getLogger().addHandler(handler)
    lines: list[str] = []
    _ACTIVE_CAPTURES.append(lines)
    try:
        yield LogCapture(lines)
    finally:
        _ACTIVE_CAPTURES.remove(lines)
        if handler:
            logging.getLogger().removeHandler(handler)


#: Where a test module sits in the run: the slowest first (long DAG runs with several instances or retries), unit
#: tests last, so that a worker finishing early picks up short tests instead of one long test starting at the end
#: (the run's tail). Modules not listed keep their collection order within their group.
_SLOW_FIRST = (
    "tests/integration/test_simulator_guide.py",  # one test of a minute or more each: started first
    "tests/integration/test_demo.py",
    "tests/integration/chaos/",
    "tests/integration/test_durable_steps.py",
    "tests/integration/test_proof_exec.py",
    "tests/integration/test_ephemeral_kill.py",
    "tests/integration/test_image_pulls.py",
    "tests/integration/test_tao_dags.py",
    "tests/integration/test_warm_reuse.py",
    "tests/integration/test_instance_identity.py",
    "tests/integration/test_tao_preflight.py",
    "tests/integration/",
    "tests/system/",
)


def _run_order(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((rank for rank, prefix in enumerate(_SLOW_FIRST) if path.startswith(prefix)), len(_SLOW_FIRST))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_run_order)  # stable: the order inside a group is pytest's


_SESSION_STARTED: list[float] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    import time

    _SESSION_STARTED.append(time.monotonic())


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """One line at the very end: passed, failed, skipped, wall time and coverage (when measured)."""
    import time

    if hasattr(config, "workerinput"):  # an xdist worker: the controller prints the summary
        return
    stats = terminalreporter.stats
    count = {
        kind: len([r for r in stats.get(kind, []) if getattr(r, "when", "call") in ("call", "setup")])
        for kind in ("passed", "failed", "error", "skipped")
    }
    minutes, seconds = divmod(int(time.monotonic() - _SESSION_STARTED[0]), 60) if _SESSION_STARTED else (0, 0)
    cov_total = getattr(config.pluginmanager.getplugin("_cov"), "cov_total", None)
    coverage = f", coverage {cov_total:.1f} %" if isinstance(cov_total, float) else ""
    terminalreporter.write_line(
        f"Suite summary: {count['passed']} passed, {count['failed'] + count['error']} failed, "
        f"{count['skipped']} skipped in {minutes} min {seconds:02d} s{coverage}"
    )
