"""Readiness in detail (``cli/instances/readiness.py``): the messages users read, the docker stage, the probe command, the
back-off boundary and the wait's remaining-time arithmetic."""

from __future__ import annotations

import re

import pytest

from airflow_provider_brev.cli.instances.readiness import (
    FAST_POLL_SECONDS,
    MAX_CHECK_FAILURES,
    MAX_POLL_INTERVAL,
    STAGE_BUILDING,
    STAGE_DELETING,
    STAGE_DOCKER,
    STAGE_FAILED,
    STAGE_MISSING,
    STAGE_PROVISIONING,
    STAGE_READY,
    STAGE_SSH,
    STAGE_STOPPED,
    ListInstance,
    Readiness,
    ReadinessWait,
    RunProbe,
    WaitStep,
    build_probe_command,
    new_nonce,
    next_poll_interval,
    probe_readiness,
    readiness_check,
    readiness_from_status,
)
from airflow_provider_brev.cli.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import BrevTransientError


def inst(status="RUNNING", build="COMPLETED", shell="READY", health="HEALTHY"):
    return BrevInstance("w-1", "id-1", status, build_status=build, shell_status=shell, health_status=health)


def test_stage_names_and_constants_are_fixed():
    stages = (STAGE_MISSING, STAGE_FAILED, STAGE_DELETING, STAGE_STOPPED, STAGE_PROVISIONING, STAGE_BUILDING)
    assert stages == ("missing", "failed", "deleting", "stopped", "provisioning", "building")
    assert (STAGE_SSH, STAGE_DOCKER, STAGE_READY) == ("ssh", "docker", "ready")
    assert (FAST_POLL_SECONDS, MAX_POLL_INTERVAL, MAX_CHECK_FAILURES) == (60.0, 2.0, 5)


@pytest.mark.parametrize(
    ("instance", "message"),
    [
        (None, "Instance 'w-1' does not exist (it was deleted or never created)."),
        (
            inst("FAILURE", build="", health=""),
            "Instance 'w-1' is in FAILURE (build -, health -); check it with `brev ls` and the Brev console.",
        ),
        (
            inst("FAILURE", build="BUILDING", health="UNHEALTHY"),
            "Instance 'w-1' is in FAILURE (build BUILDING, health UNHEALTHY); check it with `brev ls` and the Brev "
            "console.",
        ),
        (inst("DELETING"), "Instance 'w-1' is being deleted."),
        (inst("RUNNING", build="CREATE_FAILED", shell=""), "Instance 'w-1' failed to build (CREATE_FAILED)."),
        (inst("", build="", shell=""), "Instance 'w-1' is provisioning."),
        (inst("DEPLOYING", build="", shell=""), "Instance 'w-1' is DEPLOYING."),
        (inst(build="", shell="NOT READY"), "Instance 'w-1' is RUNNING; build pending, shell not ready."),
        (inst(build="BUILDING", shell="NOT READY"), "Instance 'w-1' is RUNNING; build BUILDING, shell not ready."),
    ],
)
def test_status_messages(instance, message):
    readiness = readiness_from_status("w-1", instance)
    assert readiness is not None
    assert readiness.message == message
    assert readiness.instance == (instance.to_dict() if instance else None)


def test_a_stopped_instance_is_never_started_implicitly():
    readiness = readiness_from_status("w-1", inst("STOPPING"))
    assert readiness is not None and readiness.terminal
    assert readiness.message.startswith("Instance 'w-1' is STOPPING; start it first")


def test_readiness_serialises_for_a_trigger_event():
    readiness = Readiness("ssh", "m", instance={"name": "w-1"})
    assert not readiness.terminal
    assert readiness.to_dict() == {"stage": "ssh", "message": "m", "terminal": False, "instance": {"name": "w-1"}}
    assert Readiness("ssh", "m", instance={"a": 1}) == Readiness("ssh", "m", instance={"b": 2})  # not compared
    assert not Readiness("ssh", "m").ready and Readiness("ready", "m").ready


def test_the_probe_command_and_nonce():
    nonce = new_nonce()
    assert re.fullmatch(r"brev-ready-[0-9a-f]{16}", nonce)
    assert new_nonce() != nonce
    assert build_probe_command("n-1") == "echo n-1; exit 0"
    assert build_probe_command("n-1", require_docker=True) == (
        "echo n-1; docker info >/dev/null 2>&1 && echo n-1:docker; exit 0"
    )


def test_probe_verdicts_and_their_messages():
    ready = probe_readiness("w-1", inst(), True, STAGE_READY)
    assert (ready.stage, ready.message) == (STAGE_READY, "Instance 'w-1' is ready (exec probe echoed its nonce).")
    docker = probe_readiness("w-1", inst(), False, STAGE_DOCKER)
    assert (docker.stage, docker.message) == (STAGE_DOCKER, "Instance 'w-1' answers over SSH but `docker info` fails.")
    ssh = probe_readiness("w-1", inst(), False, STAGE_SSH)
    assert ssh.message == "Instance 'w-1' is RUNNING but not reachable over SSH yet"
    assert probe_readiness("w-1", inst(), False, STAGE_SSH, "refused").message.endswith("yet: refused")
    assert not ready.terminal and ready.instance == inst().to_dict()


def _drive(require_docker, answer):
    protocol = readiness_check("w-1", require_docker=require_docker)
    assert isinstance(next(protocol), ListInstance)
    step = protocol.send(inst())
    assert isinstance(step, RunProbe)
    nonce = step.command.split()[1].rstrip(";")
    assert ("docker info" in step.command) is require_docker
    with pytest.raises(StopIteration) as stop:
        protocol.send(answer(nonce))
    return stop.value.value


def test_the_docker_stage_is_reached_when_ssh_works_but_docker_does_not():
    assert _drive(True, lambda n: ([n], "")).stage == STAGE_DOCKER
    assert _drive(True, lambda n: ([n, f"{n}:docker"], "")).stage == STAGE_READY
    assert _drive(False, lambda n: ([n], "")).stage == STAGE_READY
    timed_out = _drive(True, lambda n: None)
    assert (timed_out.stage, timed_out.message) == (
        STAGE_SSH,
        "Instance 'w-1' is RUNNING but not reachable over SSH yet: probe timed out",
    )
    tail = _drive(False, lambda n: (["other"], "e" * 400 + "END"))
    assert tail.message.endswith(": " + ("e" * 400 + "END")[-300:])


@pytest.mark.parametrize(
    ("base", "in_stage", "expected"),
    [
        (1.0, FAST_POLL_SECONDS - 0.01, 1.0),
        (1.0, FAST_POLL_SECONDS, MAX_POLL_INTERVAL),
        (2.0, 600, 2.0),
        (1.99, 600, 2.0),
    ],
)
def test_the_back_off_starts_at_one_minute_in_a_stage_and_caps_at_two_seconds(base, in_stage, expected):
    assert next_poll_interval(base, in_stage) == expected


def test_the_wait_sleeps_what_is_left_of_the_interval_and_never_past_the_deadline():
    wait = ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=10.0)
    assert wait.remaining(20.0) == 30.0
    assert wait.ready_after(25.4) == "Instance w-1 is ready after 15 s."
    building = readiness_from_status("w-1", inst(build="BUILDING", shell="NOT READY"))
    assert building is not None
    assert wait.before_check(10.0) is None
    assert wait.on_readiness(building, 10.4).sleep == pytest.approx(0.6)
    assert wait.before_check(49.8) is None
    assert wait.on_readiness(building, 49.9).sleep == pytest.approx(0.1)  # capped by the deadline
    late = ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=10.0)
    late.before_check(9.0)
    assert late.on_readiness(building, 71.0).sleep == 0.0  # past the deadline: no sleep at all
    slow = ReadinessWait("w-1", deadline=500.0, poll_interval=1.0, now=0.0)
    slow.before_check(0.0)
    slow.on_readiness(building, 0.0)
    slow.before_check(70.0)
    assert slow.on_readiness(building, 70.5).sleep == pytest.approx(1.5)  # in the stage since 0: 2 s - 0.5 s


def test_the_wait_ends_ready_or_failed_and_says_why_it_timed_out():
    wait = ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0)
    timeout = wait.before_check(30.0)
    assert timeout == WaitStep("timeout", "Instance 'w-1' was not ready after 30 s.", readiness=None)
    ready = probe_readiness("w-1", inst(), True, STAGE_READY)
    assert wait.on_readiness(ready, 1.0) == WaitStep("ready", ready.message, log_stage=True, readiness=ready)
    again = wait.on_readiness(ready, 2.0)
    assert again.action == "ready" and not again.log_stage
    deleting = readiness_from_status("w-1", inst("DELETING"))
    assert deleting is not None
    failed = wait.on_readiness(deleting, 3.0)
    assert (failed.action, failed.log_stage, failed.sleep) == ("failed", True, 0.0)
    last = wait.before_check(31.0)
    assert (
        last is not None
        and last.message == "Instance 'w-1' was not ready after 30 s (last state: Instance 'w-1' is being deleted.)"
    )


def test_failed_checks_reset_after_a_good_one():
    wait = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0, max_failures=2)
    step = wait.on_error(BrevTransientError("502"), 1.0)
    assert step.action == "check" and step.log_stage and step.sleep == 0.0
    assert step.message == "Readiness check 1/2 of w-1 failed (502); waiting on."
    wait.on_readiness(readiness_from_status("w-1", inst("DEPLOYING", "", "")), 2.0)
    assert wait.failures == 0
    assert wait.on_error(BrevTransientError("502"), 3.0).action == "check"
    assert wait.on_error(BrevTransientError("502"), 4.0) == WaitStep("error", "502", readiness=wait.last)
