"""Small helpers shared by the DAG-level tests (importing it has no side effects: child worker scripts import it)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
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
        folder = dags_folder / path.stem
        folder.mkdir(exist_ok=True)
        shutil.copy(path, folder / path.name)
        if all(bundle["name"] != path.stem for bundle in bundles):
            bundles.append(
                {
                    "name": path.stem,
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(folder)},
                }
            )
    os.environ[BUNDLES_ENV] = json.dumps(bundles)


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


def cli_calls(sim, command: str) -> list[dict]:
    """Real invocations of ``brev <command>`` from the simulator's call log (``--help`` probes excluded)."""
    return [
        call
        for call in sim.calls()
        if next((a for a in call["argv"] if not a.startswith("-")), None) == command
        and not {"--help", "-h"} & set(call["argv"])
    ]


def deleted_names(sim) -> list[str]:
    """The instances ``brev delete`` was called for, by name (the provider deletes by id), in call order."""
    return [
        sim.name_of(target) or target
        for call in cli_calls(sim, "delete")
        for target in call["argv"][1:]
        if not target.startswith("-")
    ]


def wait_for_no_instances(sim, timeout: float = 20.0) -> None:
    """Wait until the simulator has no instance left (``brev delete`` is asynchronous: DELETING, then gone)."""
    deadline = time.monotonic() + timeout
    while sim.instances():
        assert time.monotonic() < deadline, sim.instances()
        time.sleep(0.05)


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
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while not self._halt.is_set() and time.monotonic() < deadline:
                value = self.condition()
                if value:
                    self.action(value)
                    self.fired = True
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
    from airflow_provider_brev.cli.jobs.remote import DEFAULT_BASE_DIR

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
                from helpers import dag_file_path
                folder = os.environ["AIRFLOW__CORE__DAGS_FOLDER"]
                dag = DagBag(dag_folder=str(dag_file_path(folder, {dag_file!r}))).get_dag({dag_id!r})
                when = datetime.datetime.fromisoformat({when.isoformat()!r})
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
