"""The direct ``ssh`` readiness probe (``core/instances/ssh_probe.py`` and ``ReadinessCheck(direct_ssh=True)``):
when it probes directly, how often, and every way it hands over to the ``brev exec`` probe."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.instances.readiness import (
    STAGE_READY,
    ReadinessCheck,
    RunProbe,
)
from airflow_provider_brev.core.instances.ssh_probe import (
    SSH_CONFIRM_SECONDS,
    SSH_FAST_SECONDS,
    SSH_PROBE_INTERVAL,
    SSH_SLOW_INTERVAL,
    SSH_WAIT_SECONDS,
    ReadHostEntries,
    RefreshHostEntries,
    RunSshProbe,
    direct_ssh_unreachable,
    host_entry_present,
    ssh_probe_argv,
    ssh_retry_interval,
    ssh_still_booting,
)
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Done, Failed, Sleep
from airflow_provider_brev.exceptions import BrevCLINotFoundError, BrevTransientError
from unit.core.instances.ssh_probe_helpers import ENTRY, REFUSED, echo, listed, refreshed_entry
from unit.machine_steps import step

#: (case, ~/.brev/ssh_config text, has a host entry for exactly "w-1")
HOST_ENTRIES = [
    ("the CLI's file", ENTRY, True),
    ("one of several aliases", "Host a w-1 b\n", True),
    ("indented, lower case", "  host w-1\n", True),
    ("after blank lines", "\n\nHost other\n\n  Hostname x\n\nHost w-1\n", True),
    ("no file", None, False),
    ("an empty file", "", False),
    ("only blank lines", "\n\n", False),
    ("a longer name that starts with it", "Host w-1-host\n", False),
    ("a pattern", "Host *\n", False),
    ("a Hostname line", "Hostname w-1\n", False),
    ("a comment", "# Host w-1\n", False),
    ("another instance", "Host w-10\n", False),
    ("a Host keyword without an alias", "Host\n  Hostname w-1\n", False),
]


@pytest.mark.parametrize(("case", "text", "present"), HOST_ENTRIES, ids=[r[0] for r in HOST_ENTRIES])
def test_host_entries_match_the_alias_exactly(case, text, present):
    assert host_entry_present(text, "w-1") is present, case


def ssh_failed(line: str, exit_code: int = 255) -> ProcessResult:
    return ProcessResult(exit_code, [], [line])


#: (case, the direct attempt's result, sshd still booting: wait on): each of ssh's three booting phrases (the lines
#: the CLI's ``WaitForSSHToBeAvailable`` retries on, shared/reference/brev-cli.md) alone, and what hands over.
SSH_RESULTS = [
    ("refused", REFUSED, True),
    ("connection timed out", ssh_failed("ssh: connect to host 10.0.0.1 port 22: Connection timed out"), True),
    ("operation timed out (BSD ssh)", ssh_failed("ssh: connect to host 10.0.0.1 port 22: Operation timed out"), True),
    ("the attempt's own budget ran out", ProcessResult(-9, [], [], timed_out=True), True),
    ("the key is refused", ssh_failed("Permission denied (publickey)."), False),
    ("no such host yet", ssh_failed("ssh: Could not resolve hostname w-1: Name or service not known"), False),
    ("the connection closed", ssh_failed("Connection closed by 10.0.0.1 port 22"), False),
    (
        "only a warning",
        ssh_failed("Warning: Permanently added '10.0.0.1' (ED25519) to the list of known hosts."),
        False,
    ),
    ("the remote command's own exit", ssh_failed("Connection refused", exit_code=1), False),
    ("the remote command's own exit 0", ssh_failed("Connection timed out", exit_code=0), False),
]


@pytest.mark.parametrize(("case", "result", "booting"), SSH_RESULTS, ids=[r[0] for r in SSH_RESULTS])
def test_only_refused_or_timed_out_connections_mean_sshd_is_still_booting(case, result, booting):
    assert ssh_still_booting(result) is booting, case


def test_the_probe_never_prompts_and_reads_the_clis_host_entries():
    assert ssh_probe_argv("/usr/bin/ssh", "/h/.brev/ssh_config", "w-1", "echo x; exit 0") == [
        "/usr/bin/ssh",
        "-F",
        "/h/.brev/ssh_config",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",  # the CLI's fast path uses 5 s
        "-o",
        "LogLevel=ERROR",
        "w-1",
        "echo x; exit 0",
    ]


def test_an_entry_that_exists_is_probed_at_once_and_rewritten_once_when_refused():
    """A name re-created or started again may answer elsewhere: an entry from before this check that meets a refused
    connection is rewritten (one ``brev refresh``), then probed again at the short interval."""
    machine = ReadinessCheck("w-1", direct_ssh=True)
    assert isinstance(listed(machine), ReadHostEntries)
    machine.receive(ENTRY, 0.0)
    call = step(machine, 0.0)
    assert isinstance(call, RunSshProbe)
    machine.receive(REFUSED, 0.05)
    refresh = step(machine, 0.05)
    assert isinstance(refresh, RefreshHostEntries) and refresh.timeout == 60.0
    machine.receive(ProcessResult(0, ["brev has been refreshed"], []), 0.3)
    assert isinstance(step(machine, 0.3), ReadHostEntries)
    machine.receive(ENTRY, 0.3)
    assert step(machine, 0.3) == call  # the same probe, the same nonce
    machine.receive(REFUSED, 0.35)
    assert step(machine, 0.35) == Sleep(SSH_PROBE_INTERVAL)  # refreshed once: now it waits for sshd
    again = step(machine, 0.45)
    assert again == call
    machine.receive(echo(again), 0.5)
    done = step(machine, 0.5)
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


#: (case, the confirming direct attempt after `brev exec` reached the instance, why plain ssh cannot reach it)
CONFIRMS = [
    ("it ran the command", ProcessResult(0, ["nonce"], []), ""),
    ("the remote command failed", ProcessResult(1, [], ["docker: not found"]), ""),
    ("timed out", ProcessResult(-9, [], [], timed_out=True), "no answer within 5 s"),
    (
        "connect timed out",
        ProcessResult(255, [], ["ssh: connect to host 10.66.33.2 port 22: Connection timed out"]),
        "ssh: connect to host 10.66.33.2 port 22: Connection timed out",
    ),
    ("refused", REFUSED, "ssh: connect to host 10.0.0.1 port 22: Connection refused"),
    (
        "a proxy that only the CLI knows",
        ProcessResult(255, [], ["", "  kex_exchange_identification: Connection closed by remote host"]),
        "kex_exchange_identification: Connection closed by remote host",
    ),
    ("no word", ProcessResult(255, [], []), "ssh exited with 255"),
    ("ssh could not start", Failed(BrevCLINotFoundError("no ssh")), "ssh could not be started"),
]


@pytest.mark.parametrize(("case", "confirm", "why"), CONFIRMS, ids=[r[0] for r in CONFIRMS])
def test_plain_ssh_is_unreachable_only_when_the_confirming_attempt_cannot_connect(case, confirm, why):
    assert direct_ssh_unreachable(confirm) == why, case
    assert direct_ssh_unreachable(ProcessResult(255, [], ["x" * 300])) == "x" * 200  # bounded for the log


def timed_out_window(machine: ReadinessCheck) -> RunProbe:
    """Drive a 2 s direct window in which every attempt times out: the ``brev exec`` probe it hands over to."""
    refreshed_entry(machine, 0.0)
    now = 0.0
    while isinstance(action := step(machine, now), RunSshProbe | Sleep):
        if isinstance(action, RunSshProbe):
            now += 0.5
            machine.receive(ProcessResult(-9, [], [], timed_out=True), now)
        else:
            now += action.seconds
    assert isinstance(action, RunProbe)
    return action


@pytest.mark.parametrize(
    ("confirm", "why"),
    [
        (ProcessResult(-9, [], [], timed_out=True), "no answer within 5 s"),
        (ProcessResult(0, ["any"], []), ""),  # sshd was booting through the window and is up now
    ],
)
def test_brev_exec_reaching_what_plain_ssh_did_not_is_confirmed_once_and_the_verdict_kept(confirm, why):
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=4.0)
    probe = timed_out_window(machine)
    machine.receive(echo(probe), 3.0)
    again = step(machine, 3.0)
    assert again == RunSshProbe(probe.command, SSH_CONFIRM_SECONDS)
    machine.receive(confirm, 3.5)
    done = step(machine, 3.5)
    assert isinstance(done, Done) and done.result.stage == STAGE_READY  # ready either way: brev exec reached it
    assert machine.direct_unreachable == why


def test_no_confirming_attempt_without_a_failed_direct_one_or_when_brev_exec_did_not_reach_it():
    no_entry = ReadinessCheck("w-1", direct_ssh=True)
    listed(no_entry)
    no_entry.receive(None, 0.0)
    step(no_entry, 0.0)
    no_entry.receive(Failed(BrevTransientError("502")), 0.0)  # refresh failed: never tried directly
    probe = step(no_entry, 0.0)
    no_entry.receive(echo(probe), 1.0)
    assert isinstance(step(no_entry, 1.0), Done)
    not_reached = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=4.0)
    probe = timed_out_window(not_reached)
    not_reached.receive(ProcessResult(255, [], ["Connection refused"]), 3.0)
    done = step(not_reached, 3.0)
    assert isinstance(done, Done) and done.result.stage != STAGE_READY
    assert no_entry.direct_unreachable == not_reached.direct_unreachable == ""


def test_after_the_window_the_check_hands_over_to_brev_exec_with_what_is_left_of_the_budget():
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=4.0)  # direct probing: half of it
    refreshed_entry(machine, 10.0)
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
    refreshed_entry(machine)
    step(machine, 0.0)
    machine.receive(REFUSED, 12.0)
    assert step(machine, 12.0) == Sleep(SSH_SLOW_INTERVAL)


@pytest.mark.parametrize(
    ("probing_for", "interval"),
    [(0.0, 0.1), (9.99, 0.1), (10.0, 0.5), (39.9, 0.5)],
)
def test_the_direct_attempts_are_ten_a_second_for_ten_seconds_then_two(probing_for, interval):
    assert ssh_retry_interval(probing_for) == interval


def entry_read(probe_timeout: float, text: str | None, at: float) -> object:
    """A direct-ssh check listed at 0 s whose host entries read back ``text`` at ``at`` s: its next action."""
    machine = ReadinessCheck("w-1", direct_ssh=True, probe_timeout=probe_timeout)
    listed(machine, 0.0)
    machine.receive(text, at)
    return step(machine, at)


@pytest.mark.parametrize(
    ("probe_timeout", "at", "budget"),
    [
        (500.0, 0.0, 60.0),  # a refresh never gets more than a minute
        (120.0, 0.0, 60.0),
        (3.0, 0.0, 3.0),  # ... nor more than the check has left
        (3.0, 1.0, 2.0),
        (0.5, 0.0, 1.0),  # ... and at least a second
    ],
)
def test_brev_refresh_gets_what_is_left_of_the_probe_budget_within_a_second_and_a_minute(probe_timeout, at, budget):
    refresh = entry_read(probe_timeout, None, at)
    assert refresh == RefreshHostEntries(budget)


@pytest.mark.parametrize(
    ("probe_timeout", "at", "budget"),
    [
        (120.0, 0.0, 10.0),  # the connect timeout plus 5 s
        (4.0, 0.0, 4.0),  # ... within what is left of the check's budget
        (4.0, 3.5, 1.0),  # ... and at least a second
    ],
)
def test_one_direct_attempt_gets_the_connect_timeout_plus_five_seconds_within_the_budget(probe_timeout, at, budget):
    probe = entry_read(probe_timeout, ENTRY, at)
    assert isinstance(probe, RunSshProbe) and probe.timeout == budget
