"""``docker run`` of the fake docker: the options clients use, a container that outlives its client, and Docker's
errors for what it refuses."""

from __future__ import annotations

import json
import signal

import pytest

RUN_D = "docker run -d --name {name} {opts} ubuntu:22.04 {cmd}"


def test_a_detached_run_keeps_every_option_for_inspect(instance) -> None:
    (instance.home / "env.list").write_text("# comment\n\nFROM_FILE=one two\nFROM_CLIENT\n")
    script = (
        "FROM_CLIENT=passed docker run -d --name trainer --label team=vision -l stage --cidfile cid "
        "-e PLAIN=1 --env-file env.list -v $HOME/data:/data:ro -v $HOME/out:/out -w /out --entrypoint /bin/bash "
        "--shm-size 2g --ipc host --gpus all --init --network host ubuntu:22.04 "
        "-c 'env | grep -E \"^(PLAIN|FROM_)\" | sort > /out/env.txt; pwd > /out/pwd.txt'"
    )
    cid = instance.ok(script).strip()
    assert (instance.home / "cid").read_text() == cid and len(cid) == 64
    assert instance.ok("docker wait trainer") == "0\n"
    (info,) = json.loads(instance.ok("docker inspect trainer"))
    assert info["Id"] == cid and info["Name"] == "/trainer"
    assert info["State"]["Status"] == "exited" and info["State"]["ExitCode"] == 0
    assert info["Config"]["Labels"] == {"team": "vision", "stage": ""}
    assert info["Config"]["Entrypoint"] == ["/bin/bash"] and info["Path"] == "/bin/bash"
    assert info["Config"]["WorkingDir"] == "/out" and info["Config"]["Image"] == "ubuntu:22.04"
    assert {"PLAIN=1", "FROM_FILE=one two", "FROM_CLIENT=passed"} <= set(info["Config"]["Env"])
    host = info["HostConfig"]
    assert (host["ShmSize"], host["IpcMode"], host["NetworkMode"], host["Init"]) == (12 * 1024**3, "host", "host", True)
    assert host["DeviceRequests"][0]["Count"] == -1
    assert [(m["Destination"], m["RW"]) for m in info["Mounts"]] == [("/data", False), ("/out", True)]
    # the process really ran with them: env (file, client, -e), the working directory mapped through the mount
    assert (instance.home / "out" / "env.txt").read_text().split("\n")[:3] == [
        "FROM_CLIENT=passed",
        "FROM_FILE=one two",
        "PLAIN=1",
    ]
    assert (instance.home / "out" / "pwd.txt").read_text().strip() == str(instance.home / "out")


def test_an_attached_run_streams_the_output_and_returns_the_exit_code(instance) -> None:
    done = instance.sh("docker run --name att ubuntu bash -c 'echo out; echo err >&2; exit 3'")
    assert done.returncode == 3
    assert done.stdout == "out\n"
    assert done.stderr.endswith("err\n")
    assert instance.ok("docker logs att") == "out\n"
    assert instance.ok("docker inspect -f '{{.State.ExitCode}}' att") == "3\n"


def test_rm_removes_an_attached_container_after_its_exit_code_is_read(instance) -> None:
    assert instance.sh("docker run --rm --name gone ubuntu bash -c 'exit 5'").returncode == 5
    assert instance.containers() == []
    assert instance.ok("docker ps -aq") == ""


def test_a_detached_rm_container_is_removed_when_it_ends_and_wait_still_reports_its_code(instance) -> None:
    gated = "while [ ! -e /work/gate ]; do sleep 0.02; done; exit 4"
    instance.ok(f"docker run -d --rm --name brief -v $HOME:/work ubuntu bash -c '{gated}'")
    waiter = instance.start("docker wait brief")
    # `docker wait` says (its call record) once it holds the container
    instance.until(lambda: any(c.get("waiting") for c in instance.sim.docker_calls(subcommand="wait")))
    (instance.home / "gate").touch()
    out, _ = waiter.communicate(timeout=30)
    assert (waiter.returncode, out) == (0, "4\n")
    assert instance.containers() == []


def test_a_container_outlives_its_killed_client_until_docker_stop(instance) -> None:
    client = instance.start("exec docker run --name survivor -v $HOME:/work ubuntu bash -c 'touch /work/up; sleep 300'")
    instance.until(lambda: (instance.home / "up").exists())  # the container's own marker says it runs
    client.kill()
    client.wait()
    assert instance.ok("docker inspect -f '{{.State.Status}}' survivor") == "running\n"
    assert instance.ok("docker stop survivor") == "survivor\n"
    assert instance.ok("docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' survivor") == "exited 143\n"
    assert instance.processes() == []


def test_a_signal_to_an_attached_client_is_forwarded_to_the_container(instance) -> None:
    client = instance.start(
        "exec docker run --name fwd -v $HOME:/work ubuntu bash -c "
        "'trap \"echo got-term; exit 42\" TERM; touch /work/ready; while :; do sleep 0.02; done'"
    )
    instance.until(lambda: (instance.home / "ready").exists())  # the container's own marker says its trap is set
    client.send_signal(signal.SIGTERM)
    out, _ = client.communicate(timeout=30)
    assert (client.returncode, out) == (42, "got-term\n")


@pytest.mark.parametrize(
    ("script", "code", "message"),
    [
        ("docker run --bogus ubuntu true", 125, "unknown flag: --bogus\nSee 'docker run --help'."),
        (
            "docker run --name x ubuntu true",
            125,
            "Invalid container name (x), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed",
        ),
        ("docker run -w rel ubuntu true", 125, "the working directory 'rel' is invalid"),
        ("docker run --env-file missing.env ubuntu true", 125, "docker: open missing.env: no such file or directory."),
        ("docker run ubuntu no-such-tool", 127, 'exec: "no-such-tool": executable file not found in $PATH'),
        ("docker run", 125, "'docker run' requires at least 1 argument"),
    ],
)
def test_refused_runs_fail_as_docker_does(instance, script: str, code: int, message: str) -> None:
    done = instance.sh(script)
    assert done.returncode == code
    assert message in done.stderr


def test_a_name_in_use_and_an_existing_cidfile_are_refused(instance) -> None:
    first = instance.ok(RUN_D.format(name="dup", opts="--cidfile cid", cmd="true")).strip()
    again = instance.sh(RUN_D.format(name="dup", opts="", cmd="true"))
    assert again.returncode == 125
    assert f'The container name "/dup" is already in use by container "{first}"' in again.stderr
    other = instance.sh(RUN_D.format(name="other", opts="--cidfile cid", cmd="true"))
    assert other.returncode == 125
    assert "Container ID file found, make sure the other container isn't running or delete cid." in other.stderr
    assert [c["Name"] for c in instance.containers()] == ["/dup"]
