"""Fixtures of the system tests (tests/system/): the target (simulator or real Brev), the instance, the DAG runs.

By default the target is the bundled simulator; with ``BREV_SYSTEM_TEST=real`` (``make system-test``) it is real
Brev and no simulator fixture is ever requested (so no fake ``brev`` lands on PATH). See system_support.py.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import add_dag_files, bundles_already_parsed

from system.system_support import (
    REAL,
    SystemInstance,
    SystemTarget,
    SystemTargetUnavailable,
    cheapest_offer,
    provision,
    real_target,
    simulator_target,
)

if TYPE_CHECKING:
    from collections.abc import Callable

# tests/conftest.py copied dags_examples/ and tests/integration/dags/ into the dags folder at import; add the system DAGs
# before any test builds the (session-wide) DagBag.
add_dag_files(Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]), (Path(__file__).parent / "dags").glob("*.py"))

#: fixtures that put the simulator's fake ``brev`` on PATH: real mode must never request them
SIMULATOR_FIXTURES = frozenset({"brev_sim", "brev_sim_both", "active_sim", "run_dag"})


@pytest.fixture
def announce(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Print a line on the terminal at once, whatever the output capture (the cost must be seen before it runs)."""
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")

    def _say(line: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if reporter is None:
                print(line, file=sys.stderr, flush=True)
                return
            reporter.ensure_newline()
            reporter.write_line(line, yellow=True, bold=True)

    return _say


@pytest.fixture
def system_target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> SystemTarget:
    """The simulator (default) or real Brev (``BREV_SYSTEM_TEST=real``; skipped without credentials)."""
    if REAL:
        requested = SIMULATOR_FIXTURES & set(request.fixturenames)
        assert not requested, f"real-mode system tests must not use the simulator fixtures {sorted(requested)}"
        assert "FAKE_BREV_STATE" not in os.environ, "real mode with the simulator's state variable set"
        try:
            return real_target(os.environ)
        except SystemTargetUnavailable as reason:
            pytest.skip(str(reason))
    target = simulator_target(request.getfixturevalue("brev_sim"))
    assert target.connection is not None
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", target.connection)
    return target


@pytest.fixture
def system_instance(system_target: SystemTarget, announce: Callable[[str], None]) -> Callable[..., Any]:
    """``with system_instance("case") as inst:`` -- cheapest type, cost printed, deleted afterwards in any case.

    In real mode, no affordable matching type skips the test (loudly); against the simulator it is an error.
    """

    def _provision(case: str) -> contextlib.AbstractContextManager[SystemInstance]:
        try:
            offer = cheapest_offer(system_target.hook(), system_target.gpu_filter)
        except SystemTargetUnavailable as reason:
            if REAL:
                pytest.skip(str(reason))
            raise
        return provision(system_target, case, announce=announce, offer=offer)

    return _provision


@pytest.fixture
def run_system_dag(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run a system DAG with ``dag.test()`` (no logical date, like a manual run); return the DagRun.

    Unlike ``run_dag`` (tests/conftest.py) it leaves ``brev_default`` as the target set it, and builds the DagBag
    only when a DAG runs, so a skipped real-mode test costs no metadata DB.
    """

    def _run(dag_id: str, *, conf: dict[str, Any], **test_kwargs: Any) -> Any:
        dag = request.getfixturevalue("dagbag").get_dag(dag_id)
        assert dag is not None, f"no DAG {dag_id}"
        test_kwargs.setdefault("logical_date", None)
        with bundles_already_parsed():
            return copy.deepcopy(dag).test(run_conf=conf, **test_kwargs)

    return _run
