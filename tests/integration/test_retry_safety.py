"""A retry never pays twice: it collects an earlier try's job that succeeded, whatever Airflow lost in between.

Real ``dag.test()`` runs (tests/integration/dags/brev_retry_cases.py) against the simulator. The pure rules are in
tests/unit/core/jobs/test_attempts.py.
"""

from __future__ import annotations

import pytest
from helpers import cli_calls, run_state, task_states, wait_for_no_instances

COLLECTED = "collecting its result instead of running the command again"


def counter(sim) -> str:
    (instance,) = {call["argv"][1] for call in cli_calls(sim, "create")}
    path = sim.sandbox(instance) / "counter"
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("mode", ["sync", "deferrable"])
def test_a_retry_after_the_job_succeeded_collects_it_instead_of_running_it_again(run_dag, brev_sim, task_logs, mode):
    dag_run = run_dag(f"retry_after_success_{mode}")
    assert run_state(dag_run) == "success", task_states(dag_run)
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 2  # try 1 failed after its job succeeded
    assert "try 1 fails after its job succeeded" in task_logs.text
    assert counter(brev_sim) == "ran\n"  # the command ran once
    result = run_ti.xcom_pull(task_ids="run")
    assert result["last_line"] == "the-work-is-done"
    assert result["job_id"].endswith("-t1")  # try 2's result is try 1's job
    warnings = [line for line in task_logs.lines if COLLECTED in line]
    assert len(warnings) == 1 and "warn" in warnings[0].lower(), warnings
    assert "Launched job" in task_logs.text and task_logs.text.count("Launched job") == 1
    wait_for_no_instances(brev_sim)
