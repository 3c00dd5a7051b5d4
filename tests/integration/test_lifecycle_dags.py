"""Issue: instance lifecycle as Airflow tasks, proven inside real dag.test() runs against the simulator."""

from __future__ import annotations

import json
import time
from datetime import UTC

import pytest
from helpers import (
    DEPLOY_HELD_SECONDS,
    ChaosAgent,
    cli_calls,
    deferrals,
    run_state,
    ssh_refused_until_a_try_times_out,
    task_states,
    wait_for_no_instances,
)

from airflow_provider_brev.triggers.brev import BrevInstanceReadyTrigger


def creates(sim):
    return cli_calls(sim, "create")


def test_example_lifecycle_dag_succeeds_and_leaves_nothing(run_dag, brev_sim_both):
    dag_run = run_dag("example_brev_lifecycle")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert task_states(dag_run) == {
        "create_instance": "success",
        "wait_until_ready": "success",
        "nvidia_smi": "success",
        "delete_instance": "success",
        "cost_report": "success",
    }
    assert len(creates(brev_sim_both)) == 1
    wait_for_no_instances(brev_sim_both)


def test_failing_work_task_still_tears_down(run_dag, brev_sim):
    dag_run = run_dag("brev_case_failing_work")
    states = task_states(dag_run)
    assert run_state(dag_run) == "failed"
    assert states["work"] == "failed"
    assert states["delete"] == "success"
    wait_for_no_instances(brev_sim)


def test_boot_failure_in_create_deletes_its_instance(run_dag, brev_sim_both):
    brev_sim_both.set_fault("boot_failure", message="host lost")
    dag_run = run_dag("brev_case_create_waits")
    states = task_states(dag_run)
    assert run_state(dag_run) == "failed"
    assert states["create"] == "failed"
    assert states["delete"] == "upstream_failed"  # a failed setup gets no teardown...
    assert len(creates(brev_sim_both)) == 1
    wait_for_no_instances(brev_sim_both)  # ...so create cleaned up after itself


def test_readiness_timeout_in_create_deletes_its_instance(run_dag, brev_sim):
    brev_sim.set_fault("ssh_refused", seconds=120)
    dag_run = run_dag("brev_case_create_waits", conf={"ready_timeout": 2})
    assert task_states(dag_run)["create"] == "failed"
    wait_for_no_instances(brev_sim)


def deployed_once_deferred(sim, task_logs, task_id: str) -> ChaosAgent:
    """Keep new instances DEPLOYING (in simulated time) until ``task_id`` deferred, then let them finish."""
    sim.set_timings(deploy_seconds=DEPLOY_HELD_SECONDS)
    return ChaosAgent(
        lambda: deferrals(task_logs, task_id), lambda _: sim.advance(DEPLOY_HELD_SECONDS + 60), timeout=300
    )


def test_create_waits_deferrable(run_dag, brev_sim_both, task_logs):
    with deployed_once_deferred(brev_sim_both, task_logs, "create") as agent:
        dag_run = run_dag("brev_case_create_deferrable")
    assert agent.fired  # the instance became ready only after the task deferred...
    assert len(deferrals(task_logs, "create")) == 1
    assert run_state(dag_run) == "success", task_states(dag_run)  # ...so the trigger saw it ready
    assert len(creates(brev_sim_both)) == 1
    wait_for_no_instances(brev_sim_both)


def test_clearing_create_adopts_instead_of_creating_twice(run_dag, brev_sim):
    from datetime import datetime

    when = datetime(2026, 3, 1, tzinfo=UTC)
    first = run_dag("brev_case_create_only", logical_date=when, run_after=when)
    second = run_dag("brev_case_create_only", logical_date=when, run_after=when)  # same run, cleared and re-run
    assert first.run_id == second.run_id
    assert run_state(second) == "success"
    assert len(creates(brev_sim)) == 1
    assert len(brev_sim.instances()) == 1


def test_retry_after_readiness_failure_adopts_the_instance(run_dag, brev_sim, task_logs):
    with ssh_refused_until_a_try_times_out(brev_sim, task_logs) as agent:
        dag_run = run_dag("brev_case_create_retry")
    assert agent.fired
    assert run_state(dag_run) == "success", task_states(dag_run)
    (ti,) = dag_run.get_task_instances()
    assert ti.try_number == 2
    assert len(creates(brev_sim)) == 1


@pytest.mark.parametrize("mode", ["poke", "reschedule"])
def test_ready_sensor_modes(run_dag, brev_sim, mode):
    dag_run = run_dag(f"brev_case_sensor_{mode}")
    assert run_state(dag_run) == "success", task_states(dag_run)
    wait_for_no_instances(brev_sim)


def test_ready_sensor_deferrable_waits_in_the_triggerer(run_dag, brev_sim, task_logs):
    with deployed_once_deferred(brev_sim, task_logs, "ready") as agent:
        dag_run = run_dag("brev_case_sensor_deferrable")
    assert agent.fired  # the instance became ready only after the sensor deferred...
    assert len(deferrals(task_logs, "ready")) == 1
    assert run_state(dag_run) == "success", task_states(dag_run)  # ...so the trigger saw it ready
    wait_for_no_instances(brev_sim)


def test_ready_sensor_fails_fast_on_failure(run_dag, brev_sim, task_logs):
    """The boot fails only once the sensor poked (held in simulated time): on a busy machine the create task's own
    status read could otherwise be the one that sees FAILURE."""
    brev_sim.set_fault("boot_failure", message="no GPU hosts left in zone")
    brev_sim.set_timings(deploy_seconds=DEPLOY_HELD_SECONDS)
    poked = lambda: [line for line in task_logs.lines if "is DEPLOYING." in line]  # noqa: E731
    with ChaosAgent(poked, lambda _: brev_sim.advance(DEPLOY_HELD_SECONDS + 60), timeout=300) as agent:
        dag_run = run_dag("brev_case_sensor_poke")
        failed_at = time.monotonic()
    assert agent.fired
    assert task_states(dag_run)["ready"] == "failed"
    assert failed_at - agent.fired_at < 30  # the sensor's timeout is 60 s: it failed fast
    wait_for_no_instances(brev_sim)


def test_ready_sensor_deferrable_fails_fast_on_failure(run_dag, brev_sim, task_logs):
    brev_sim.set_fault("boot_failure", message="no GPU hosts left in zone")
    with deployed_once_deferred(brev_sim, task_logs, "ready") as agent:
        dag_run = run_dag("brev_case_sensor_deferrable")
    assert agent.fired  # the instance failed only after the sensor deferred...
    assert len(deferrals(task_logs, "ready")) == 1
    assert task_states(dag_run)["ready"] == "failed"  # ...so the trigger reported the failure,
    assert "BrevInstanceFailedError" in task_logs.text  # the instance's failure, not the sensor's 60 s timeout
    assert "is in FAILURE (build CREATE_FAILED" in task_logs.text
    wait_for_no_instances(brev_sim)


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"instance_name": "bad name!", "gpu": "L40S:1"}, "Invalid instance name"),
        ({"gpu": "NOSUCHGPU:1"}, "No Brev instance type offers"),
        ({"gpu": "L40S:1", "instance_types": "g6e.xlarge"}, "either gpu"),
        ({"gpu": "L40S:1", "conn_id": "no_such_connection"}, "is not defined"),
        ({}, "No instance type requested"),  # gpu="" rendered from a template: not a default instance
        ({"gpu": "  "}, "No instance type requested"),
    ],
)
def test_bad_input_fails_before_anything_is_created(run_dag, brev_sim, conf, expected, task_logs):
    conf = {"instance_name": "", "gpu": "", "instance_types": "", "conn_id": "brev_default", **conf}
    dag_run = run_dag("brev_case_bad_input", conf=conf)
    (ti,) = dag_run.get_task_instances()
    assert ti.state == "failed"
    assert ti.try_number == 1  # invalid input is not retried (AirflowFailException)
    assert creates(brev_sim) == []
    assert expected in task_logs.text


def test_ready_trigger_serialisation_round_trips_without_secrets(brev_sim):
    trigger = BrevInstanceReadyTrigger(
        instance_name="x",
        brev_conn_id="brev_default",
        deadline=123.5,
        poll_interval=2,
        delete_on_kill=True,
        created=True,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_brev.triggers.brev.BrevInstanceReadyTrigger"
    assert BrevInstanceReadyTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert set(kwargs) == {
        "instance_name",
        "brev_conn_id",
        "deadline",
        "poll_interval",
        "require_docker",
        "delete_on_kill",
        "created",
        "instance_id",
        "not_before",
    }
    assert brev_sim.valid_token not in json.dumps(kwargs)
