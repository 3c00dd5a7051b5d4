"""The system-test block of the example DAGs: this project's equivalent of Airflow's
``tests_common.test_utils.system_tests`` (the project has no ``tests_common`` package).

As in Airflow's providers, every example in ``dags_examples/`` ends, after its last ``# [END ...]`` marker, with::

    try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
        from system.system_tests import get_test_run
    except ImportError:
        pass
    else:
        test_run = get_test_run(dag)

Airflow's examples import ``tests_common`` unguarded: they live in its test tree only. These examples are also the
documentation's snippets and the DAGs of ``make demo`` and ``make airflow``, so the import is guarded: ``system``
(this folder, a namespace package of ``tests/``) is importable only where the test suite put ``tests/`` on
``sys.path``. Everywhere else (a deployment, the demo) the file is the DAG alone: parsing it imports nothing of the
tests, and ``test_run`` is no task, so the DAG is the same either way.

``tests/integration/test_examples.py`` runs every example through its ``test_run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


def get_test_run(dag: Any, **test_kwargs: Any) -> Callable[[Callable[..., Any]], None]:
    """The example's test, as Airflow's ``get_test_run``: ``test_run(run_example)`` runs ``dag`` and asserts that
    the run succeeded.

    Airflow's ``test_run`` takes no argument: its system tests run against the cloud their environment names. An
    example here runs against the bundled simulator, local S3 and a fake Lepton workspace, which the caller sets
    up: ``run_example(dag, **test_kwargs)`` runs ``dag`` as a user triggers it (``dag.test()`` with the run conf
    the DAG needs) and returns its DagRun.

    :param dag: the example's DAG.
    :param test_kwargs: passed on to ``run_example`` (and from there to ``dag.test()``).
    """
    from airflow.utils.state import DagRunState

    def test_run(run_example: Callable[..., Any]) -> None:
        dag_run = run_example(dag, **test_kwargs)
        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
        assert dag_run.state == DagRunState.SUCCESS, f"The system test {dag.dag_id} failed: {states}"

    return test_run
