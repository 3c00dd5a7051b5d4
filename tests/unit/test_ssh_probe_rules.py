"""The direct ``ssh`` readiness probe (``cli/instances/ssh_probe.py`` and ``ReadinessCheck(direct_ssh=True)``):
when it probes directly, how often, and every way it hands over to the ``brev exec`` probe."""

from __future__ import annotations

import pytest
from machine_steps import step

from airflow_provider_brev.cli.instances.readiness import (
    STAGE_DOCKER,
    STAGE_PROVISIONING,
    STAGE_READY,
    ListInstance,
    ReadinessCheck,
    RunProbe,
)
from airflow_provider_brev.cli.instances.ssh_probe import (
    SSH_FAST_SECONDS,
    SSH_PROBE_INTERVAL,
    SSH_SLOW_INTERVAL,
    SSH_WAIT_SECONDS,
    ReadHostEntries,
    RefreshHostEntries,
    RunSshProbe,
    host_entry_present,
    ssh_probe_argv,
    ssh_retry_interval,
    ssh_still_booting,
)
from airflow_provider_brev.cli.protocol.lines import ProcessResult
from airflow_provider_brev.cli.protocol.machine import Done, Failed, Sleep
from airflow_provider_brev.cli.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import BrevCLINotFoundError, BrevTransientError

ENTRY = "# included in ~/.ssh/config\nHost w-1\n  Hostname 10.0.0.1\nHost w-1-host\n  Hostname 10.0.0.1\n"
REFUSED = ProcessResult(255, [], ["ssh: connect to host 10.0.0.1 port 22: Connection refused"])


def ready_listing() -> BrevInstance:
    return BrevInstance("w-1", "id-1", "RUNNING", build_status="COMPLETED", shell_status="READY")


def echo(call: RunSshProbe | RunProbe, docker: bool = True) -> ProcessResult:
    nonce = call.command.split()[1].rstrip(";")
    return ProcessResult(0, [nonce, f"{nonce}:docker"] if docker else [nonce], [])


def listed(machine: ReadinessCheck, now: float = 0.0) -> object:
    assert isinstance(step(machine, now), ListInstance)
    machine.receive(ready_listing(), now)
    return step(machine, now)


def test_host_entries_match_the_alias_exactly():
    assert host_entry_present(ENTRY, "w-1")
    assert host_entry_present("Host a w-1 b\n", "w-1")
    assert host_entry_present("  host w-1\n", "w-1")
    for text in (None, "", "Host w-1-host\n", "Host *\n", "Hostname w-1\n", "# Host w-1\n", "Host w-10\n"):
        assert not host_entry_present(text, "w-1"), text


def test_only_refused_or_timed_out_connections_mean_sshd_is_still_booting():
    assert ssh_still_booting(REFUSED)
    assert ssh_still_booting(ProcessResult(255, [], ["ssh: connect to host x port 22: Connection timed out"]))
    assert ssh_still_booting(ProcessResult(-9, [], [], timed_out=True))
    assert not ssh_still_booting(ProcessResult(255, [], ["Permission denied (publickey)."]))
    assert not ssh_still_booting(ProcessResult(255, [], ["ssh: Could not resolve hostname w-1: Name or service"]))
    assert not ssh_still_booting(ProcessResult(1, [], ["Connection refused"]))  # the remote command's own exit


def test_the_probe_never_prompts_and_reads_the_clis_host_entries():
    argv = ssh_probe_argv("/usr/bin/ssh", "/h/.brev/ssh_config", "w-1", "echo x; exit 0")
    assert argv[:3] == ["/usr/bin/ssh", "-F", "/h/.brev/ssh_config"]
    assert "BatchMode=yes" in argv and "-T" in argv
    assert argv[-2:] == ["w-1", "echo x; exit 0"]


def test_an_entry_that_exists_is_probed_at_once_and_retried_at_the_short_interval():
    machine = ReadinessCheck("w-1", direct_ssh=True)
    assert isinstance(listed(machine), ReadHostEntries)
    machine.receive(ENTRY, 0.0)
    call = step(machine, 0.0)
    assert isinstance(call, RunSshProbe)
    machine.receive(REFUSED, 0.05)
    assert step(machine, 0.05) == Sleep(SSH_PROBE_INTERVAL)
    again = step(machine, 0.15)
    assert again == call  # the same probe, the same nonce
    machine.receive(echo(again), 0.2)
    done = step(machine, 0.2)
    assert isinstance(done, Done) and done.result.stage == STAGE_READY
    assert machine.probed_with == "ssh"


def test_a_missing_entry_is_written_once_with_brev_refresh_then_probed():
    machine = ReadinessCheck("w-1", direct_ssh=True)
    listed(machine)
    machine.receive(None, 0.0)  # no ~/.brev/ssh_config yet
    assert isinstance(step(machine, 0.0), RefreshHostEntries)
    machine.receive(ProcessResult(0, ["brev has been refreshed"], []), 0.3)
    assert isinstance(step(machine, 0.3), ReadHostEntries)
    machine.receive(ENTRY, 0.3)
    assert isinstance(step(machine, 0.3), RunSshProbe)


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
    assert step(machine, 1.0).result.stage == STAGE_READY


def test_after_the_window_the_check_hands_over_to_brev_exec_with_what_is_left_of_the_budget():
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=4.0)  # direct probing: half of it
    listed(machine, 10.0)
    machine.receive(ENTRY, 10.0)
    now = 10.0
    probes = 0
    while isinstance(action := step(machine, now), RunSshProbe | Sleep):
        if isinstance(action, RunSshProbe):
            probes += 1
            machine.receive(REFUSED, now)
        else:
            now += action.seconds
    assert isinstance(action, RunProbe)
    assert round(2.0 / SSH_PROBE_INTERVAL) <= probes <= round(2.0 / SSH_PROBE_INTERVAL) + 2
    assert action.timeout == pytest.approx(4.0 - (now - 10.0))  # the exec probe gets the rest, not a new budget
    assert SSH_WAIT_SECONDS == 40.0
    assert ReadinessCheck("w-1", direct_ssh=True).ssh_window == SSH_WAIT_SECONDS  # 40 s of the default 120 s


def test_a_check_whose_budget_is_spent_ends_not_ready_instead_of_overrunning_the_wait():
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=3.0)
    listed(machine, 0.0)
    machine.receive(None, 0.0)
    refresh = step(machine, 0.0)
    assert isinstance(refresh, RefreshHostEntries) and refresh.timeout == 3.0
    machine.receive(ProcessResult(0, [], []), 2.5)  # a slow refresh
    machine.receive(ENTRY, 2.5) if isinstance(step(machine, 2.5), ReadHostEntries) else None
    probe = step(machine, 2.5)
    assert isinstance(probe, RunSshProbe) and probe.timeout == 1.0  # at least a second
    machine.receive(ProcessResult(255, [], ["Permission denied."]), 2.6)
    done = step(machine, 2.6)
    assert isinstance(done, Done) and done.result.message.endswith("probe timed out")


def test_a_slow_sshd_is_probed_less_often_after_ten_seconds():
    assert ssh_retry_interval(0.0) == ssh_retry_interval(9.99) == SSH_PROBE_INTERVAL == 0.1
    assert ssh_retry_interval(SSH_FAST_SECONDS) == SSH_SLOW_INTERVAL == 0.5
    machine = ReadinessCheck("w-1", direct_ssh=True)
    listed(machine)
    machine.receive(ENTRY, 0.0)
    step(machine, 0.0)
    machine.receive(REFUSED, 12.0)
    assert step(machine, 12.0) == Sleep(SSH_SLOW_INTERVAL)


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
