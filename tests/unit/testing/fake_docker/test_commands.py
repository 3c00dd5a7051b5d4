"""The fake docker's command table: Docker's own answers for words it does not know, a clear refusal for Docker
commands it does not simulate, management commands as aliases, and every call recorded."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("script", "code", "stderr"),
    [
        ("docker frob", 1, "docker: 'frob' is not a docker command.\nSee 'docker --help'\n"),
        (
            "docker exec box true",
            1,
            "docker: 'exec' is a docker command the Brev simulator does not simulate (docs/simulator.md)\n",
        ),
        (
            "docker container prune",
            1,
            "docker: 'container prune' is a docker command the Brev simulator does not simulate (docs/simulator.md)\n",
        ),
        ("docker ps --bogus", 125, "unknown flag: --bogus\nSee 'docker ps --help'.\n"),
        ("docker stop -x box", 125, "unknown shorthand flag: 'x' in -x\nSee 'docker stop --help'.\n"),
        ("docker stop", 1, '"docker stop" requires at least 1 argument.'),
    ],
)
def test_what_docker_would_refuse_fails_as_docker_fails_it(instance, script: str, code: int, stderr: str) -> None:
    done = instance.sh(script)
    assert done.returncode == code
    assert done.stderr.startswith(stderr)


def test_management_commands_reach_the_same_containers(instance) -> None:
    cid = instance.ok("docker container run -d --name managed-1 ubuntu sleep 300").strip()
    assert instance.ok("docker container ls -q --no-trunc") == f"{cid}\n"
    assert instance.ok("docker container stop managed-1") == "managed-1\n"
    assert instance.ok("docker container rm managed-1") == "managed-1\n"
    assert instance.ok("docker ps -aq") == ""
    assert "Server Version" in instance.ok("docker system info")


def test_every_call_is_recorded_with_its_exit_code(instance) -> None:
    instance.sh("docker run -d --name rec-1 --label k=v -e TOKEN=hidden ubuntu true; docker wait rec-1; docker nope")
    calls = instance.sim.docker_calls(instance=instance.id)
    assert [(c["subcommand"], c["exit_code"]) for c in calls] == [("run", 0), ("wait", 0), ("nope", 1)]
    assert calls[0]["labels"] == {"k": "v"} and calls[0]["detach"] is True
    assert "TOKEN=<redacted>" in calls[0]["argv"] and calls[0]["inline_env_values"] is True


def test_the_daemon_down_knob_fails_container_commands(instance) -> None:
    instance.sim.set_docker(daemon_down=True)
    done = instance.sh("docker ps")
    assert done.returncode == 1 and "Cannot connect to the Docker daemon" in done.stderr
