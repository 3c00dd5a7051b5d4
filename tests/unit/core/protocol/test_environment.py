"""``brev``'s environment and the ``ssh-agent`` the CLI starts around its ``ssh``: the pure rules
(``core/protocol/environment.py``) and the process driver that keeps an announced agent out of the output and stops it
(``hooks/process.py``), with real processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

import pytest

from airflow_provider_brev.core.protocol.environment import (
    NO_SSH_AGENT,
    AgentAnnouncement,
    announces_agent,
    brev_environment,
    is_announced_agent,
    login_environment,
)
from airflow_provider_brev.hooks.process import run_process, stop_announced_agent
from unit.core.protocol.environment_helpers import _alive, _wait_gone


# ------------------------------------------------------------------------------------------------ environment
@pytest.mark.parametrize(
    ("worker", "expected"),
    [
        ({}, NO_SSH_AGENT),  # an Airflow worker or triggerer: no login session
        ({"SSH_AUTH_SOCK": ""}, NO_SSH_AGENT),  # the CLI's `[ -z "$SSH_AUTH_SOCK" ]` takes empty for unset
        ({"SSH_AUTH_SOCK": "/run/user/1000/agent.sock"}, "/run/user/1000/agent.sock"),  # a real agent is kept
    ],
)
def test_brev_always_gets_an_agent_socket_so_the_cli_starts_no_agent(worker, expected):
    env = brev_environment({"PATH": "/usr/bin", **worker}, brev_home=None)
    assert env["SSH_AUTH_SOCK"] == expected
    assert env["PATH"] == "/usr/bin"


def test_the_login_sends_nothing_to_the_clis_analytics_and_runs_in_its_scratch_home():
    base = brev_environment({"HOME": "/home/airflow", "DO_NOT_TRACK": "0"}, brev_home=None)
    env = login_environment(base, home="/tmp/scratch")
    assert (env["HOME"], env["BREV_NO_ANALYTICS"], env["DO_NOT_TRACK"]) == ("/tmp/scratch", "1", "1")
    assert "BREV_NO_ANALYTICS" not in base and base["DO_NOT_TRACK"] == "0"  # other calls keep the user's choice


def test_brev_environment_keeps_the_token_out_and_uses_the_connections_home():
    worker = {"HOME": "/home/airflow", "BREV_API_TOKEN": "secret", "NO_COLOR": "0"}
    env = brev_environment(worker, brev_home="/srv/brev")
    assert env["HOME"] == "/srv/brev" and "BREV_API_TOKEN" not in env and env["NO_COLOR"] == "0"
    assert brev_environment({"HOME": "/home/airflow"}, brev_home=None)["HOME"] == "/home/airflow"
    assert brev_environment({}, brev_home=None)["NO_COLOR"] == "1"
    assert worker["BREV_API_TOKEN"] == "secret"  # the worker's own environment is not changed


@pytest.mark.parametrize(
    ("command", "version", "expected"),
    [
        ("exec", (0, 6, 316), False),
        ("exec", (0, 6, 317), True),
        ("exec", (0, 6, 319), True),
        ("exec", (0, 6, 320), False),  # from here on: only without SSH_AUTH_SOCK, and not announced
        ("exec", (0, 6, 327), False),
        ("exec", None, False),
        ("ls", (0, 6, 318), False),
        ("copy", (0, 6, 318), False),
    ],
)
def test_which_calls_announce_an_agent(command, version, expected):
    assert announces_agent(command, version) is expected


def test_only_the_first_announcement_is_the_clis():
    watch = AgentAnnouncement()
    assert watch.keep("no oauth found for token")  # the CLI's breadcrumbs before it
    assert not watch.keep("\x1b[KAgent pid 4242")  # after a spinner's erase sequence
    assert watch.pid == 4242
    assert watch.keep("Agent pid 99")  # the remote command's output: kept, and not an agent to stop
    assert watch.pid == 4242
    other = AgentAnnouncement()
    assert other.keep("SecretAgent pid 7") and other.keep("Agent pid 7 started") and other.pid is None


@pytest.mark.parametrize(
    ("name", "owner", "started", "expected"),
    [
        ("ssh-agent", 1000, 100.5, True),
        ("ssh-agent", 1000, 99.2, True),  # within the start times' resolution
        ("ssh-agent", 1000, 90.0, False),  # running before the call: the worker's own, or a recycled PID
        ("ssh-agent", 0, 100.5, False),  # another user's
        ("sleep", 1000, 100.5, False),  # the PID is no agent (anymore)
    ],
)
def test_which_announced_process_may_be_stopped(name, owner, started, expected):
    assert is_announced_agent(name, owner, started, user=1000, call_started=100.0) is expected


def test_an_older_agent_or_a_process_that_is_no_agent_is_left_alone(fake_agent):
    agent = subprocess.Popen([fake_agent, "60"], start_new_session=True)
    plain = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        cases = [
            (agent, time.time() + 5),  # it was running before the call: the worker's own, or a recycled PID
            (plain, time.time() - 5),  # started during the call, but no agent
        ]
        for proc, call_started in cases:
            watch = AgentAnnouncement()
            watch.keep(f"Agent pid {proc.pid}")
            assert not stop_announced_agent(watch, call_started)
            assert _alive(proc.pid)
        watch = AgentAnnouncement()
        watch.keep(f"Agent pid {agent.pid}")
        assert stop_announced_agent(watch, time.time() - 5)  # the same agent, started during the call
        assert _wait_gone(agent.pid)
    finally:
        for proc in (agent, plain):
            proc.kill()
            proc.wait()


@pytest.mark.skipif(shutil.which("ssh-agent") is None, reason="OpenSSH's ssh-agent is not installed")
def test_the_real_snippet_of_v0_6_319_leaves_no_agent():
    """``eval $(ssh-agent -s) && ssh ...`` as v0.6.317 - v0.6.319 run it (``true`` standing in for ssh)."""
    watch = AgentAnnouncement()
    result = run_process(
        ["bash", "-c", "eval $(ssh-agent -s) && echo remote"], env=None, timeout=10, announcement=watch
    )
    assert result.stdout_lines == ["remote"]
    assert watch.pid is not None
    stopped = _wait_gone(watch.pid)
    if not stopped:  # do not leave it behind when the assertion fails
        with contextlib.suppress(OSError):
            os.kill(watch.pid, signal.SIGKILL)
    assert stopped
