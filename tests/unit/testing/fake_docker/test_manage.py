"""``inspect``, ``ps``, ``logs``, ``wait``, ``stop``, ``kill``, ``rm`` and ``images`` of the fake docker: every
call a separate ``docker`` process, all of them seeing the same containers."""

from __future__ import annotations

import json

import pytest

GATED = "bash -c 'touch /work/up-$NAME; while [ ! -e /work/gate ]; do sleep 0.02; done; exit 7'"


def run_gated(instance, name: str, opts: str = "") -> str:
    """A detached container that runs until the ``gate`` file exists, then exits 7."""
    cid = instance.ok(f"docker run -d --name {name} -e NAME={name} -v $HOME:/work {opts} ubuntu {GATED}").strip()
    instance.until(lambda: (instance.home / f"up-{name}").exists())
    return cid


def test_stop_sends_sigterm_and_keeps_the_exit_code(instance) -> None:
    run_gated(instance, "web-1")
    assert instance.ok("docker inspect -f '{{.State.Running}} {{.State.Pid}}' web-1").startswith("true ")
    assert instance.ok("docker stop -t 30 web-1") == "web-1\n"
    assert instance.ok("docker inspect -f '{{.State.Status}} {{.State.ExitCode}} {{.State.Running}}' web-1") == (
        "exited 143 false\n"
    )
    assert instance.ok("docker wait web-1") == "143\n"
    assert instance.ok("docker stop web-1") == "web-1\n"  # stopping a stopped container is no error
    assert instance.processes() == []


def test_stop_kills_a_container_that_ignores_sigterm_after_the_grace(instance) -> None:
    stubborn = "bash -c 'trap \"\" TERM; touch /work/up; while :; do sleep 0.02; done'"
    instance.ok(f"docker run -d --name stubborn-1 -v $HOME:/work ubuntu {stubborn}")
    instance.until(lambda: (instance.home / "up").exists())
    assert instance.ok("docker stop --time 1 stubborn-1") == "stubborn-1\n"
    assert instance.ok("docker inspect -f '{{.State.ExitCode}}' stubborn-1") == "137\n"
    assert instance.processes() == []


def test_a_container_that_ends_by_itself_keeps_its_code_and_its_logs(instance) -> None:
    run_gated(instance, "job-1")
    (instance.home / "gate").touch()
    assert instance.ok("docker wait job-1") == "7\n"
    assert instance.ok("docker ps -q") == ""
    assert instance.ok("docker ps -a --format '{{.Names}} {{.State}}'") == "job-1 exited\n"
    assert instance.ok("docker ps -a --format '{{.Status}}'").startswith("Exited (7) ")


def test_rm_refuses_a_running_container_unless_forced(instance) -> None:
    run_gated(instance, "busy-1")
    refused = instance.sh("docker rm busy-1")
    assert refused.returncode == 1
    assert 'cannot remove container "/busy-1": container is running' in refused.stderr
    assert instance.ok("docker rm -f busy-1") == "busy-1\n"
    assert instance.containers() == []
    assert instance.processes() == []
    assert instance.sh("docker rm -f busy-1").returncode == 0  # forced: a missing container is no error
    missing = instance.sh("docker rm busy-1")
    assert (missing.returncode, missing.stderr) == (1, "Error response from daemon: No such container: busy-1\n")


def test_kill_sends_the_signal_it_is_given(instance) -> None:
    run_gated(instance, "kill-1")
    assert instance.ok("docker kill -s HUP kill-1") == "kill-1\n"
    assert instance.ok("docker wait kill-1") == "129\n"
    not_running = instance.sh("docker kill kill-1")
    assert not_running.returncode == 1 and "is not running" in not_running.stderr


def test_ps_filters_by_label_name_id_and_status(instance) -> None:
    vision = run_gated(instance, "vision-1", "--label team=vision --label tier=gpu")
    run_gated(instance, "audio-1", "--label team=audio")
    ps = "docker ps --format '{{.Names}}' "
    assert instance.ok(ps + "--filter label=team=vision") == "vision-1\n"
    assert instance.ok(ps + "--filter label=team") == "audio-1\nvision-1\n"  # newest first
    assert instance.ok(ps + "--filter label=team=vision --filter label=tier=cpu") == ""  # labels: all must match
    assert instance.ok(ps + "--filter name=audio --filter name=vision") == "audio-1\nvision-1\n"  # names: any
    assert instance.ok(ps + f"--filter id={vision[:8]}") == "vision-1\n"
    assert instance.ok("docker ps -q --no-trunc --filter name=vision") == f"{vision}\n"
    assert instance.ok("docker ps --format '{{.Label \"tier\"}}|{{.Labels}}' -f name=vision") == (
        "gpu|team=vision,tier=gpu\n"
    )
    table = instance.ok("docker ps --format 'table {{.Names}}\\t{{.State}}' -f name=audio").splitlines()
    assert table[0].split() == ["NAMES", "STATE"] and table[1].split() == ["audio-1", "running"]
    (row,) = [json.loads(line) for line in instance.ok("docker ps --format json -f name=audio").splitlines()]
    assert row["Names"] == "audio-1" and row["Labels"] == "team=audio"
    refused = instance.sh("docker ps --filter ancestor=ubuntu")
    assert (refused.returncode, refused.stderr) == (1, "Error response from daemon: invalid filter 'ancestor'\n")


def test_inspect_prints_json_and_reports_what_it_cannot_find(instance) -> None:
    cid = run_gated(instance, "seen-1", "--label a=b")
    done = instance.sh("docker inspect seen-1 nope-1")
    assert done.returncode == 1
    assert done.stderr == "Error: No such object: nope-1\n"
    (info,) = json.loads(done.stdout)
    assert info["Id"] == cid and info["State"]["Status"] == "running" and info["Config"]["Labels"] == {"a": "b"}
    (image,) = json.loads(instance.ok("docker inspect --type image ubuntu"))
    assert image["RepoTags"] == ["ubuntu:latest"]
    bad = instance.sh("docker inspect -f '{{.Nope}}' seen-1")
    assert bad.returncode == 1 and 'map has no entry for key "Nope"' in bad.stderr
    assert instance.ok("docker container inspect -f '{{.Name}}' seen-1") == "/seen-1\n"


def test_logs_follow_until_the_container_ends(instance) -> None:
    script = "bash -c 'echo one; echo warn >&2; while [ ! -e /work/gate ]; do sleep 0.02; done; echo two'"
    instance.ok(f"docker run -d --name talk-1 -v $HOME:/work ubuntu {script}")
    follower = instance.start("docker logs -f talk-1")
    instance.until(lambda: "one" in instance.sh("docker logs talk-1").stdout)
    (instance.home / "gate").touch()
    out, err = follower.communicate(timeout=60)
    assert (follower.returncode, out, err) == (0, "one\ntwo\n", "warn\n")
    assert instance.ok("docker logs --tail 1 talk-1") == "two\n"


def test_images_lists_what_was_pulled(instance) -> None:
    instance.ok("docker pull ubuntu:22.04 && docker pull nvcr-mirror.example.com/team/tool:1")
    rows = instance.ok("docker images --format '{{.Repository}}:{{.Tag}}'").splitlines()
    assert sorted(rows) == ["nvcr-mirror.example.com/team/tool:1", "ubuntu:22.04"]
    assert instance.ok("docker image ls -q ubuntu") == instance.ok("docker images -q ubuntu")


@pytest.mark.parametrize("sub", ["stop", "rm", "wait", "kill"])
def test_commands_on_a_missing_container_fail_as_docker_does(instance, sub: str) -> None:
    done = instance.sh(f"docker {sub} nope-1")
    assert (done.returncode, done.stderr) == (1, "Error response from daemon: No such container: nope-1\n")
