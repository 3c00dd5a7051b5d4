"""A container's monitor: it records the exit code (``128 + signal`` when a signal ended it), ends the rest of
the container's processes with it, and a container whose monitor is gone (the instance stopped or was deleted)
reads as exited with code 255, as Docker reports containers after the host went down."""

from __future__ import annotations

import signal

from airflow_provider_brev.testing.fake_docker.containers import LOST_EXIT_CODE, describe_exit


def test_the_container_s_other_processes_end_with_it(instance) -> None:
    script = (
        "bash -c 'sleep 300 & echo $! > /work/child; touch /work/up; while [ ! -e /work/gate ]; do sleep 0.02; done'"
    )
    instance.ok(f"docker run -d --name family-1 -v $HOME:/work ubuntu {script}")
    instance.until(lambda: (instance.home / "up").exists())
    child = int((instance.home / "child").read_text())
    (instance.home / "gate").touch()
    assert instance.ok("docker wait family-1") == "0\n"
    # the monitor SIGKILLed the container's process group when its main process ended: the child goes too
    instance.until(lambda: not _alive(child), timeout=10)
    assert instance.processes() == []


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, already dead, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b") ", 1)[1][:1] != b"Z"
    except OSError:
        return False


def test_a_container_whose_monitor_is_gone_reads_as_exited_255(instance) -> None:
    instance.ok("docker run -d --name orphan-1 ubuntu sleep 300")
    assert instance.ok("docker inspect -f '{{.State.Status}}' orphan-1") == "running\n"
    instance.sim.kill_all()  # what stopping or deleting the instance does to its processes
    shown = instance.ok("docker inspect -f '{{.State.Status}} {{.State.ExitCode}} {{.State.Pid}}' orphan-1")
    assert shown == f"exited {LOST_EXIT_CODE} 0\n"
    assert instance.ok("docker stop orphan-1") == "orphan-1\n"


def test_a_signal_death_is_recorded_as_128_plus_the_signal(instance) -> None:
    instance.ok("docker run -d --name sig-1 ubuntu sleep 300")
    assert instance.ok("docker kill -s USR1 sig-1") == "sig-1\n"
    assert instance.ok("docker wait sig-1") == f"{128 + signal.SIGUSR1}\n"
    assert describe_exit(128 + signal.SIGUSR1) == f"Exited ({128 + signal.SIGUSR1})"
