"""The costs in the task memory (airflow_provider_brev/cost/ledger.py), told and read by real tasks of a real DAG run
(tests/integration/dags/task_memory_cases.py): a step's clock and cost, a mapped step's costs, a delete task's lifetime."""

from __future__ import annotations

import pytest
from helpers import succeeded, xcom_of

from airflow_provider_brev.core.cost import lifetime_cost, step_cost


def cost(dollars: float) -> dict:
    return step_cost(
        instance_name="box", instance_type="g6e.xlarge", price_per_hour=dollars * 3600, phases={"work": 1.0}
    )


LIFETIME = lifetime_cost(
    instance_name="box", instance_type="g6e.xlarge", price_per_hour=3.6, created_at=0.0, ended_at=100.0
)


@pytest.fixture
def dag_run(run_dag):
    return succeeded(run_dag("memory_cost_ledger"))


def test_the_clock_and_the_cost_are_told(dag_run):
    found = xcom_of(dag_run, "step")
    clock = {"started_at": 1.0, "seconds": {"pull": 2.0}, "open": {}, "instance": {}}
    assert found == {"before": None, "clock": clock}
    assert xcom_of(dag_run, "step", "brev_cost_clock") == clock
    assert xcom_of(dag_run, "step", "brev_cost") == cost(1.0)
    assert xcom_of(dag_run, "delete", "brev_lifetime_cost") == LIFETIME


def test_a_later_task_reads_every_cost_and_lifetime_of_the_run(dag_run):
    found = xcom_of(dag_run, "report")
    assert found["costs"] == [["step", cost(1.0)], ["mapped_step", cost(2.0)], ["mapped_step", cost(3.0)]]
    assert found["lifetimes"] == [["delete", LIFETIME]]
