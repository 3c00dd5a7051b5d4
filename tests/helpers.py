"""Small assertion helpers shared by the DAG-level tests (no side effects: child worker scripts import it too)."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


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
    re-raised. :attr:`fired` says whether the action ran.
    """

    def __init__(self, condition: Callable[[], Any], action: Callable[[Any], None], *, timeout: float = 120.0):
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
