"""Test helpers shared by ``core/instances/test_readiness.py``, ``core/instances/test_ssh_probe.py`` (one definition,
imported by each)."""

from __future__ import annotations

from airflow_provider_brev.core.instances.readiness import ListInstance, ReadinessCheck, RunProbe
from airflow_provider_brev.core.instances.ssh_probe import ReadHostEntries, RefreshHostEntries, RunSshProbe
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.output import BrevInstance
from unit.machine_steps import step

ENTRY = "# included in ~/.ssh/config\nHost w-1\n  Hostname 10.0.0.1\nHost w-1-host\n  Hostname 10.0.0.1\n"


REFUSED = ProcessResult(255, [], ["ssh: connect to host 10.0.0.1 port 22: Connection refused"])


def ready_listing() -> BrevInstance:
    return BrevInstance("w-1", "id-1", "RUNNING", build_status="COMPLETED", shell_status="READY")


def echo(call: RunSshProbe | RunProbe, docker: bool = True) -> ProcessResult:
    nonce = call.command.split()[1].rstrip(";")
    return ProcessResult(0, [nonce, f"{nonce}:docker"] if docker else [nonce], [])


def listed(machine: ReadinessCheck, now: float = 0.0) -> object:
    assert isinstance(step(machine, now), ListInstance)
    machine.receive(ready_listing(), now)
    return step(machine, now)


def refreshed_entry(machine: ReadinessCheck, now: float = 0.0) -> None:
    """Drive ``machine`` to where it has just read the entry ``brev refresh`` wrote in this check."""
    listed(machine, now)
    machine.receive(None, now)
    assert isinstance(step(machine, now), RefreshHostEntries)
    machine.receive(ProcessResult(0, [], []), now)
    assert isinstance(step(machine, now), ReadHostEntries)
    machine.receive(ENTRY, now)
