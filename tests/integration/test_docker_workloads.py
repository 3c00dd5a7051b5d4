"""A command that manages its own containers with the instance's docker works on the simulator in both CLI
profiles, as on a real instance: ``docker run --name/--label/--cidfile -d``, ``docker inspect -f`` with Go
templates, ``docker stop``, ``docker rm -f``; and a killed task whose command traps the signal and runs
``docker stop`` really stops its container (exit code 143 recorded, no process left).

Real ``dag.test()`` runs (tests/dags/brev_docker_cases.py) against the simulator.
"""

from __future__ import annotations

import os
import signal

from helpers import ChaosAgent, assert_no_process_left, task_states


def docker_steps(sim, instance: str) -> list[tuple[str, int | None]]:
    return [(call["subcommand"], call["exit_code"]) for call in sim.docker_calls(instance=instance)]


def test_a_command_that_manages_its_container_succeeds(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    dag_run = run_dag("docker_managed_container")

    assert task_states(dag_run)["run"] == "success", task_logs.text
    assert "exit code: 143" in task_logs.text  # docker stop: SIGTERM, and the code kept for inspect
    assert "training" in task_logs.text  # docker logs of the stopped container
    (run,) = sim.docker_calls(subcommand="run")
    instance = run["instance"]
    assert run["exit_code"] == 0 and run["labels"] == {"team": "vision", "run": "r1"}
    steps = docker_steps(sim, instance)
    assert [s for s, _ in steps if s != "pull"][:1] == ["run"]
    assert {s for s, _ in steps} >= {"run", "inspect", "ps", "stop", "logs", "rm"}
    assert all(code == 0 for _, code in steps), steps
    assert sim.docker_containers(instance) == []  # rm -f removed it
    assert (sim.sandbox(instance) / "results" / "mode.txt").read_text() == "test\n"  # -e, -v and -w applied
    sim.wait_for_deletions(timeout=60)
    assert sim.instances() == []
    assert_no_process_left(sim)


def runner_handles_sigterm() -> bool:
    return getattr(signal.getsignal(signal.SIGTERM), "__name__", "") == "_on_term"


def test_a_killed_task_s_trap_stops_its_container(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    sim.create_instance_directly("docker-box-1")
    previous = signal.getsignal(signal.SIGTERM)

    def container_running() -> bool:
        running = [c for c in sim.docker_containers("docker-box-1") if c["State"]["Status"] == "running"]
        return bool(running) and runner_handles_sigterm() and "Launched job" in task_logs.text

    try:
        with ChaosAgent(container_running, lambda _: os.kill(os.getpid(), signal.SIGTERM)) as killer:
            dag_run = run_dag("docker_guarded_container", conf={"instance": "docker-box-1"})
    finally:
        signal.signal(signal.SIGTERM, previous)

    assert killer.fired
    assert task_states(dag_run)["run"] == "failed"
    (container,) = sim.docker_containers("docker-box-1")
    assert container["Name"] == "/guarded-1"
    assert container["State"]["Status"] == "exited"
    assert container["State"]["ExitCode"] == 143  # stopped by the trap's docker stop (SIGTERM), not lost (255)
    (stop,) = sim.docker_calls(instance="docker-box-1", subcommand="stop")
    assert stop["exit_code"] == 0 and stop["containers"] == ["guarded-1"]
    assert sim.sandbox_pids("docker-box-1") == []  # the container's processes and its monitor are gone
