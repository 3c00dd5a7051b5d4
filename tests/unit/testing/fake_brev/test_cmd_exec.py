"""Behaviour of the fake ``brev exec`` and ``brev copy`` against reference/brev-cli.md (sections 2, 5 and 8): the slow
and fast paths, re-runs, misparses, detached jobs, connection drops, piped names.

Every test drives the fake through a real subprocess, the way the hook does (helpers from test_simulator.py).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from unit.testing.test_simulator import brev, create, login, pid_alive, wait_for

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_provider_brev.testing import BrevSimulator


# -------------------------------------------------------------------------------------------- exec
def test_exec_first_call_takes_slow_path_then_fast_path(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    assert create("ex").returncode == 0  # RUNNING, but no ssh alias yet and sshd still booting
    res = brev("exec", "ex", "echo hi from $USER in $PWD")
    assert res.returncode == 0, res.stderr
    sandbox = brev_sim.sandbox("ex")
    assert res.stdout == f"hi from ubuntu in {sandbox}\nex\n"
    assert res.stderr.startswith(
        "ssh: Could not resolve hostname ex: Name or service not known\n"
        "Connection failed, checking instance status...\n"
    )
    call = brev_sim.calls("exec")[-1]
    assert call["ssh_argv"] == "ssh -T -o ConnectTimeout=5 -o LogLevel=ERROR ex 'echo hi from $USER in $PWD'"
    assert "Host ex\n" in (brev_sim.home / ".brev" / "ssh_config").read_text()
    res = brev("exec", "ex", "echo 'quoted'; nvidia-smi --query-gpu=name --format=csv,noheader")
    assert res.returncode == 0
    assert res.stderr == ""
    assert res.stdout == "quoted\nNVIDIA L40S\nex\n"
    assert brev_sim.calls("exec")[-1]["ssh_argv"].endswith(
        "ex 'echo '\\''quoted'\\''; nvidia-smi --query-gpu=name --format=csv,noheader'"
    )
    assert len(brev_sim.runs("ex")) == 2
    # the sandbox does not see the caller's environment
    os.environ["SECRET_FROM_WORKER"] = "leak"
    try:
        assert brev("exec", "ex", "echo ${SECRET_FROM_WORKER:-clean}").stdout == "clean\nex\n"
    finally:
        del os.environ["SECRET_FROM_WORKER"]


def test_exec_not_running_and_unknown_instances(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.set_timings(deploy_seconds=30)
    assert create("booting", "-d").returncode == 0
    res = brev("exec", "booting", "true")
    assert res.returncode == 1
    assert res.stderr.strip().endswith('instance "booting" is in state "DEPLOYING" \u2014 please check with: brev ls')
    res = brev("exec", "ghost", "true")
    assert res.returncode == 1
    assert 'ssh connection failed and could not look up instance "ghost": ' in res.stderr
    assert "exit status 255\nPlease check your instances with: brev ls" in res.stderr
    assert brev_sim.runs() == []


def test_exec_rerun_released_vs_passthrough_documented(brev_sim_both: BrevSimulator) -> None:
    login(brev_sim_both)
    brev_sim_both.create_instance_directly("rr", ssh_config_home=brev_sim_both.home)
    res = brev("exec", "rr", "echo run >> counter; exit 3")
    counter = (brev_sim_both.sandbox("rr") / "counter").read_text().count("run")
    assert res.stderr.splitlines()[-1] == "exit status 3"
    if brev_sim_both.profile == "released":
        assert (res.returncode, counter) == (1, 2)
        assert "Connection failed, checking instance status...\n" in res.stderr
    else:
        assert (res.returncode, counter) == (3, 1)
        assert "Connection failed" not in res.stderr
    assert res.stdout == ""  # no trailing name for a failed instance


def test_exec_dash_dash_misparse(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("inst", ssh_config_home=brev_sim.home)
    res = brev("exec", "inst", "--", "bash", "-c", "echo ran")
    assert res.returncode == 1
    assert res.stdout == "ran\ninst\n"  # the command ran on inst, then on "bash" and "-c"
    assert "\n=== bash ===\n" in res.stderr
    assert "\n=== -c ===\n" in res.stderr
    assert "Error on bash: " in res.stderr
    assert 'could not look up instance "bash"' in res.stderr
    assert res.stderr.rstrip("\n").split("\n")[-1] != ""
    assert "2 errors occurred:" in res.stderr
    assert brev("exec", "inst", "bash", "-c", "x").stderr.strip() == "unknown shorthand flag: 'c' in -c"


def test_exec_command_from_file_and_multiline_output(brev_sim: BrevSimulator, tmp_path: Path) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("f", ssh_config_home=brev_sim.home)
    script = tmp_path / "job.sh"
    script.write_text("for i in 1 2 3; do echo line$i; done\necho err >&2\n")
    res = brev("exec", "f", f"@{script}")
    assert (res.returncode, res.stdout, res.stderr) == (0, "line1\nline2\nline3\nf\n", "err\n")


def test_detached_job_survives_exec_and_dies_on_delete(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("bg", ssh_config_home=brev_sim.home)
    res = brev("exec", "bg", "setsid nohup sleep 60 > /dev/null 2>&1 < /dev/null & echo $! > job.pid")
    assert res.returncode == 0, res.stderr
    pid = int(wait_for(lambda: (brev_sim.sandbox("bg") / "job.pid").read_text().strip()))
    time.sleep(0.2)
    assert pid_alive(pid)
    assert pid in brev_sim.sandbox_pids("bg")
    assert brev("delete", "bg").returncode == 0
    wait_for(lambda: not pid_alive(pid), timeout=5)
    wait_for(lambda: brev_sim.instance("bg") is None, timeout=5)


def test_connection_drop_reruns_in_released(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("cd", ssh_config_home=brev_sim.home)
    brev_sim.set_fault("connection_drop", after_seconds=0.3, match="long-job")
    res = brev(
        "exec", "cd", "echo start >> log; nohup sleep 30 >/dev/null 2>&1 & echo $! >> bg; sleep 1; echo long-job done"
    )
    assert res.returncode == 0, res.stderr
    assert "Connection to cd closed by remote host.\n" in res.stderr
    assert "Connection failed, checking instance status..." in res.stderr
    assert (brev_sim.sandbox("cd") / "log").read_text() == "start\nstart\n"
    assert res.stdout.endswith("long-job done\ncd\n")
    first_bg = int((brev_sim.sandbox("cd") / "bg").read_text().split()[0])
    assert pid_alive(first_bg)  # nohup'd work survives the dropped connection
    assert brev_sim.faults() == []
    brev_sim.set_fault("connection_drop", after_bytes=10)
    res = brev("exec", "cd", "yes | head -c 100000")
    # what streamed before the drop stays on stdout; the re-run prints everything again
    assert res.returncode == 0
    assert res.stdout.endswith("y\n" * 50000 + "cd\n")
    assert 100000 < len(res.stdout) < 200003
    assert len(brev_sim.runs("cd")) == 4


def test_stdin_pipe_names_for_delete(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    for n in ("p1", "p2"):
        brev_sim.create_instance_directly(n)
    res = brev("delete", input="p1\np2\n")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "p1\np2\n"
    assert brev_sim.calls("delete")[-1]["stdin_read"] is True
    assert {i["status"] for i in brev_sim.instances()} <= {"DELETING"}
    res = brev("delete", "missing")
    assert res.returncode == 1
    assert res.stderr.startswith("1 error occurred:\n\t* ")
    assert "instance with id/name missing not found\n\n" in res.stderr
    # an inherited open pipe blocks the CLI (it reads names until EOF)
    proc = subprocess.Popen(
        ["brev", "delete", "p1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)
    proc.stdin.close()
    assert proc.wait(timeout=10) in (0, 1)
    proc.stdout.close()
    proc.stderr.close()


def test_exec_starts_a_stopped_instance(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("s1", status="STOPPED", ssh_config_home=brev_sim.home)
    res = brev("exec", "s1", "echo hi")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "Instance s1 is starting. \n\nhi\ns1\n"
    assert "Connection failed, checking instance status...\n" in res.stderr
    assert brev_sim.instance("s1")["status"] == "RUNNING"
    assert (
        brev("stop", "s1").stdout == "s1\n"
    )  # and back to STOPPING (tests/unit/testing/fake_brev/test_cmd_lifecycle.py)
    assert brev("shell", "s1").stderr.strip() == "simulator: this command is interactive or not simulated"


def test_copy_both_directions(brev_sim: BrevSimulator, tmp_path: Path) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("cp1")
    local = tmp_path / "run.sh"
    local.write_text("#!/bin/sh\necho copied\n")
    local.chmod(0o750)
    res = brev("copy", str(local), "cp1:run.sh")
    assert res.returncode == 0, res.stderr
    remote = brev_sim.sandbox("cp1") / "run.sh"
    assert stat.S_IMODE(remote.stat().st_mode) == 0o750
    assert brev("exec", "cp1", "./run.sh").stdout == "copied\ncp1\n"
    (brev_sim.sandbox("cp1") / "out").mkdir()
    (brev_sim.sandbox("cp1") / "out" / "metrics.json").write_text("{}")
    dest = tmp_path / "back"
    res = brev("scp", "cp1:~/out", str(dest))
    assert res.returncode == 0, res.stderr
    assert (dest / "metrics.json").read_text() == "{}"
    res = brev("cp", "cp1:/nonexistent/file", str(tmp_path))
    assert res.returncode == 1
    assert res.stderr.startswith("scp failed: exit status 1\nOutput: scp: /nonexistent/file: No such file")
