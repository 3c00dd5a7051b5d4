"""A simulated instance's shell for the fake ``docker``: the sandbox environment ``brev exec`` gives a command
(``BREV_SIM_ROOT``/``BREV_SIM_INSTANCE``, the simulator's tools first on PATH), without the CLI around it."""

from __future__ import annotations

import json
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.testing.simulator import BrevSimulator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


class Instance:
    """One simulated instance: ``sh(script)`` runs bash there; ``containers()`` is what its docker holds."""

    def __init__(self, sim: BrevSimulator, instance_id: str, home: Path) -> None:
        self.sim, self.id, self.home = sim, instance_id, home
        self.env = {
            "PATH": f"{sim.tools_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "BREV_SIM_ROOT": str(sim.root),
            "BREV_SIM_INSTANCE": instance_id,
            "BREV_SIM_INSTANCE_NAME": "sim-box",
        }

    def sh(self, script: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", script],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, script: str) -> str:
        done = self.sh(script)
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return done.stdout

    def start(self, script: str) -> subprocess.Popen[str]:
        """``script`` running in the background (in a process group of its own)."""
        return subprocess.Popen(
            ["bash", "-c", script],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            process_group=0,
        )

    def until(self, condition: Callable[[], object], timeout: float = 60) -> None:
        """Return once ``condition()`` holds (a state the simulator or a container reports), fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "the condition never held"
            time.sleep(0.02)

    def containers(self) -> list[dict]:
        return self.sim.docker_containers(self.id)

    def processes(self) -> list[int]:
        """The simulator's live processes (docker clients, monitors, containers)."""
        return self.sim.processes()


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    sim = BrevSimulator(tmp_path / "sim").install()
    instance_id = "inst0001"
    inst_dir = sim.root / "instances" / instance_id
    (inst_dir / "home").mkdir(parents=True)
    meta = {"id": instance_id, "name": "sim-box", "gpu_count": 2, "vram_per_gpu_gb": 48}
    (inst_dir / "meta.json").write_text(json.dumps(meta))
    box = Instance(sim, instance_id, inst_dir / "home")
    try:
        yield box
    finally:
        sim.kill_all()
