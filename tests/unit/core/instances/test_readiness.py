"""Readiness in detail (``core/instances/readiness.py``): the messages users read, the docker stage, the probe command, the
back-off boundary and the wait's remaining-time arithmetic."""

from __future__ import annotations

import logging
import re

import pytest

from airflow_provider_brev.core.instances.readiness import (
    CHECK_OUTLIVED,
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
    CheckReadiness,
    ListInstance,
    Readiness,
    ReadinessCheck,
    ReadinessWait,
    RunProbe,
    WaitStep,
    build_probe_command,
    new_nonce,
    next_poll_interval,
    probe_passed,
    probe_readiness,
    readiness_from_status,
)
from airflow_provider_brev.core.instances.ssh_probe import (
    SSH_CONFIRM_SECONDS,
    SSH_PROBE_INTERVAL,
    RefreshHostEntries,
    RunSshProbe,
)
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Done, Fail, Failed, Sleep
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import BrevCLINotFoundError, BrevTransientError
from unit.core.instances.ssh_probe_helpers import ENTRY, REFUSED, echo, listed, refreshed_entry
from unit.machine_steps import probe, step


def inst(status="RUNNING", build="COMPLETED", shell="READY", health="HEALTHY"):
    return BrevInstance("w-1", "id-1", status, build_status=build, shell_status=shell, health_status=health)


def test_stage_names_and_constants_are_fixed():
    stages = (STAGE_MISSING, STAGE_FAILED, STAGE_DELETING, STAGE_STOPPED, STAGE_PROVISIONING, STAGE_BUILDING)
    assert stages == ("missing", "failed", "deleting", "stopped", "provisioning", "building")
    assert (STAGE_SSH, STAGE_DOCKER, STAGE_READY) == ("ssh", "docker", "ready")
    assert (FAST_POLL_SECONDS, MAX_POLL_INTERVAL, MAX_CHECK_FAILURES) == (60.0, 1.5, 5)


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


def test_a_readiness_gives_back_the_instance_brev_ls_listed():
    assert Readiness("ssh", "m", instance=inst().to_dict()).listed == inst()
    assert Readiness("missing", "m").listed is None


#: (case, the probe's stdout, require_docker (None: the default), (passed, stage if not))
PROBE_OUTPUTS = [
    ("the nonce, docker not asked for", ["n-1"], None, (True, STAGE_READY)),
    ("the nonce among other lines, padded", ["motd", "  n-1 \r"], None, (True, STAGE_READY)),
    ("no nonce", ["hello"], None, (False, STAGE_SSH)),
    ("another nonce", ["n-12"], False, (False, STAGE_SSH)),
    ("only the docker line", ["n-1:docker"], False, (False, STAGE_SSH)),
    ("docker asked for and answered", ["n-1", "n-1:docker"], True, (True, STAGE_READY)),
    ("docker asked for, not answered", ["n-1"], True, (False, STAGE_DOCKER)),
    ("docker asked for, another nonce's docker line", ["n-1", "n-2:docker"], True, (False, STAGE_DOCKER)),
    ("docker asked for, no nonce at all", ["n-1:docker"], True, (False, STAGE_SSH)),
]


@pytest.mark.parametrize(("case", "lines", "docker", "verdict"), PROBE_OUTPUTS, ids=[r[0] for r in PROBE_OUTPUTS])
def test_what_a_probes_stdout_means(case, lines, docker, verdict):
    if docker is None:
        assert probe_passed(lines, "n-1") == verdict, case
    else:
        assert probe_passed(lines, "n-1", require_docker=docker) == verdict, case


def test_how_a_check_probed_is_recorded():
    decided = ReadinessCheck("w-1")  # the status alone decides: no probe at all
    step(decided, 0.0)
    decided.receive(inst("DEPLOYING", build="PENDING"), 0.0)
    assert isinstance(step(decided, 0.0), Done)
    assert decided.probed_with == ""
    through_exec = ReadinessCheck("w-1")
    step(through_exec, 0.0)
    through_exec.receive(inst(), 0.0)
    assert isinstance(step(through_exec, 0.0), RunProbe)
    assert through_exec.probed_with == "exec"


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
    machine = ReadinessCheck("w-1", require_docker=require_docker)
    assert isinstance(machine.next_action(0.0), ListInstance)
    machine.receive(inst(), 0.0)
    action = machine.next_action(0.0)
    assert isinstance(action, RunProbe)
    nonce = action.command.split()[1].rstrip(";")
    assert ("docker info" in action.command) is require_docker
    machine.receive(answer(nonce), 0.0)
    done = machine.next_action(0.0)
    assert isinstance(done, Done)
    assert machine.next_action(1.0) is done  # the end is kept
    return done.result


def test_the_docker_stage_is_reached_when_ssh_works_but_docker_does_not():
    assert _drive(True, lambda n: probe([n])).stage == STAGE_DOCKER
    assert _drive(True, lambda n: probe([n, f"{n}:docker"])).stage == STAGE_READY
    assert _drive(False, lambda n: probe([n])).stage == STAGE_READY
    timed_out = _drive(True, lambda n: probe(None))
    assert (timed_out.stage, timed_out.message) == (
        STAGE_SSH,
        "Instance 'w-1' is RUNNING but not reachable over SSH yet: probe timed out",
    )
    tail = _drive(False, lambda n: probe(["other"], "e" * 400 + "END"))
    assert tail.message.endswith(": " + ("e" * 400 + "END")[-300:])


@pytest.mark.parametrize(
    ("base", "in_stage", "expected"),
    [
        (1.0, FAST_POLL_SECONDS - 0.01, 1.0),
        (1.0, FAST_POLL_SECONDS, MAX_POLL_INTERVAL),
        (1.5, 600, 1.5),
        (1.49, 600, 1.5),
        (2.0, 600, 2.0),  # a longer configured interval is kept
    ],
)
def test_the_back_off_starts_at_one_minute_in_a_stage_and_caps_at_one_and_a_half_seconds(base, in_stage, expected):
    assert next_poll_interval(base, in_stage) == expected


def _checked(wait, answer, started, answered, emitted=None):
    """A check asked at ``started`` and answered at ``answered``; the action that follows."""
    assert isinstance(step(wait, started), CheckReadiness)
    wait.receive(answer, answered)
    return step(wait, answered, emitted)


def test_the_wait_sleeps_what_is_left_of_the_interval_and_never_past_the_deadline():
    wait = ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=10.0)
    assert wait.remaining(20.0) == 30.0
    assert wait.ready_after(25.4) == "Instance w-1 is ready after 15 s."
    building = readiness_from_status("w-1", inst(build="BUILDING", shell="NOT READY"))
    assert building is not None
    assert _checked(wait, building, 10.0, 10.4) == Sleep(pytest.approx(0.6))
    assert _checked(wait, building, 49.8, 49.9) == Sleep(pytest.approx(0.1))  # capped by the deadline
    late = ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=10.0)
    assert _checked(late, building, 9.0, 71.0) == Sleep(0.0)  # past the deadline: no sleep at all
    slow = ReadinessWait("w-1", deadline=500.0, poll_interval=1.0, now=0.0)
    _checked(slow, building, 0.0, 0.0)
    assert _checked(slow, building, 70.0, 70.5) == Sleep(pytest.approx(1.0))  # in the stage since 0: 1.5 s - 0.5 s


def test_the_check_gets_the_probe_budget_and_what_is_left_of_the_wait():
    assert step(ReadinessWait("w-1", deadline=500.0, poll_interval=1.0, now=0.0), 0.0) == CheckReadiness(120.0, 500.0)
    end = ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=0.0)
    assert step(end, 49.5) == CheckReadiness(probe_timeout=1.0, limit=1.0)  # at least a second
    middle = ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=0.0)
    assert step(middle, 20.0) == CheckReadiness(probe_timeout=30.0, limit=30.0)


def test_the_wait_ends_ready_or_failed_and_says_why_it_timed_out():
    timeout = step(ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0), 30.0)
    assert timeout == Done(WaitStep("timeout", "Instance 'w-1' was not ready after 30 s.", readiness=None))
    assert (timeout.result.log_stage, timeout.result.sleep, timeout.result.took) == (False, 0.0, "")
    resumed = step(ReadinessWait("w-1", deadline=50.0, poll_interval=1.0, now=10.0), 50.0)  # the budget, not the clock
    assert isinstance(resumed, Done) and resumed.result.message == "Instance 'w-1' was not ready after 40 s."
    ready = probe_readiness("w-1", inst(), True, STAGE_READY)
    emitted: list[tuple[int, str]] = []
    wait = ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0)
    done = _checked(wait, ready, 0.5, 1.0, emitted)
    took = "Instance w-1 is ready after 1 s."
    assert done == Done(WaitStep("ready", ready.message, log_stage=True, readiness=ready, took=took))
    assert emitted == [(logging.INFO, f"Readiness of w-1: {ready.message}")]
    assert wait.next_action(5.0) is done  # the end is kept
    deleting = readiness_from_status("w-1", inst("DELETING"))
    assert deleting is not None
    emitted.clear()
    building = readiness_from_status("w-1", inst(build="BUILDING", shell="NOT READY"))
    assert building is not None
    wait = ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0)
    _checked(wait, building, 2.0, 2.0)
    failed = _checked(wait, deleting, 3.0, 3.0, emitted)  # a new stage after another one is logged too
    assert failed == Done(WaitStep("failed", deleting.message, log_stage=True, readiness=deleting))
    assert (failed.result.sleep, failed.result.took) == (0.0, "")
    assert emitted == [(logging.INFO, "Readiness of w-1: Instance 'w-1' is being deleted.")]
    wait = ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0)
    _checked(wait, building, 1.0, 1.0)
    last = step(wait, 31.0)
    assert isinstance(last, Done)
    assert last.result.message == f"Instance 'w-1' was not ready after 30 s (last state: {building.message})"


def test_failed_checks_reset_after_a_good_one():
    wait = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0, max_failures=2)
    emitted: list[tuple[int, str]] = []
    assert _checked(wait, Failed(BrevTransientError("502")), 0.0, 1.0, emitted) == Sleep(0.0)
    assert emitted == [(logging.INFO, "Readiness of w-1: Readiness check 1/2 of w-1 failed (502); waiting on.")]
    _checked(wait, readiness_from_status("w-1", inst("DEPLOYING", "", "")), 2.0, 2.0)
    assert wait.failures == 0
    assert isinstance(_checked(wait, Failed(BrevTransientError("502")), 3.0, 3.0), Sleep)
    last = Failed(BrevTransientError("502"))
    assert _checked(wait, last, 4.0, 4.0) == Fail(last.error)  # the check's own error is raised


def test_a_check_cancelled_at_the_deadline_ends_the_wait_as_a_timeout():
    wait = ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0)
    timeout = _checked(wait, CHECK_OUTLIVED, 0.0, 30.0)
    assert timeout == Done(WaitStep("timeout", "Instance 'w-1' was not ready after 30 s.", readiness=None))
    early = ReadinessWait("w-1", deadline=30.0, poll_interval=1.0, now=0.0)  # before the deadline: a failed check
    emitted: list[tuple[int, str]] = []
    assert _checked(early, CHECK_OUTLIVED, 0.0, 29.5, emitted) == Sleep(0.5)
    assert emitted == [
        (
            logging.INFO,
            "Readiness of w-1: Readiness check 1/5 of w-1 failed (a readiness check outlived the deadline); waiting on.",
        )
    ]


@pytest.mark.parametrize(
    "answers",
    [
        pytest.param([None, ProcessResult(0, [], []), "Host other\n"], id="still-no-entry-after-refresh"),
        pytest.param([None, Failed(BrevTransientError("502"))], id="refresh-fails"),
        pytest.param([ENTRY, Failed(BrevCLINotFoundError("no ssh"))], id="ssh-cannot-start"),
        pytest.param([ENTRY, ProcessResult(255, [], ["Permission denied (publickey)."])], id="ssh-denied"),
        pytest.param([ENTRY, ProcessResult(0, ["hello"], [])], id="no-nonce"),
    ],
)
def test_anything_but_a_booting_sshd_hands_over_to_brev_exec(answers):
    machine = ReadinessCheck("w-1", direct_ssh=True)
    listed(machine)
    for answer in answers:
        machine.receive(answer, 0.0)
        action = step(machine, 0.0)
    assert isinstance(action, RunProbe)
    assert machine.probed_with == "exec"
    machine.receive(echo(action), 1.0)
    action = step(machine, 1.0)
    if isinstance(action, RunSshProbe):  # a direct attempt had failed: confirmed once, here it gets through
        assert action.timeout == SSH_CONFIRM_SECONDS
        machine.receive(ProcessResult(0, ["x"], []), 1.5)
        action = step(machine, 1.5)
    assert action.result.stage == STAGE_READY
    assert machine.direct_unreachable == ""


def test_the_docker_stage_is_judged_from_the_direct_probe_and_status_still_comes_first():
    machine = ReadinessCheck("w-1", direct_ssh=True, require_docker=True)
    listed(machine)
    machine.receive(ENTRY, 0.0)
    call = step(machine, 0.0)
    assert "docker info" in call.command
    machine.receive(echo(call, docker=False), 0.0)
    assert step(machine, 0.0).result.stage == STAGE_DOCKER
    deploying = ReadinessCheck("w-1", direct_ssh=True)
    step(deploying, 0.0)
    deploying.receive(BrevInstance("w-1", "id-1", "DEPLOYING"), 0.0)
    assert step(deploying, 0.0).result.stage == STAGE_PROVISIONING  # no probe, no refresh


def test_a_retried_attempt_gets_what_is_left_when_it_starts_and_the_last_sleep_ends_with_the_window():
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=4.0)  # a 2 s window
    refreshed_entry(machine, 10.0)
    step(machine, 10.0)
    machine.receive(REFUSED, 10.5)
    assert step(machine, 10.5) == Sleep(SSH_PROBE_INTERVAL)
    retry = step(machine, 10.6)
    assert isinstance(retry, RunSshProbe) and retry.timeout == pytest.approx(3.4)  # 4 s less the 0.6 s spent
    machine.receive(REFUSED, 11.95)
    last = step(machine, 11.95)
    assert isinstance(last, Sleep) and last.seconds == pytest.approx(0.05)  # not past the window's end
    step(machine, 12.0)
    machine.receive(REFUSED, 12.0)  # the window is over: brev exec gets the rest of the budget
    handed = step(machine, 12.0)
    assert isinstance(handed, RunProbe) and handed.timeout == 2.0


@pytest.mark.parametrize(
    ("handed_over_at", "exec_budget"),
    [
        (1.5, 1.5),
        (2.0, 1.0),  # a second left: still worth a `brev exec`
        (2.01, None),  # less: the check ends, not reachable yet
    ],
)
def test_the_hand_over_to_brev_exec_needs_a_second_of_the_budget(handed_over_at, exec_budget):
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=3.0)
    listed(machine, 0.0)
    machine.receive(None, 0.0)
    assert isinstance(step(machine, 0.0), RefreshHostEntries)
    machine.receive(ProcessResult(0, [], []), handed_over_at)
    step(machine, handed_over_at)
    machine.receive("Host other\n", handed_over_at)  # still no entry: hand over
    action = step(machine, handed_over_at)
    if exec_budget is None:
        assert isinstance(action, Done) and action.result.message.endswith(
            "not reachable over SSH yet: probe timed out"
        )
    else:
        assert isinstance(action, RunProbe) and action.timeout == exec_budget
    assert machine.probed_with == "exec"
