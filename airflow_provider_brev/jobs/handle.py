"""The job a step follows, kept in the task's memory: what a resumed task, a retry and ``on_kill`` find it by.

A step keeps its job's handle (``{"instance_name", "instance_id", "job", ...}``, JSON: the job is a
:meth:`~airflow_provider_brev.core.jobs.remote.RemoteJob.to_dict`) before any wait, and forgets it once the job is
collected (:class:`~airflow_provider_brev.steps.service.StepService`). It is *kept*
(:meth:`~airflow_provider_brev.utils.task_memory.TaskMemory.keep`): XCom ``brev_job`` for the try and its
deferrals, and the task state store on Airflow 3.3+, where a retry finds the job of an earlier try.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_brev.utils.task_memory import MemoryAccessor

#: XCom key (and state store key) of a detached job's handle.
XCOM_JOB = "brev_job"
STATE_STORE_JOB_KEY = XCOM_JOB


class KeptJobHandle(MemoryAccessor):
    """The handle of the job a task follows (see the module docstring)."""

    def read(self) -> dict[str, Any] | None:
        """The detached job this task follows (this try's, else the one an earlier try kept), or ``None``."""
        return self.memory.kept(XCOM_JOB, dict)

    def stored(self) -> dict[str, Any] | None:
        """The job handle an earlier try kept in the task state store, or ``None``."""
        return self.memory.stored(STATE_STORE_JOB_KEY, dict)

    def keep(self, handle: dict[str, Any] | None) -> None:
        """Remember the job handle (``None``: the job was collected, forget it in the state store)."""
        self.memory.keep(XCOM_JOB, handle)
