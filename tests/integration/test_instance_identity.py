"""An instance is known by its id: an instance someone else created under a freed name is never used or deleted.

Real ``dag.test()`` runs (tests/integration/dags/brev_identity_cases.py) against the simulator: the DAG's ``shared-gpu``
vanishes outside Airflow and someone creates another instance of that name at once
(``BrevSimulator.replace_instance``). The step must fail with the typed error instead of running on, recovering onto
or re-creating over their instance, and the teardown must leave it. The pure rules:
tests/unit/core/instances/test_identity.py.
"""

from __future__ import annotations

import pytest
from helpers import ChaosAgent, cli_calls, task_states

NAME = "shared-gpu"
EXPIRED = "afbrev-expired-0123abcd-x202601010000"  # EXPIRED_NAME in tests/integration/dags/brev_identity_cases.py


def job_started(sim, task_logs) -> bool:
    instance = sim.instance(NAME)
    return bool(instance and (sim.sandbox(NAME) / "counter").exists() and "Launched job" in task_logs.text)


def assert_theirs_untouched(sim, theirs: dict, task_logs) -> None:
    """Their instance is still there under its own id, nothing of the DAG ran on it, nothing deleted it."""
    now = sim.instance(NAME)
    assert now is not None and now["id"] == theirs["id"] and now["status"] == "RUNNING"
    assert not (sim.sandbox(NAME) / "counter").exists()  # the step's command never ran on it
    on_theirs = [run["command"] for run in sim.runs(theirs["id"])]
    assert not [c for c in on_theirs if "BREV_JOB_LAUNCHED" in c or "echo started" in c], on_theirs
    deletes = [call["argv"][1:] for call in cli_calls(sim, "delete")]
    assert not [args for args in deletes if theirs["id"] in args or NAME in args], deletes
    assert "BrevInstanceReplacedError" in task_logs.text
    assert f"Instance '{NAME}' is now id {theirs['id']}" in task_logs.text


@pytest.mark.parametrize("mode", ["sync", "deferrable"])
def test_a_name_taken_after_loss_mid_job_is_neither_used_nor_deleted(run_dag, brev_sim_both, task_logs, mode):
    sim = brev_sim_both
    replaced: list[dict] = []
    with ChaosAgent(
        lambda: job_started(sim, task_logs), lambda _: replaced.append(sim.replace_instance(NAME))
    ) as agent:
        dag_run = run_dag(f"identity_replaced_mid_job_{mode}")
    assert agent.fired
    (theirs,) = replaced
    states = task_states(dag_run)
    assert states["run"] == "failed", states
    assert states["delete"] == "success", states  # the teardown ran ... and left their instance
    assert_theirs_untouched(sim, theirs, task_logs)
    assert len(cli_calls(sim, "create")) == 1  # no recovery re-created anything over their name
    teardown = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "delete")
    assert teardown.xcom_pull(task_ids="delete") == {"instance_name": NAME, "deleted": False}


def test_a_name_taken_before_the_step_is_never_used(run_dag, brev_sim, task_logs):
    dag_run = run_dag("identity_replaced_before_the_step")
    states = task_states(dag_run)
    assert states["run"] == "failed", states
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 1  # a typed error: no retry is spent on it
    theirs = brev_sim.instance(NAME)
    assert theirs is not None
    assert (
        theirs["id"]
        != next(ti for ti in dag_run.get_task_instances() if ti.task_id == "create").xcom_pull(
            task_ids="create", key="brev_instance"
        )["id"]
    )
    assert_theirs_untouched(brev_sim, theirs, task_logs)
    assert "Nothing was run." in task_logs.text


def test_an_expired_instance_the_janitor_deleted_is_not_recreated(run_dag, brev_sim, task_logs):
    """The instance's managed name says it expired; the janitor (here: a plain ``brev delete``, what it runs)
    deletes it mid-job. Recovery must not bring it back under its already-expired name (each sweep would delete it
    again and the step would start over, up to max_instance_recoveries + 1 full runs)."""
    from airflow_provider_brev.hooks.brev import BrevHook

    name = EXPIRED
    with ChaosAgent(
        lambda: brev_sim.instance(name) and (brev_sim.sandbox(name) / "counter").exists(),
        lambda _: BrevHook().delete_instance(name),
    ) as agent:
        dag_run = run_dag("identity_expired_instance_lost")
    assert agent.fired
    assert task_states(dag_run)["run"] == "failed"
    assert "expired at 2026-01-01 00:00 UTC (max_lifetime)" in task_logs.text
    assert "BrevInstanceLostError" in task_logs.text
    assert len(cli_calls(brev_sim, "create")) == 1  # not re-created
    assert "re-creating it under the same name" not in task_logs.text
