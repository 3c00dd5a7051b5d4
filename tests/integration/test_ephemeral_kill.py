"""A SIGTERM in any phase of an ephemeral step leaves no instance behind, within the 5 s Airflow allows.

Real ``dag.test()`` runs (tests/integration/dags/brev_kill_cases.py: an ephemeral step with S3 inputs and outputs and one
instance recovery) against the simulator and moto. Under ``dag.test()`` the task runs in this process and Airflow's
task runner installs the SIGTERM handler that calls ``on_kill``; each test sends SIGTERM once the step is in one
phase, then watches the simulator: every instance the step created must be DELETING or gone within 5 s (Airflow
SIGKILLs the task about 5 s after SIGTERM, so what is not deleted by then runs until the janitor).

Phases are made to last with simulator knobs: a slow ``brev create`` answer (``slow_create``), sshd refusing
(``ssh_refused``), a ``curl`` that waits on the instance (the transfers), a job that waits for a gate file, and
an ``instance_lost`` fault for the recovery phases -- armed only once the wall clock's minute has moved on since the
first instance was created, so the re-created instance gets a name of its own (its expiry minute differs: the
usual case hours after creation).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from helpers import ChaosAgent, cli_calls, task_states

if TYPE_CHECKING:
    from collections.abc import Callable

#: Airflow SIGKILLs a task this long after SIGTERM.
KILL_BUDGET = 5.0
GATED = "echo started >> counter; for i in $(seq 1 6000); do [ -e gate ] && break; sleep 0.05; done; echo job-done"
#: A ``curl`` that waits (up to 300 s) before doing anything, once ``curl-waiting`` says so; ``--version`` answers.
CURL_GATE = """#!/bin/sh
case "$*" in *--version*) exec /usr/bin/curl "$@" ;; esac
case "$*" in *{match}*) ;; *) exec /usr/bin/curl "$@" ;; esac
touch "$HOME/curl-waiting"
i=0; while [ ! -e "$HOME/curl-gate" ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done
exec /usr/bin/curl "$@"
"""


def runner_handles_sigterm() -> bool:
    return getattr(signal.getsignal(signal.SIGTERM), "__name__", "") == "_on_term"


def live(sim) -> list[dict]:
    return [i for i in sim.instances() if i["status"] != "DELETING"]


def created(task_logs) -> int:
    return task_logs.text.count("Created Brev instance")


def sandbox_has(sim, instance: dict, path: str) -> bool:
    return (sim.sandbox(instance["name"]) / path).exists()


class Killer:
    """Sends this process SIGTERM once ``condition()`` holds, then watches the simulator for ``KILL_BUDGET``."""

    def __init__(self, sim, condition: Callable[[], Any]) -> None:
        self.sim = sim
        self.killed_with: list[dict] = []  # the instances that were live when the kill came
        self.left: list[dict] | None = None
        self.agent = ChaosAgent(lambda: runner_handles_sigterm() and condition(), self._kill, timeout=600)

    def _kill(self, _value: Any) -> None:
        self.killed_with = live(self.sim)
        start = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        while time.monotonic() - start < KILL_BUDGET:
            if not live(self.sim):
                self.left = []
                return
            time.sleep(0.05)
        self.left = live(self.sim)


def lose_first_instance_later(sim, task_logs, *, then: dict[str, dict]) -> ChaosAgent:
    """Once the job runs and the minute has moved on since the first instance was created, lose that instance and
    arm ``then`` (fault kind -> params) for its re-creation."""
    first_seen: list[datetime] = []

    def due() -> dict | None:
        instances = live(sim)
        if len(instances) != 1 or not sandbox_has(sim, instances[0], "counter") or "Launched job" not in task_logs.text:
            return None
        first_seen.append(first_seen[0] if first_seen else datetime.now(UTC))
        moved_on = datetime.now(UTC).replace(second=0, microsecond=0) > first_seen[0].replace(second=0, microsecond=0)
        return instances[0] if moved_on and datetime.now(UTC).second >= 1 else None

    def lose(instance: dict) -> None:
        for kind, params in then.items():
            sim.set_fault(kind, **params)
        sim.set_fault("instance_lost", instance=instance["name"], after_seconds=0)

    return ChaosAgent(due, lose, timeout=600)


@pytest.fixture
def kill_run(run_dag, brev_sim, aws_connection, task_logs):
    previous = signal.getsignal(signal.SIGTERM)
    aws_connection.client.put_object(Bucket=aws_connection.bucket, Key="inputs/a.txt", Body=b"a")

    def run(killer: Killer, command: str = GATED, *others: ChaosAgent) -> Any:
        with killer.agent:
            for other in others:
                other.start()
            try:
                return run_dag("kill_ephemeral_step", conf={"bucket": aws_connection.bucket, "command": command})
            finally:
                for other in others:
                    other.__exit__(None, None, None)

    yield run
    signal.signal(signal.SIGTERM, previous)


def assert_nothing_left(killer: Killer, dag_run: Any, task_logs) -> None:
    assert killer.agent.fired
    assert killer.killed_with, "the kill came while an instance existed"
    assert killer.left == [], f"still live {KILL_BUDGET} s after SIGTERM: {killer.left}"
    assert task_states(dag_run)["run"] == "failed"
    assert "Task killed: deleting its ephemeral instance" in task_logs.text


def assert_no_round_after_the_kill(task_logs) -> None:
    """The interrupted transfer was not retried on the instance on_kill had just deleted."""
    assert "The task was killed during a transfer on" in task_logs.text
    assert "Transfer round 2/" not in task_logs.text


def test_kill_while_brev_create_runs(kill_run, brev_sim, task_logs):
    brev_sim.set_fault("slow_create", seconds=60)  # the instance exists; `brev create` has not answered yet
    killer = Killer(brev_sim, lambda: live(brev_sim) and created(task_logs) == 0)
    dag_run = kill_run(killer)
    assert_nothing_left(killer, dag_run, task_logs)


def test_kill_while_waiting_for_readiness(kill_run, brev_sim, task_logs):
    brev_sim.set_fault("ssh_refused", seconds=600)
    killer = Killer(brev_sim, lambda: live(brev_sim) and created(task_logs) == 1)
    dag_run = kill_run(killer)
    assert_nothing_left(killer, dag_run, task_logs)
    assert "The task was killed while waiting for instance" in task_logs.text  # the wait ended at once


def test_kill_during_the_input_sync(kill_run, brev_sim, task_logs):
    brev_sim.add_tool("curl", CURL_GATE.format(match="-K"))  # every transfer waits
    killer = Killer(brev_sim, lambda: [i for i in live(brev_sim) if sandbox_has(brev_sim, i, "curl-waiting")])
    dag_run = kill_run(killer)
    assert_nothing_left(killer, dag_run, task_logs)
    assert "Launched job" not in task_logs.text
    assert_no_round_after_the_kill(task_logs)


def test_kill_while_the_job_runs(kill_run, brev_sim, task_logs):
    def running() -> list[dict]:
        return (
            [i for i in live(brev_sim) if sandbox_has(brev_sim, i, "counter")]
            if "Launched job" in task_logs.text
            else []
        )

    killer = Killer(brev_sim, running)
    dag_run = kill_run(killer)
    assert_nothing_left(killer, dag_run, task_logs)


def test_kill_during_the_output_sync(kill_run, brev_sim, task_logs):
    brev_sim.add_tool("curl", CURL_GATE.format(match="-T"))  # uploads wait; the input sync does not
    killer = Killer(brev_sim, lambda: [i for i in live(brev_sim) if sandbox_has(brev_sim, i, "curl-waiting")])
    dag_run = kill_run(killer, "mkdir -p work/out && echo result > work/out/r.txt && echo done")
    assert_nothing_left(killer, dag_run, task_logs)
    assert "Launched job" in task_logs.text  # the job ran; its outputs were being uploaded
    assert_no_round_after_the_kill(task_logs)


@pytest.mark.parametrize("phase", ["create", "readiness"])
def test_kill_while_a_lost_instance_is_recreated(kill_run, brev_sim, task_logs, phase):
    """The recovery re-creates the lost instance under a new name; the kill must delete *that* one."""
    then = {"slow_create": {"seconds": 60}} if phase == "create" else {"ssh_refused": {"seconds": 600}}
    loser = lose_first_instance_later(brev_sim, task_logs, then=then)

    def recreating() -> list[dict] | None:
        if not loser.fired:
            return None
        instances = live(brev_sim)
        return instances if instances and created(task_logs) == (1 if phase == "create" else 2) else None

    killer = Killer(brev_sim, recreating)
    dag_run = kill_run(killer, GATED, loser)
    assert loser.fired
    assert_nothing_left(killer, dag_run, task_logs)
    (recreated,) = killer.killed_with
    assert "re-creating it under the same name (recovery 1/1)" in task_logs.text
    names = {call["argv"][1] for call in cli_calls(brev_sim, "create")}
    assert recreated["name"] in names and len(names) == 2, names  # a name of its own, deleted all the same
