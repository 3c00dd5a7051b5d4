"""The fake ``brev`` starts the ``ssh-agent`` the released CLI starts around each ``ssh`` of ``brev exec``
(reference/brev-cli.md section 2.7), and the simulator counts and stops them.

Every test drives the fake through a real subprocess, the way the hook does (helpers from test_simulator.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from unit.testing.test_simulator import brev, create, login, pid_alive, wait_for

if TYPE_CHECKING:
    from airflow_provider_brev.testing import BrevSimulator


def _ready(sim: BrevSimulator, name: str) -> None:
    """A RUNNING instance with its ssh entry: the next exec takes the fast path."""
    login(sim)
    sim.create_instance_directly(name, ssh_config_home=sim.home)


def _describe(pid: int) -> tuple[str, int]:
    """The process's name and session id."""
    return Path(f"/proc/{pid}/comm").read_text().strip(), os.getsid(pid)


def test_each_exec_without_an_agent_socket_leaves_a_detached_agent(brev_sim: BrevSimulator) -> None:
    _ready(brev_sim, "box")
    assert "SSH_AUTH_SOCK" not in os.environ  # the fixture's worker has no login session
    res = brev("exec", "box", "echo hi")
    assert res.returncode == 0 and res.stdout == "hi\nbox\n", res.stderr  # nothing printed about it
    [agent] = brev_sim.agents()
    assert agent["alias"] == "box" and agent["announced"] is False
    assert agent["brev_pid"] == brev_sim.calls("exec")[-1]["pid"]
    assert not pid_alive(agent["brev_pid"])  # brev is gone ...
    assert brev_sim.agent_pids() == [agent["pid"]]  # ... its agent is not
    assert _describe(agent["pid"]) == ("ssh-agent", agent["pid"])  # named ssh-agent, leader of its own session
    assert agent["pid"] in brev_sim.processes()
    assert brev("exec", "box", "true").returncode == 0
    assert len(brev_sim.agent_pids()) == 2  # one more per call


def test_the_slow_path_runs_the_snippet_twice(brev_sim: BrevSimulator) -> None:
    """The first exec on a new instance: the fast path's ssh fails (no host entry yet), the slow path refreshes and
    runs the command again; each ssh had its agent snippet."""
    login(brev_sim)
    assert create("fresh").returncode == 0
    assert brev("exec", "fresh", "true").returncode == 0
    assert [a["alias"] for a in brev_sim.agents()] == ["fresh", "fresh"]
    assert len(brev_sim.agent_pids()) == 2


@pytest.mark.parametrize(("sock", "agents"), [("/dev/null", 0), ("/tmp/some-agent.sock", 0), ("", 1)])
def test_a_set_agent_socket_stops_the_snippet_and_an_empty_one_does_not(brev_sim, monkeypatch, sock, agents):
    _ready(brev_sim, "box")
    monkeypatch.setenv("SSH_AUTH_SOCK", sock)
    assert brev("exec", "box", "echo hi").stdout == "hi\nbox\n"
    assert len(brev_sim.agents()) == len(brev_sim.agent_pids()) == agents


def test_commands_without_the_snippet_start_no_agent(brev_sim: BrevSimulator, tmp_path: Path) -> None:
    _ready(brev_sim, "box")
    (tmp_path / "up.txt").write_text("x")
    assert brev("ls", "--json").returncode == 0
    assert brev("copy", str(tmp_path / "up.txt"), "box:/tmp/up.txt").returncode == 0
    assert brev("refresh").returncode == 0
    assert brev_sim.agents() == [] and brev_sim.agent_pids() == []


def test_stop_agents_and_kill_all_end_them_and_the_record_stays(brev_sim: BrevSimulator) -> None:
    _ready(brev_sim, "box")
    for _ in range(3):
        assert brev("exec", "box", "true").returncode == 0
    pids = brev_sim.agent_pids()
    assert len(pids) == 3
    assert brev_sim.stop_agents() == 3
    assert wait_for(lambda: brev_sim.agent_pids() == [] and not any(pid_alive(pid) for pid in pids))
    assert len(brev_sim.agents()) == 3  # a test can still count what was started
    assert brev("exec", "box", "true").returncode == 0
    assert len(brev_sim.agent_pids()) == 1
    assert brev_sim.kill_all() == 1  # the fixture's teardown: sandboxes and agents
    assert wait_for(lambda: brev_sim.processes() == [])


def test_v0_6_319_starts_an_agent_on_every_exec_and_announces_it(brev_sim: BrevSimulator, monkeypatch) -> None:
    """v0.6.317 - v0.6.319: status first, then one plain ``ssh`` after an unconditional ``eval $(ssh-agent -s)``
    whose ``Agent pid N`` reaches stdout before the remote output; a failing command is not run twice."""
    brev_sim.set_config(version="v0.6.319")
    _ready(brev_sim, "box")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/dev/null")  # no help on these releases
    res = brev("exec", "box", "echo hi")
    assert res.returncode == 0, res.stderr
    [agent] = brev_sim.agents()
    assert agent["announced"] is True
    assert res.stdout == f"Agent pid {agent['pid']}\nhi\nbox\n"
    assert brev_sim.calls("exec")[-1]["ssh_argv"] == "ssh box 'echo hi'"
    res = brev("exec", "box", "echo once >> ran; exit 3")
    assert res.returncode == 1 and res.stderr.strip().endswith("exit status 3")
    assert (brev_sim.sandbox("box") / "ran").read_text() == "once\n"
    assert len(brev_sim.agent_pids()) == 2
    assert brev_sim.stop_agents() == 2
