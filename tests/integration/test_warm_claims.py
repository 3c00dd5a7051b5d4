"""A warm start keeps every promise of a create: the GPU and type asked for, the price and run-cost caps, a wait
for an instance still STOPPING instead of a second one, and a kill that releases what it started -- real
``dag.test()`` runs of tests/integration/dags/brev_reuse_cases.py and the flagship against the simulator."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest
from helpers import ChaosAgent, cli_calls, run_kept, run_state, task_states

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset
from integration.chaos.chaos_helpers import wait_until

#: Airflow SIGKILLs a killed task this long after SIGTERM.
KILL_BUDGET = 5.0
NGC_KEY = "ngc-key-" + "5b1d" * 8
DATASET_PREFIX = "datasets/vcn-aoi/"
IMAGES = ("nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services", "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt")
PARAMS = {"key": "k", "type": "g6e.xlarge", "release": "stop", "max_idle": 3600, "bucket": "b", "deferrable": False}


def xcom(dag_run, task_id: str, key: str = "return_value"):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=key)


def status(sim, name: str) -> str | None:
    inst = sim.instance(name)
    return None if inst is None else inst["status"]


def until(sim, name: str, wanted: str | None) -> None:
    """Move the simulated clock on until ``name`` has status ``wanted`` (no wall-clock wait)."""
    for _ in range(200):
        if status(sim, name) == wanted:
            return
        sim.advance(0.2)
    raise AssertionError(f"{name} never reached {wanted}: {status(sim, name)}")


def delete_all(sim) -> None:
    import subprocess

    for inst in sim.instances():
        if inst["status"] != "DELETING":
            subprocess.run(["brev", "delete", inst["id"]], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    for _ in range(400):
        if not sim.instances():
            return
        sim.advance(0.5)
    raise AssertionError(sim.instances())


def started_ids(sim) -> list[str]:
    return [call["argv"][-1] for call in cli_calls(sim, "start")]


def run(run_dag, dag_id: str, **conf):
    dag_run = run_kept(run_dag, dag_id, {**PARAMS, **conf})
    assert run_state(dag_run) == "success", task_states(dag_run)
    return dag_run


# ----------------------------------------------------------------------------------- the request and the caps
def test_a_warm_start_satisfies_the_runs_type_and_price_cap(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    first = run(run_dag, "brev_reuse_capped", key="caps", type="g4dn.xlarge", max_price="")
    small = xcom(first, "create")
    until(sim, small, "STOPPED")
    # an unset template is no cap at all: the task says so
    assert "max_price_per_hour rendered to '', so no price cap applies to this task" in task_logs.text

    # the DAG moved to an L40S: the stopped T4 is not what it asks for, so an L40S is created
    second = run(run_dag, "brev_reuse_capped", key="caps", type="g6e.xlarge", max_price="")
    big = xcom(second, "create")
    assert big != small and sim.instance(big)["instance_type"] == "g6e.xlarge"
    assert started_ids(sim) == []
    assert f"not starting {small} (STOPPED, g4dn.xlarge): its type g4dn.xlarge is not one this run asks for" in (
        task_logs.text
    )
    until(sim, big, "STOPPED")

    # both types would do, at $1/h at most: the L40S ($2.24/h, stopped last) is passed over, the T4 started
    third = run(run_dag, "brev_reuse_capped", key="caps", type="g4dn.xlarge,g6e.xlarge", max_price=1.0)
    assert xcom(third, "create") == small
    assert started_ids(sim) == [sim.instance(small)["id"]]
    assert f"not starting {big} (STOPPED, g6e.xlarge): its price $2.24/h is above max_price_per_hour=$1.00/h" in (
        task_logs.text
    )
    assert status(sim, big) == "STOPPED"
    until(sim, small, "STOPPED")

    # only the L40S, at $1/h at most: refused before anything is started or created, as a create is
    fourth = run_kept(run_dag, "brev_reuse_capped", {**PARAMS, "key": "caps", "type": "g6e.xlarge", "max_price": 1.0})
    assert task_states(fourth)["create"] == "failed"
    assert "BrevPriceCapError" in task_logs.text
    assert len(started_ids(sim)) == 1 and len(cli_calls(sim, "create")) == 2
    assert (status(sim, small), status(sim, big)) == ("STOPPED", "STOPPED")
    delete_all(sim)


def test_an_ephemeral_step_never_starts_an_instance_its_run_cost_forbids(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    run(run_dag, "brev_reuse_step_budget", key="budget", type="g6e.xlarge", max_run_cost="")
    [big] = sim.instances()
    until(sim, big["name"], "STOPPED")
    assert "max_run_cost rendered to '', so no run-cost cap applies to this task" in task_logs.text

    second = run(run_dag, "brev_reuse_step_budget", key="budget", type="g4dn.xlarge,g6e.xlarge", max_run_cost=0.2)
    assert xcom(second, "run")["last_line"] == "ran"
    assert started_ids(sim) == []  # $2.24/h x 840 s = $0.52 > $0.20
    assert "the step may cost $0.5227 ((ready_timeout + timeout) x price), more than max_run_cost=$0.2000" in (
        task_logs.text
    )
    created = [i for i in sim.instances() if i["id"] != big["id"]]
    assert [i["instance_type"] for i in created] == ["g4dn.xlarge"]
    assert status(sim, big["name"]) == "STOPPED"
    delete_all(sim)


def test_an_unset_reuse_key_template_is_no_key(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    dag_run = run(run_dag, "brev_reuse_lifecycle", key=None)  # "{{ params.key }}" renders "None"
    name = xcom(dag_run, "create")
    assert xcom(dag_run, "delete") == {"instance_name": name, "deleted": True}
    assert cli_calls(sim, "stop") == []
    assert "Reuse key" not in task_logs.text
    assert f"release='stop' for {name}: its create task set no reuse_key, so deleting it." in task_logs.text
    until(sim, name, None)


# ------------------------------------------------------------------------------------------ STOPPING: wait
@pytest.fixture
def flagship_env(aws_connection, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    objects = upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, DATASET_PREFIX)
    return aws_connection, objects


def test_a_flagship_run_triggered_while_the_last_one_stops_waits_and_reuses_it(
    run_dag, brev_sim, flagship_env, task_logs
):
    sim, (aws, objects) = brev_sim, flagship_env
    conf = {
        "bucket": aws.bucket,
        "dataset_prefix": DATASET_PREFIX,
        "reuse_key": "vcn-weekly",
        "release": "stop",
        "max_idle_hours": 1,
    }
    sim.set_timings(stop_seconds=300)  # a stop takes 5 minutes of simulated time: the next run finds it STOPPING
    first = run_kept(run_dag, "tao_visual_changenet_retrain", conf)
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create_instance")
    assert xcom(first, "delete_instance")["stopped"] is True
    assert status(sim, name) == "STOPPING"
    downloads = {image: sim.docker_images(name)[image]["downloads"] for image in IMAGES}
    assert downloads == dict.fromkeys(IMAGES, 1)

    waiting = lambda: "is still STOPPING" in task_logs.text  # noqa: E731
    second_started = time.time()
    with ChaosAgent(waiting, lambda _: sim.advance(301)) as agent:
        second = run_kept(run_dag, "tao_visual_changenet_retrain", conf)
    assert agent.fired
    assert run_state(second) == "success", task_states(second)
    assert xcom(second, "create_instance") == name  # the same instance, started once it had stopped
    assert len(cli_calls(sim, "create")) == 1 and len(cli_calls(sim, "start")) == 1
    assert f"Reuse key 'vcn-weekly': {name} (id {sim.instance(name)['id']}) is still STOPPING" in task_logs.text
    # nothing pulled, nothing unchanged downloaded
    assert {image: sim.docker_images(name)[image]["downloads"] for image in IMAGES} == downloads
    assert [c for c in sim.docker_calls(name, subcommand="pull") if c["ts"] > second_started] == []
    for step in ("gap_analysis", "train"):
        [dataset] = xcom(second, step)["sync"]["inputs"]
        assert (dataset["transferred"], dataset["skipped"]) == (0, objects), (step, dataset)
    sim.advance(301)
    delete_all(sim)


# ---------------------------------------------------------------------------------------------- kills
def runner_handles_sigterm() -> bool:
    return getattr(signal.getsignal(signal.SIGTERM), "__name__", "") == "_on_term"


class Killer:
    """SIGTERM to this process (the task runner calls ``on_kill``) once ``condition()`` holds; then watches what
    is still live for :data:`KILL_BUDGET` seconds (Airflow SIGKILLs the task then)."""

    def __init__(self, sim, condition) -> None:
        self.sim = sim
        self.left: list[dict] | None = None
        self.agent = ChaosAgent(lambda: runner_handles_sigterm() and condition(), self._kill, timeout=600)

    def live(self) -> list[dict]:
        return [i for i in self.sim.instances() if i["status"] not in ("DELETING", "STOPPING", "STOPPED")]

    def _kill(self, _value) -> None:
        start = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        while time.monotonic() - start < KILL_BUDGET:
            if not self.live():
                self.left = []
                return
            time.sleep(0.05)
        self.left = self.live()


@pytest.fixture
def restore_sigterm():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("dag_id", ["brev_reuse_lifecycle", "brev_reuse_ephemeral"])
def test_a_kill_while_the_warm_instance_starts_leaves_it_billing_nothing(
    run_dag, brev_sim, task_logs, restore_sigterm, dag_id
):
    sim = brev_sim
    run(run_dag, dag_id, key=f"kill-{dag_id}")
    [warm] = sim.instances()
    until(sim, warm["name"], "STOPPED")
    sim.set_timings(start_seconds=3600)  # STARTING for an hour of simulated time: the task waits for it
    # its start went through (the task says so once it holds the instance), and the instance is still STARTING
    starting = lambda: "starting stopped instance" in task_logs.text and status(sim, warm["name"]) == "STARTING"  # noqa: E731
    killer = Killer(sim, starting)
    with killer.agent:
        dag_run = run_kept(run_dag, dag_id, {**PARAMS, "key": f"kill-{dag_id}"})
    assert killer.agent.fired
    assert run_state(dag_run) == "failed"
    assert killer.left == [], killer.left  # deleted (by its id) within the 5 s before SIGKILL
    assert len(cli_calls(sim, "create")) == 1  # the kill came while the stopped instance was starting
    said = {
        "brev_reuse_lifecycle": f"Task killed: deleting instance {warm['name']}, which this try started for warm reuse.",
        "brev_reuse_ephemeral": f"Task killed: deleting its ephemeral instance {warm['name']}.",
    }
    assert said[dag_id] in task_logs.text
    assert sim.name_of(cli_calls(sim, "delete")[0]["argv"][1]) == warm["name"]
    sim.set_timings(start_seconds=0.3)
    delete_all(sim)


@pytest.mark.parametrize("dag_id", ["brev_reuse_lifecycle", "brev_reuse_ephemeral"])
def test_a_kill_while_a_start_runs_deletes_nothing(run_dag, brev_sim, task_logs, restore_sigterm, dag_id):
    """Killed while its ``brev start`` runs, after another run's start reached the instance first: the task cannot
    tell whose start won, so it deletes nothing and says so (had the start been its own, the record still says
    stopped over a running instance, which the janitor stops)."""
    import subprocess

    sim = brev_sim
    run(run_dag, dag_id, key=f"contended-{dag_id}")
    [warm] = sim.instances()
    until(sim, warm["name"], "STOPPED")
    gate = sim.root / "start-gate"
    sim.set_fault("slow_start", seconds=300, until_file=str(gate))  # this run's start is held before its PUT

    def our_start_is_held() -> bool:
        if any(fault["kind"] == "slow_start" for fault in sim.faults()):
            return False  # not taken yet: the other run's start could take it
        for child in psutil.Process().children(recursive=True):
            try:
                argv = child.cmdline()
            except psutil.Error:
                continue
            if "start" in argv and warm["id"] in argv:
                return True
        return False

    def another_run_starts_it_then_the_task_is_killed(_value) -> None:
        other = subprocess.run(["brev", "start", "-d", warm["id"]], capture_output=True, timeout=60, text=True)
        assert other.returncode == 0, other.stderr
        os.kill(os.getpid(), signal.SIGTERM)
        wait_until(lambda: "Task killed" in task_logs.text, timeout=120, what="on_kill to decide")
        gate.touch()  # this run's start goes on, and fails: the instance is not stopped any more

    agent = ChaosAgent(
        lambda: runner_handles_sigterm() and our_start_is_held(), another_run_starts_it_then_the_task_is_killed
    )
    with agent:
        dag_run = run_kept(run_dag, dag_id, {**PARAMS, "key": f"contended-{dag_id}"})
    assert agent.fired
    assert run_state(dag_run) == "failed"
    assert cli_calls(sim, "delete") == []
    assert status(sim, warm["name"]) in ("STARTING", "RUNNING")  # the other run's, untouched
    assert f"Task killed while `brev start` of {warm['name']} (id {warm['id']}) ran: leaving it as it is" in (
        task_logs.text
    )
    delete_all(sim)
