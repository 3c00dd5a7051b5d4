"""Table-driven tests of the pure core's decisions: readiness, the wait state machine, argv builders, login
arguments, the shared listing, and the error types that cross a deferral."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_brev.core.instances.readiness import (
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
    CheckReadiness,
    ListInstance,
    ReadinessCheck,
    ReadinessWait,
    RunProbe,
    next_poll_interval,
    probe_passed,
    readiness_from_status,
)
from airflow_provider_brev.core.protocol.machine import Done, Fail, Failed, Sleep
from airflow_provider_brev.exceptions import (
    BrevCommandError,
    BrevConfigurationError,
    BrevError,
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevTimeoutError,
    BrevTransientError,
    error_from_event,
    retry_policy,
)
from unit.instance_helpers import inst
from unit.machine_steps import probe, step


@pytest.mark.parametrize(
    ("instance", "stage", "terminal"),
    [
        (None, STAGE_MISSING, True),
        (inst("FAILURE"), STAGE_FAILED, True),
        (inst("DELETING"), STAGE_DELETING, True),
        (inst("STOPPED"), STAGE_STOPPED, True),
        (inst("STOPPING"), STAGE_STOPPED, True),
        (inst("RUNNING", build="CREATE_FAILED", shell=""), STAGE_FAILED, True),
        (inst("DEPLOYING", build="", shell=""), STAGE_PROVISIONING, False),
        (inst("STARTING", build="", shell=""), STAGE_PROVISIONING, False),
        (inst("RUNNING", build="BUILDING", shell="NOT READY"), STAGE_BUILDING, False),
    ],
)
def test_readiness_from_status(instance, stage, terminal):
    readiness = readiness_from_status("w-1", instance)
    assert readiness is not None
    assert (readiness.stage, readiness.terminal) == (stage, terminal)


@pytest.mark.parametrize("instance", [inst(), inst(build="COMPLETED", shell="")])
def test_good_status_asks_for_the_probe(instance):
    assert readiness_from_status("w-1", instance) is None


@pytest.mark.parametrize(
    ("lines", "docker", "expected"),
    [
        (["n"], False, (True, STAGE_READY)),
        ([" n "], False, (True, STAGE_READY)),
        (["x", "w-1"], False, (False, STAGE_SSH)),
        (["n"], True, (False, STAGE_DOCKER)),
        (["n", "n:docker"], True, (True, STAGE_READY)),
        (["n:docker"], True, (False, STAGE_SSH)),
    ],
)
def test_probe_passed(lines, docker, expected):
    assert probe_passed(lines, "n", require_docker=docker) == expected


def _drive_check(instance, probe_answer):
    machine = ReadinessCheck("w-1")
    assert isinstance(machine.next_action(0.0), ListInstance)
    machine.receive(instance, 0.0)
    action = machine.next_action(0.0)
    if isinstance(action, RunProbe):
        nonce = action.command.split()[1].rstrip(";").strip("'")
        machine.receive(probe_answer(nonce), 0.0)
        action = machine.next_action(0.0)
    if isinstance(action, Fail):
        raise action.error
    assert isinstance(action, Done), "the machine asked for more than a listing and one probe"
    return action.result


def test_readiness_protocol_probes_only_when_the_status_is_good():
    assert _drive_check(inst("DEPLOYING", "", ""), lambda n: probe(None)).stage == STAGE_PROVISIONING
    assert _drive_check(inst(), lambda n: probe([n])).ready
    assert _drive_check(inst(), lambda n: probe(None)).stage == STAGE_SSH  # the probe timed out
    assert "refused" in _drive_check(inst(), lambda n: probe(["w-1"], "Connection refused")).message
    with pytest.raises(BrevConfigurationError):  # any other failure of the probe ends the check
        _drive_check(inst(), lambda n: Failed(BrevConfigurationError("no connection")))
    failed_listing = ReadinessCheck("w-1")
    failed_listing.next_action(0.0)
    failed_listing.receive(Failed(BrevTransientError("502")), 0.0)
    assert isinstance(failed_listing.next_action(0.0), Fail)


@pytest.mark.parametrize(
    ("base", "in_stage", "expected"),
    [(1.0, 0, 1.0), (1.0, 59, 1.0), (1.0, 61, MAX_POLL_INTERVAL), (0.2, 600, MAX_POLL_INTERVAL), (5.0, 600, 5.0)],
)
def test_next_poll_interval_backs_off_in_long_stages(base, in_stage, expected):
    assert next_poll_interval(base, in_stage) == expected


def _check(wait, answer, at, emitted=None):
    """Answer the wait's check at ``at``; the action that follows."""
    assert isinstance(step(wait, at), CheckReadiness)
    wait.receive(answer, at)
    return step(wait, at, emitted)


def test_readiness_wait_cadence_deadline_and_budget():
    deploying = readiness_from_status("w-1", inst("DEPLOYING", "", ""))
    wait = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0, max_failures=3)
    emitted: list[tuple[int, str]] = []
    assert _check(wait, deploying, 0.0, emitted) == Sleep(1.0)
    assert emitted == [(logging.INFO, f"Readiness of w-1: {deploying.message}")]  # a new stage is logged
    wait = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0, max_failures=3)
    assert isinstance(step(wait, 0.0), CheckReadiness)
    wait.receive(deploying, 0.25)
    assert step(wait, 0.25) == Sleep(0.75)  # fixed rate from the check's start
    emitted.clear()
    assert _check(wait, deploying, 1.0, emitted) == Sleep(1.0)
    assert not emitted  # same stage: nothing new to log
    assert _check(wait, deploying, 70.0) == Sleep(MAX_POLL_INTERVAL)
    # transient trouble: keep waiting within the budget, then give up; anything else ends the wait at once
    assert isinstance(_check(wait, Failed(BrevTransientError("502")), 71.0), Sleep)
    assert isinstance(_check(wait, Failed(BrevTimeoutError("slow ls")), 72.0), Sleep)
    last = Failed(BrevTransientError("502"))
    assert _check(wait, last, 73.0) == Fail(last.error)
    other = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0)
    config_error = Failed(BrevConfigurationError("no connection"))
    assert _check(other, config_error, 1.0) == Fail(config_error.error)
    other = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0)
    failed = _check(other, readiness_from_status("w-1", inst("FAILURE")), 2.0)
    assert isinstance(failed, Done) and failed.result.action == "failed"
    timeout = step(ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0), 100.0)
    assert isinstance(timeout, Done) and timeout.result.action == "timeout" and "after 100 s" in timeout.result.message


@pytest.mark.parametrize(
    ("error_type", "expected", "policy"),
    [
        ("BrevConfigurationError", BrevConfigurationError, "never"),
        ("BrevInvalidInputError", BrevInvalidInputError, "never"),
        ("BrevTransientError", BrevTransientError, "hook"),
        ("BrevInstanceFailedError", BrevInstanceFailedError, "task"),
        ("BrevCommandError", BrevError, "task"),  # needs an exit code: a plain BrevError
        ("ValueError", BrevError, "task"),  # not one of ours
        (None, BrevError, "task"),
    ],
)
def test_error_types_cross_a_deferral(error_type, expected, policy):
    error = error_from_event("it broke", error_type)
    assert type(error) is expected
    assert retry_policy(error) == policy
    assert "it broke" in str(error)
    assert not isinstance(error, BrevCommandError)
