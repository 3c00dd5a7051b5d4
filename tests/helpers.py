"""Small helpers shared by the DAG-level tests (importing it has no side effects: child worker scripts import it)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.testing.evidence import (
    adds_up_to_the_bill as adds_up_to_the_bill,  # the tests import both from here
)
from airflow_provider_brev.testing.evidence import cli_calls

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from datetime import datetime


BUNDLES_ENV = "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"


def add_dag_files(dags_folder: Path, files: Iterable[Path]) -> None:
    """Copy DAG files into ``dags_folder``, each into a folder of its own that is its own DAG bundle.

    Airflow 3.3's ``dag.test()`` parses and serialises the *whole* bundle that holds the DAG on every call
    (apache/airflow#64884, so that sibling DAGs exist in the DB); with every test DAG in one folder, each run paid
    for parsing all of them. One bundle per file makes a run parse its own file only, as a DAG processor would.
    """
    bundles = json.loads(os.environ.get(BUNDLES_ENV) or "[]")
    for path in files:
        if path.name.startswith("_"):  # a package's __init__.py holds no DAG
            continue
        folder = dags_folder / path.stem
        folder.mkdir(exist_ok=True)
        target, content = folder / path.name, path.read_bytes()
        if not target.exists() or target.read_bytes() != content:  # processes of one run share the folder
            partial = folder / f".{path.name}.{os.getpid()}.partial"
            partial.write_bytes(content)
            os.replace(partial, target)
        if all(bundle["name"] != path.stem for bundle in bundles):
            bundles.append(
                {
                    "name": path.stem,
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(folder)},
                }
            )
    os.environ[BUNDLES_ENV] = json.dumps(bundles)


@contextlib.contextmanager
def bundles_already_parsed() -> Iterator[None]:
    """Within this block, ``dag.test()`` trusts the DAGs the session wrote to the metadata DB once
    (tests/conftest.py ``_sync_every_bundle_to_db``), as a scheduler trusts its DAG processor.

    Airflow 3.3's ``dag.test()`` re-parses and re-serialises its DAG's whole bundle on every call
    (apache/airflow#64884), so that sibling DAGs exist in the DB: for a file of 35 DAGs with 130 params that was 55 %
    of a run's CPU (every Param's JSON schema checked again). Every DAG file here is already parsed and
    serialised, unchanged, so the re-parse is skipped; the run still serialises and deserialises its own DAG, and
    its tasks run as before. Releases without the re-parse (3.0) are left as they are.
    """
    try:
        from airflow.dag_processing import dagbag
    except ImportError:  # pragma: no cover - every supported release has the module
        yield
        return
    if not hasattr(dagbag, "BundleDagBag") or not hasattr(dagbag, "sync_bag_to_db"):
        yield
        return

    class _ParsedBundle:
        def __init__(self, **_: object) -> None:
            pass

    def _already_synced(*_: object, **__: object) -> None:
        return None

    saved = dagbag.BundleDagBag, dagbag.sync_bag_to_db
    dagbag.BundleDagBag, dagbag.sync_bag_to_db = _ParsedBundle, _already_synced  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        dagbag.BundleDagBag, dagbag.sync_bag_to_db = saved


def check_param_schemas_once() -> None:
    """Check each Param's JSON schema against its meta-schema once per process, not on every validation.

    ``jsonschema.validate`` checks the *schema* before it validates the value, and Airflow validates every Param of
    a DAG several times per ``dag.test()`` (parse, serialise, run): a quarter of a short run's CPU went to checking
    the same unchanging schemas again. Values are still validated every time, with the same validator and the same
    errors; an invalid schema still raises ``SchemaError`` (it is never remembered).
    """
    import jsonschema
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    if getattr(jsonschema.validate, "_schemas_checked_once", False):
        return
    original = jsonschema.validate
    checked: set[str] = set()

    def validate(instance: Any, schema: Any, cls: Any = None, *args: Any, **kwargs: Any) -> None:
        key = json.dumps(schema, sort_keys=True, default=repr)
        if key not in checked:
            (cls or validator_for(schema)).check_schema(schema)
            checked.add(key)
        validator = (cls or validator_for(schema))(schema, *args, **kwargs)
        error = best_match(validator.iter_errors(instance))
        if error is not None:
            raise error

    validate._schemas_checked_once = True  # type: ignore[attr-defined]
    validate.__wrapped__ = original  # type: ignore[attr-defined]
    jsonschema.validate = validate


def dag_file_path(dags_folder: Path | str, file_name: str) -> Path:
    """Where :func:`add_dag_files` put ``file_name``."""
    return Path(dags_folder) / Path(file_name).stem / file_name


def task_states(dag_run) -> dict[str, str]:
    """``{task_id: state}`` of a finished DagRun (``dag.test()`` does not raise when tasks fail)."""
    states = {}
    for ti in dag_run.get_task_instances():
        state = ti.state
        states[ti.task_id] = getattr(state, "value", state)
    return states


def run_state(dag_run) -> str:
    return getattr(dag_run.state, "value", dag_run.state)


def deleted_names(sim) -> list[str]:
    """The instances ``brev delete`` was called for, by name (the provider deletes by id), in call order."""
    return [
        sim.name_of(target) or target
        for call in cli_calls(sim, "delete")
        for target in call["argv"][1:]
        if not target.startswith("-")
    ]


def wait_for_no_instances(sim, timeout: float = 20.0) -> None:
    """Wait until the simulator has no instance left (``brev delete`` is asynchronous: DELETING, then gone): every
    deletion finishes (:meth:`~airflow_provider_brev.testing.simulator.BrevSimulator.wait_for_deletions`), then
    nothing may be left."""
    sim.wait_for_deletions(timeout)
    assert sim.instances() == [], sim.instances()


def until_status(sim, name: str, wanted: str | None) -> None:
    """Move the simulated clock on until instance ``name`` has status ``wanted`` (``None``: gone); no wall-clock
    wait."""
    for _ in range(400):
        inst = sim.instance(name)
        if (None if inst is None else inst["status"]) == wanted:
            return
        sim.advance(0.2)
    raise AssertionError(f"{name} never reached {wanted}: {sim.instance(name)}")


def delete_kept_instance(sim, name: str) -> None:
    """The test's own cleanup of an instance a run kept stopped for warm reuse (what the janitor does once its
    ``max_idle`` passed): once STOPPED, ``brev delete`` by its id, then the simulated clock on until it is gone."""
    until_status(sim, name, "STOPPED")
    instance_id = sim.instance(name)["id"]
    done = subprocess.run(["brev", "delete", instance_id], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    until_status(sim, name, None)


def assert_no_process_left(sim, timeout: float = 10.0) -> None:
    """Nothing the provider or the CLI started is still running: no ``ssh-agent`` (the released CLI starts one per
    ``ssh`` unless ``SSH_AUTH_SOCK`` is set), no ``brev`` or ``ssh``, no command in a sandbox. A process still exiting
    gets ``timeout`` seconds; an agent never ends by itself."""
    deadline = time.monotonic() + timeout
    while (pids := sim.processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            left[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    started = len(sim.agents())
    assert not left, f"{len(sim.agent_pids())} of {started} ssh-agents and these processes are still running: {left}"


#: The warm-reuse Variables (airflow_provider_brev/core/instances/warm_pool_records.py), spelled out: a test reads and
#: writes them as an operator editing Variables would.
WARM_RECORD_PREFIX = "brev_warm_instance."
WARM_AWAKE_PREFIX = "brev_warm_awake."
WARM_LEGACY_VARIABLE = "brev_warm_instances"


def run_kept(run_dag: Callable[..., Any], dag_id: str, conf: dict[str, Any]) -> Any:
    """``run_dag`` with a logical date of its own, so a later run does not delete it: ``dag.test()`` deletes the
    earlier runs of its logical date (every manual run's is None), and with them their XCom -- which proves which
    task created an instance kept for warm reuse. A deployment keeps its runs."""
    from datetime import UTC, datetime

    when = datetime.now(UTC)
    return run_dag(dag_id, conf=conf, logical_date=when, run_after=when)


def warm_variable_keys(prefix: str) -> list[str]:
    """The keys of the Variables starting with ``prefix``, from the metadata database."""
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return sorted(session.scalars(select(Variable.key).where(Variable.key.startswith(prefix, autoescape=True))))


def warm_records() -> dict[str, list[Any]]:
    """Every warm-reuse record in the metadata database (one Variable per instance), by reuse key."""
    from airflow.models.variable import Variable

    from airflow_provider_brev.core.instances.warm_pool import ReuseEntry

    records: dict[str, list[Any]] = {}
    for key in warm_variable_keys(WARM_RECORD_PREFIX):
        entry = ReuseEntry.from_dict(Variable.get(key, default_var=None, deserialize_json=True))
        if entry is not None:
            records.setdefault(entry.key, []).append(entry)
    return records


def write_warm_record(record: dict[str, Any], *, legacy: bool = False) -> None:
    """Write ``record`` (a stored record's JSON) as its instance's record, as an operator editing Variables would;
    with ``legacy``, into the single Variable of earlier releases too (``{key: [record, ...]}``)."""
    from airflow.models.variable import Variable

    Variable.set(WARM_RECORD_PREFIX + record["id"], record, description="written by a test", serialize_json=True)
    if legacy:
        stored = Variable.get(WARM_LEGACY_VARIABLE, default_var=None, deserialize_json=True) or {}
        stored.setdefault(record["key"], []).append(record)
        Variable.set(WARM_LEGACY_VARIABLE, stored, serialize_json=True)


def clear_warm_records() -> None:
    """Delete every warm-reuse Variable (records, sightings, the single Variable of earlier releases)."""
    from airflow.models.variable import Variable

    for key in [*warm_variable_keys(WARM_RECORD_PREFIX), *warm_variable_keys(WARM_AWAKE_PREFIX), WARM_LEGACY_VARIABLE]:
        Variable.delete(key)


def airflow_logs_through_stdlib() -> bool:
    """Airflow 3.0 logs tasks, hooks and triggers through stdlib ``logging``; 3.1+ through structlog."""
    from airflow.sdk import BaseOperator

    return isinstance(BaseOperator(task_id="log_probe").log, logging.Logger)


def configure_dag_test_logging() -> None:
    """Make ``dag.test()`` log like a worker: on Airflow 3.0 it leaves structlog unconfigured, so its in-process
    supervisor prints every debug line unmasked (each ``MaskSecret`` request, i.e. the secret itself). Configure
    Airflow's own processors (secrets masking included) at the configured level. A no-op on Airflow 3.1+, which
    does this itself."""
    if not airflow_logs_through_stdlib():
        return
    import structlog
    from airflow.sdk.log import logging_processors

    processors, _ = logging_processors(enable_pretty_log=True, mask_secrets=True, colored_console_log=False)
    level = logging.getLevelName(os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO").upper())
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=False,
    )


SSH_HELD_SECONDS = 600
#: Simulated seconds a new instance stays DEPLOYING when a test holds it (``set_timings(deploy=...)``): it is RUNNING
#: (or FAILURE) only once the test moves the simulator's clock past them, so what the test waits for cannot be
#: outrun by the boot on a busy machine.
DEPLOY_HELD_SECONDS = 600


def ssh_refused_until_a_try_times_out(sim, task_logs) -> ChaosAgent:
    """Refuse ssh on the next instance (in simulated time) until a readiness wait has timed out, then let sshd answer.

    A fixed refusal of a few seconds against a ``ready_timeout`` a second shorter is a race on a busy machine (the
    create call alone can outlast the refusal, and the first try then succeeds); this holds the refusal until the
    first try has really given up. Use as a context manager around ``run_dag``.
    """
    sim.set_fault("ssh_refused", seconds=SSH_HELD_SECONDS)
    timed_out = lambda: [line for line in task_logs.lines if "was not ready after" in line]  # noqa: E731
    return ChaosAgent(timed_out, lambda _: sim.advance(SSH_HELD_SECONDS + 60), timeout=300)


class ChaosAgent(threading.Thread):
    """Act from the background (inject a fault, open a gate) once ``condition()`` returns something truthy.

    ``action(value)`` gets that value. Use as a context manager around the blocking ``dag.test()``; on exit
    the agent stops waiting (the run may have ended without reaching the condition) and any error it hit is
    re-raised. :attr:`fired` says whether the action ran. ``timeout`` only bounds the wait in the background
    (the run's end stops it anyway): generous, because a loaded machine can take minutes to reach a condition.
    """

    def __init__(self, condition: Callable[[], Any], action: Callable[[Any], None], *, timeout: float = 600.0):
        super().__init__(daemon=True, name="chaos-agent")
        self.condition = condition
        self.action = action
        self.timeout = timeout
        self.fired = False
        self.fired_at: float | None = None  # time.monotonic() when the action ended
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while not self._halt.is_set() and time.monotonic() < deadline:
                value = self.condition()
                if value:
                    self.action(value)
                    self.fired, self.fired_at = True, time.monotonic()
                    return
                self._halt.wait(0.02)
        except BaseException as err:  # surfaced in __exit__
            self.error = err

    def __enter__(self) -> ChaosAgent:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._halt.set()
        self.join(timeout=30)
        if self.error is not None:
            raise self.error


def job_ids_on(sim, name: str) -> list[str]:
    """Ids of the detached jobs whose directories are on instance ``name`` (collected jobs' are removed)."""
    from airflow_provider_brev.core.jobs.remote import DEFAULT_BASE_DIR

    jobs = sim.sandbox(name) / DEFAULT_BASE_DIR
    return sorted(path.name for path in jobs.iterdir()) if jobs.is_dir() else []


class DagWorker:
    """``dag.test()`` of one DAG in a child process: a worker a test can SIGKILL (no ``on_kill``, no teardown).

    The child inherits AIRFLOW_HOME, the metadata DB and the dags folder; ``connection`` becomes its
    ``brev_default``. Use as a context manager: a child still alive on exit is killed.
    """

    def __init__(self, tmp_path: Path, dag_file: str, dag_id: str, conf: dict, when: datetime, connection: str):
        tests_dir = Path(__file__).resolve().parent
        script = tmp_path / f"worker_{dag_id}.py"
        script.write_text(
            textwrap.dedent(
                f"""
                import datetime, os, sys
                sys.path.insert(0, {str(tests_dir)!r})
                from helpers import configure_dag_test_logging
                configure_dag_test_logging()
                from airflow.models import DagBag
                from helpers import bundles_already_parsed, check_param_schemas_once, dag_file_path
                check_param_schemas_once()
                folder = os.environ["AIRFLOW__CORE__DAGS_FOLDER"]
                dag = DagBag(dag_folder=str(dag_file_path(folder, {dag_file!r}))).get_dag({dag_id!r})
                when = datetime.datetime.fromisoformat({when.isoformat()!r})
                with bundles_already_parsed():
                    dag.test(logical_date=when, run_after=when, run_conf={conf!r})
                """
            )
        )
        self.log_path = tmp_path / f"worker_{dag_id}.log"
        env = {**os.environ, "AIRFLOW_CONN_BREV_DEFAULT": connection}
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen([sys.executable, str(script)], env=env, stdout=log, stderr=log)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = 300.0) -> Any:
        """Poll ``predicate`` (bounded) while the child runs; fail at once if it exited first."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the worker exited ({self.process.returncode}) before {what}: {self.log()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; worker log tail: {self.log()[-3000:]}")
            time.sleep(0.05)
        return value

    def sigkill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def __enter__(self) -> DagWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def deferrals(task_logs, task_id: str) -> list[str]:
    """The log lines with which Airflow's task runner deferred ``task_id`` ("Pausing task as DEFERRED.")."""
    return [
        line for line in task_logs.lines if "Pausing task as DEFERRED" in line and f"task_id={task_id} " in f"{line} "
    ]


# --- the metadata database, outside any task ---------------------------------------------------------------------
# Fixtures and checks that stand where `airflow connections` and the UI stand: they write the metadata database
# itself, with its own model (``airflow.models.connection``), as Airflow's CLI does. ``airflow.sdk.Connection`` is
# the task's view and works only inside a running task.
def metadata_connections(conn_id: str) -> int:
    """How many connections named ``conn_id`` the metadata database holds."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(Connection).filter_by(conn_id=conn_id).count()


@contextlib.contextmanager
def connection_in_metadata_db(conn_id: str, **fields: Any) -> Iterator[str]:
    """Connection ``conn_id`` stored in the metadata database (not the environment), as ``airflow connections add``
    stores it, for the block; removed afterwards. ``fields``: the model's (``conn_type``, ``password``, ``extra``)."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    with create_session() as session:
        session.add(Connection(conn_id=conn_id, **fields))
    try:
        yield conn_id
    finally:
        with create_session() as session:
            session.query(Connection).filter_by(conn_id=conn_id).delete()


def provider_operator_classes() -> list[type]:
    """Every operator class the provider defines (its operators, sensors and transfers, bases included), found by
    walking the packages rather than listed, so a new one is checked without anyone adding it."""
    import importlib
    import inspect
    import pkgutil

    from airflow_provider_brev._compat import BaseOperator

    found = []
    for kind in ("operators", "sensors", "transfers"):
        package = importlib.import_module(f"airflow_provider_brev.{kind}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found += [
                obj
                for obj in vars(module).values()
                if inspect.isclass(obj) and obj.__module__ == module.__name__ and issubclass(obj, BaseOperator)
            ]
    return sorted(found, key=lambda cls: cls.__name__)


def xcom_of(dag_run, task_id: str, key: str = "return_value") -> Any:
    """What ``task_id`` pushed under ``key`` in the finished ``dag_run`` (read from the metadata DB)."""
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id and ti.map_index in (-1, 0))
    return ti.xcom_pull(task_ids=task_id, key=key)


def succeeded(dag_run) -> Any:
    """``dag_run``, which must have succeeded (else the task states say which task failed)."""
    assert run_state(dag_run) == "success", task_states(dag_run)
    return dag_run


def the_page_reads_the_bill(dag_run: Any) -> dict[str, Any]:
    """The Brev page's cost history reads the run's report from the metadata database as the page does
    (``ui/sources.py``, then ``core/ui/history.py``) and shows what the report says: its total, its seconds and
    dollars per phase (``resume``, ``uncovered``, a stopped disk's time included), nothing left over as ``other``,
    the same unpriced rows. Returns the report as the page read it."""
    import pytest

    from airflow_provider_brev.core.bill import TABLE_PHASES, XCOM_RUN_COST
    from airflow_provider_brev.core.ui.history import OTHER, history
    from airflow_provider_brev.ui.sources import read_facts

    facts = read_facts({dag_run.dag_id}, live=None, live_note="")
    [report] = [p.value for p in facts.pushed if p.run_id == dag_run.run_id and p.key == XCOM_RUN_COST]
    [dag] = history(facts, {dag_run.dag_id})
    [bill] = [run for run in dag.runs if run.run_id == dag_run.run_id]
    assert bill.report is not None, bill  # read from the report, not added up from the tasks' own costs
    assert bill.total_dollars == round(report["total_dollars"], 6), (bill, report["table"])
    assert bill.total_seconds == round(report["total_seconds"], 3), (bill, report["table"])
    assert OTHER not in bill.dollars, (bill, report["table"])  # the rows' dollars account for the bill
    assert set(bill.seconds) <= set(TABLE_PHASES), bill
    shown = {phase: seconds for phase, seconds in report["seconds"].items() if seconds > 0}
    assert bill.seconds == pytest.approx(shown, abs=0.002), (bill, report["table"])
    for phase in bill.dollars:  # a phase's dollars are the rows' dollars in it
        rows = [row["dollars"][phase] for row in report["tasks"] if row["dollars"].get(phase) is not None]
        assert bill.dollars[phase] == pytest.approx(sum(rows), abs=1e-6), (phase, bill)
    assert bill.unpriced == tuple(report["unpriced"]), bill
    return report
