"""The direct ``ssh`` readiness probe against the simulator: the simulator's plain ``ssh`` client resolves the host
entries ``brev refresh`` writes like OpenSSH does, the hook probes through it while sshd boots (no ``brev exec`` and
no ``brev`` process per attempt), and falls back to ``brev exec`` when the entry cannot be written."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

import pytest

from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook


@pytest.fixture
def hook(active_sim, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", active_sim.connection_json())
    _reset_process_caches()
    yield BrevHook(log_cli_output=False)
    _reset_process_caches()


def _subcommands(sim, since: float) -> list[str]:
    return [next(a for a in c["argv"] if not a.startswith("-")) for c in sim.calls() if c["ts"] >= since and c["argv"]]


def _ssh(sim, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", *args], capture_output=True, text=True, env={**os.environ, **sim.env()}, check=False, timeout=30
    )


def test_the_simulators_ssh_resolves_the_host_entries_refresh_writes(brev_sim):
    sim = brev_sim
    sim.create_instance_directly("box-1")
    config = os.path.expanduser("~/.brev/ssh_config")
    unknown = _ssh(sim, "-F", config, "-T", "-o", "BatchMode=yes", "box-1", "echo", "hi")
    assert (unknown.returncode, unknown.stderr.strip()) == (
        255,
        "ssh: Could not resolve hostname box-1: Name or service not known",
    )
    sim.login()
    assert subprocess.run(["brev", "refresh"], capture_output=True, check=False).returncode == 0
    ran = _ssh(sim, "-F", config, "-oConnectTimeout=5", "box-1", "echo hi; echo $BREV_SIM_HOST")
    assert (ran.returncode, ran.stdout.splitlines()) == (0, ["hi", ""])
    host = _ssh(sim, "-F", config, "box-1-host", "echo $BREV_SIM_HOST; exit 4")
    assert (host.returncode, host.stdout.strip()) == (4, "1")
    # without -F: ~/.ssh/config and what it includes, as OpenSSH reads them
    assert _ssh(sim, "box-1", "true").returncode == 255
    ssh_dir = os.path.expanduser("~/.ssh")
    os.makedirs(ssh_dir, exist_ok=True)
    with open(os.path.join(ssh_dir, "config"), "w") as handle:
        handle.write('Include "~/.brev/ssh_config"\n')
    assert _ssh(sim, "box-1", "true").returncode == 0
    assert [c["exit_code"] for c in sim.ssh_calls()] == [255, 0, 4, 255, 0]


def test_a_booting_sshd_refuses_the_simulators_ssh(brev_sim):
    sim = brev_sim
    sim.create_instance_directly("box-2")
    sim.set_fault("ssh_refused", instance="box-2", seconds=600)
    sim.login()
    subprocess.run(["brev", "refresh"], capture_output=True, check=True)
    refused = _ssh(sim, "-F", os.path.expanduser("~/.brev/ssh_config"), "box-2", "true")
    assert refused.returncode == 255
    assert "port 22: Connection refused" in refused.stderr
    assert not [r for r in sim.runs() if r["instance"] == "box-2"]  # nothing ran on the instance


def test_readiness_probes_through_the_host_entry_while_sshd_boots(brev_sim_both, hook):
    sim = brev_sim_both
    sim.set_timings(deploy=0.5, build=0.2, ssh=1.5)
    hook.create_instance("ssh-1", gpu="L40S:1")
    started = sim.calls()[-1]["ts"]
    hook.wait_until_ready("ssh-1", timeout=60, poll_interval=0.1)
    during = _subcommands(sim, started)
    assert "exec" not in during and during.count("refresh") == 1
    codes = [c["exit_code"] for c in sim.ssh_calls()]
    assert codes[-1] == 0 and set(codes[:-1]) <= {255}
    assert len(codes) >= 2  # sshd came up after the shell was READY: refused at least once
    probes = [r["command"] for r in sim.runs("ssh-1")]
    assert len(probes) == 1 and probes[0].startswith("echo brev-ready-")
    assert hook.run_command("ssh-1", "echo work").output == "work"


def test_a_failing_refresh_falls_back_to_the_brev_exec_probe(brev_sim, hook):
    sim = brev_sim
    sim.set_timings(deploy=0.3, build=0.2, ssh=0.3)
    hook.create_instance("ssh-2", gpu="L40S:1")
    started = sim.calls()[-1]["ts"]
    sim.set_fault("http_5xx", command="refresh", times=1, status=502)
    hook.wait_until_ready("ssh-2", timeout=60, poll_interval=0.1)
    during = _subcommands(sim, started)
    assert during.count("refresh") == 1 and during[-1] == "exec"
    assert sim.ssh_calls() == []  # nothing to probe through: the exec probe's own refresh wrote the entry later


@pytest.mark.skipif(shutil.which("ssh", path="/usr/bin:/bin") is None, reason="no OpenSSH client on this machine")
def test_the_machines_own_ssh_reaches_the_simulator_through_the_entries_proxy_and_fails_at_once(brev_sim):
    """OpenSSH follows the entry's ProxyCommand to the simulator: refused while sshd boots, then a line saying that
    plain ssh cannot run commands there; no connect timeout is ever waited for (no 10.x address is dialled)."""
    sim = brev_sim
    sim.create_instance_directly("box-3")
    sim.set_fault("ssh_refused", instance="box-3", seconds=600)
    sim.login()
    subprocess.run(["brev", "refresh"], capture_output=True, check=True)
    openssh = shutil.which("ssh", path="/usr/bin:/bin")
    config = os.path.expanduser("~/.brev/ssh_config")
    argv = [openssh, "-F", config, "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "box-3", "true"]
    refused = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=20)
    assert refused.returncode == 255
    assert "port 22: Connection refused" in refused.stderr  # what the readiness probe waits on while sshd boots
    sim.clear_faults("ssh_refused")
    sim.set_timings(ssh=0.0)
    sim.replace_instance("box-3")
    subprocess.run(["brev", "refresh"], capture_output=True, check=True)
    reached = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=20)
    assert reached.returncode == 255
    assert "plain ssh cannot run commands on the simulated instance 'box-3'" in reached.stderr
    assert [(c["via"], c.get("reached", False)) for c in sim.ssh_calls()] == [("proxy", False), ("proxy", True)]


def test_a_host_entry_plain_ssh_cannot_reach_costs_one_probe_window_per_process(brev_sim, hook, capsys):
    """Plain ssh times out on a RUNNING instance that brev exec reaches: the first check spends its direct window
    and confirms once; every later check of the process (another hook, the async driver) probes with brev exec."""
    sim = brev_sim
    sim.create_instance_directly("far-1")
    sim.set_fault("direct_ssh_unreachable", instance="far-1")
    first = hook.check_readiness("far-1", probe_timeout=4.0)  # a 2 s direct window
    assert first.ready
    attempts = len(sim.ssh_calls())
    assert attempts >= 3 and {c["exit_code"] for c in sim.ssh_calls()} == {255}
    assert hook.check_readiness("far-1", probe_timeout=4.0).ready
    assert BrevHook(log_cli_output=False).check_readiness("far-1", probe_timeout=4.0).ready
    assert asyncio.run(BrevHook(log_cli_output=False).acheck_readiness("far-1", probe_timeout=4.0)).ready
    assert len(sim.ssh_calls()) == attempts  # not one more direct attempt
    probes = [r for r in sim.runs("far-1") if r["command"].startswith("echo brev-ready-")]
    assert len(probes) == 4  # every check probed through brev exec
    warnings = [line for line in capsys.readouterr().out.splitlines() if "cannot reach Brev instance far-1" in line]
    assert len(warnings) == 1 and "Connection timed out" in warnings[0]  # logged once


def test_a_sshd_that_booted_through_the_direct_window_keeps_the_direct_probe(brev_sim, hook):
    """Refused all through the window, then reached by brev exec: the confirming attempt gets through, so the next
    check probes directly again."""
    sim = brev_sim
    sim.create_instance_directly("slow-1")
    sim.set_fault("ssh_refused", instance="slow-1", seconds=2.5)  # past the 2 s window of a 4 s check
    assert hook.check_readiness("slow-1", probe_timeout=4.0).ready
    before = len(sim.ssh_calls())
    assert sim.ssh_calls()[-1]["exit_code"] == 0  # the confirming attempt
    assert hook.check_readiness("slow-1", probe_timeout=4.0).ready
    assert len(sim.ssh_calls()) == before + 1 and sim.ssh_calls()[-1]["exit_code"] == 0
