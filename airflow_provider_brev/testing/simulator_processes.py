"""The processes of one Brev simulator: what runs in its sandboxes, the ``ssh-agent`` processes its CLI left behind
and everything its CLI started, to count after a run and to stop when the simulator is cleaned up.

Processes are found by the environment they carry (``/proc/<pid>/environ``; a zombie's reads empty, so only live ones
count): sandbox commands ``BREV_SIM_ROOT``/``BREV_SIM_INSTANCE``, the fake ``brev`` and ``ssh`` ``FAKE_BREV_STATE``
(what the environment of a process using the simulator holds), agents ``BREV_SIM_SSH_AGENT``
(:mod:`~airflow_provider_brev.testing.fake_brev.ssh_agent`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.testing.fake_brev import store as _st
from airflow_provider_brev.testing.fake_brev.ssh_agent import AGENT_MARKER, AGENTS_FILE
from airflow_provider_brev.testing.fake_common import read_jsonl

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["SimulatorProcesses"]


class SimulatorProcesses:
    """The process half of :class:`~airflow_provider_brev.testing.simulator.BrevSimulator` (its base class)."""

    root: Path

    if TYPE_CHECKING:

        def instance(self, name: str) -> dict[str, Any] | None: ...

        def sandbox(self, name: str) -> Path: ...

    def sandbox_pids(self, name: str | None = None) -> list[int]:
        """PIDs still running in one instance's sandbox (or in any sandbox of this root)."""
        if name is None:
            return _st.marked_pids(("BREV_SIM_ROOT", str(self.root)))
        cur = self.instance(name)
        ident = cur["id"] if cur else self.sandbox(name).parent.name
        return _st.marked_pids(("BREV_SIM_INSTANCE", ident))

    def agents(self) -> list[dict[str, Any]]:
        """Every ``ssh-agent`` the CLI started (alive or not), oldest first: ``pid``, ``brev_pid``, ``alias``,
        ``announced`` (printed as ``Agent pid N``), ``ts``."""
        return read_jsonl(str(self.root / AGENTS_FILE))

    def agent_pids(self) -> list[int]:
        """The ``ssh-agent`` processes the CLI started that are still running (a real one never ends by itself)."""
        return _st.marked_pids((AGENT_MARKER, str(self.root)))

    def stop_agents(self) -> int:
        """Stop every ``ssh-agent`` the CLI left running; returns how many were."""
        return _st.kill_marked((AGENT_MARKER, str(self.root)))

    def processes(self) -> list[int]:
        """Every live process of this simulator: the fake ``brev`` and ``ssh`` (and anything they started, such as
        an agent), and the commands running in its sandboxes. After a run whose instances are gone: none."""
        root = str(self.root)
        return _st.marked_pids(("FAKE_BREV_STATE", root), ("BREV_SIM_ROOT", root), (AGENT_MARKER, root))

    def kill_all(self) -> int:
        """Kill every process started in any sandbox of this simulator and every ``ssh-agent`` its CLI left running;
        returns how many were killed."""
        return _st.kill_marked(("BREV_SIM_ROOT", str(self.root)), (AGENT_MARKER, str(self.root)))
