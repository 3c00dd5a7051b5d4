"""``brev stop`` / ``brev start`` in the fake CLI, against reference/brev-cli.md §2.8 and §8, in both profiles.

A stopped instance keeps its ``$HOME`` (images, synced data) and bills only its disk: the simulator's billing
ledger (``BrevSimulator.billing()``) counts running and stopped seconds apart. Driven through a real subprocess.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from integration.chaos.chaos_helpers import wait_until

if TYPE_CHECKING:
    from airflow_provider_brev.testing import BrevSimulator

STOPPABLE = "g6e.xlarge"
NOT_STOPPABLE = "gpu_1x_h100_pcie"


def brev(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    kwargs: dict = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(["brev", *args], capture_output=True, text=True, timeout=60, check=False, **kwargs)


def status(sim: BrevSimulator, name: str) -> str | None:
    inst = sim.instance(name)
    return None if inst is None else inst["status"]


#: STOPPING lasts this long in simulated time: a status read right after ``brev stop`` must see STOPPING however
#: long a busy machine took to get there (a 0.3 s stop could end first); the clock is moved on explicitly.
STOP_SECONDS = 600


def until(sim: BrevSimulator, name: str, wanted: str) -> None:
    """Move the simulated clock on until ``name`` has status ``wanted`` (no wall-clock wait)."""
    for _ in range(100):
        if status(sim, name) == wanted:
            return
        sim.advance(STOP_SECONDS / 50)
    raise AssertionError(f"{name} never reached {wanted}: {status(sim, name)}")


def seeded(sim: BrevSimulator, name: str, instance_type: str = STOPPABLE) -> None:
    sim.set_timings(stop_seconds=STOP_SECONDS)
    sim.login()
    sim.create_instance_directly(name, instance_type=instance_type, ssh_config_home=sim.home)


def test_stop_keeps_home_and_ends_the_processes(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    seeded(sim, "warm")
    assert brev("exec", "warm", "echo cached > image.tar; setsid nohup sleep 300 >/dev/null 2>&1 &").returncode == 0
    # `brev exec` returns once bash does; the detached child may still be starting
    wait_until(lambda: sim.sandbox_pids("warm"), what="the detached child to run in the sandbox")
    res = brev("stop", "warm")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "warm\n"  # piped: the names
    assert status(sim, "warm") == "STOPPING"
    assert sim.sandbox_pids("warm") == []
    until(sim, "warm", "STOPPED")
    assert (sim.sandbox("warm") / "image.tar").read_text() == "cached\n"


def test_stop_refuses_a_type_that_cannot_stop(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    seeded(sim, "h100", NOT_STOPPABLE)
    res = brev("stop", "h100")
    assert res.returncode == 1
    assert 'instance "h100" does not support stop.' in res.stderr
    assert status(sim, "h100") == "RUNNING"


def test_stop_all_skips_what_cannot_stop(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    seeded(sim, "a")
    sim.create_instance_directly("b", instance_type=NOT_STOPPABLE)
    res = brev("stop", "--all")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "a\n"
    assert (status(sim, "a"), status(sim, "b")) == ("STOPPING", "RUNNING")


def test_start_brings_a_stopped_instance_back_with_its_home(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    seeded(sim, "warm")
    assert brev("exec", "warm", "echo cached > image.tar").returncode == 0
    assert brev("stop", "warm").returncode == 0
    until(sim, "warm", "STOPPED")
    res = brev("start", "warm")  # without -d: waits for RUNNING
    assert res.returncode == 0, res.stderr
    assert "Instance warm is starting." in res.stdout
    assert status(sim, "warm") == "RUNNING"
    out = brev("exec", "warm", "cat image.tar")
    assert out.returncode == 0, out.stderr
    assert "cached" in out.stdout


def test_start_detached_returns_while_starting(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    sim.set_timings(start_seconds=30)
    seeded(sim, "warm")
    assert brev("stop", "warm").returncode == 0
    until(sim, "warm", "STOPPED")
    res = brev("start", "-d", "warm")
    assert res.returncode == 0, res.stderr
    assert status(sim, "warm") == "STARTING"


def test_start_of_what_is_not_stopped_or_not_there(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    seeded(sim, "up")
    res = brev("start", "up")
    assert res.returncode == 1
    assert "Instance is not stopped status=RUNNING" in res.stderr
    res = brev("start", "nobody")  # taken for a local path: the released CLI exits 0
    assert res.returncode == 0
    assert "tried to start with local path but path not found" in res.stdout


def test_a_stopped_instance_bills_its_disk_not_its_machine(brev_sim_both: BrevSimulator) -> None:
    sim = brev_sim_both
    seeded(sim, "warm")
    sim.set_timings(stop_seconds=5)
    sim.advance(100)
    assert brev("stop", "warm").returncode == 0
    sim.advance(1000)
    (bill,) = [b for b in sim.billing() if b["name"] == "warm"]
    assert 104 < bill["running_seconds"] < 108  # 100 s running + 5 s STOPPING
    assert 994 < bill["stopped_seconds"] < 997
    assert brev("start", "warm").returncode == 0
    assert brev("delete", "warm").returncode == 0
    sim.advance(10)
    assert sim.instance("warm") is None
    (bill,) = [b for b in sim.billing() if b["name"] == "warm"]  # kept after the instance is gone
    assert 994 < bill["stopped_seconds"] < 997
    assert bill["running_seconds"] > 105


def test_a_slow_start_is_held_before_its_request_until_its_gate_opens(brev_sim_both: BrevSimulator, tmp_path) -> None:
    """``slow_start``: the next start waits before its PUT, so another start can reach the instance first."""
    sim = brev_sim_both
    seeded(sim, "held")
    assert brev("stop", "held").returncode == 0
    until(sim, "held", "STOPPED")
    gate = tmp_path / "gate"
    sim.set_fault("slow_start", seconds=300, until_file=str(gate))
    held = subprocess.Popen(["brev", "start", "-d", "held"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: not sim.faults(), what="the held start to take the fault")
    assert status(sim, "held") == "STOPPED"  # no request yet
    other = brev("start", "-d", "held")
    assert other.returncode == 0, other.stderr
    gate.touch()
    _, err = held.communicate(timeout=60)
    assert held.returncode == 1
    assert "Instance is not stopped status=STARTING" in err
