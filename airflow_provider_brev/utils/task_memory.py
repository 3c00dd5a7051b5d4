"""What a task remembers across its tries and deferrals, and what it tells later tasks: one generic task memory.

Every XCom and task-state-store access of a running task goes through :class:`TaskMemory`, with one policy:

* **kept** values (:meth:`TaskMemory.keep`) are written to the task state store on Airflow 3.3+ (shared by every
  try of the task instance) *and* to XCom (read by the try's own deferrals and by later tasks). XCom is cleared
  when a task retries, so before 3.3 they last one try;
* **told** values (:meth:`TaskMemory.tell`) go to XCom only;
* a failed write is logged (one WARNING line, the reason), never raised: the remote side keeps what matters
  (deterministic job ids, the instance's id); a failed read counts as nothing.

The memory knows keys and JSON values, not what they mean: each concept reads and writes its facts through a small
typed accessor over it (a :class:`MemoryAccessor`), beside the concept's I/O, which holds the concept's public XCom
keys and their encoding:

============================================  ===============================================================
facts                                         accessor
============================================  ===============================================================
the instance records, the instance a task      :class:`~airflow_provider_brev.instances.records.InstanceRecords`
runs on
the recoveries a task instance made            :class:`~airflow_provider_brev.instances.recovery.RecoveryCount`
the janitor's report                           :class:`~airflow_provider_brev.instances.sweep.SweepReport`
the job a step follows                         :class:`~airflow_provider_brev.jobs.handle.KeptJobHandle`
what a step's syncs did                        :class:`~airflow_provider_brev.staging.step_data.SyncReports`
the cost clock, costs, lifetime costs          :class:`~airflow_provider_brev.cost.ledger.CostLedger`
the TAO resume point, the image pull time      :class:`~airflow_provider_brev.steps.tao.TaoFacts`
============================================  ===============================================================

No secret ever goes in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from collections.abc import Iterable

T = TypeVar("T")


class TaskMemory:
    """The memory of one running task (see the module docstring).

    :param context: the task's context (``ti``, and ``task_state_store`` on Airflow 3.3+).
    :param log: the task's logger (failed writes are logged there).
    """

    def __init__(self, context: Any, log: Any = None) -> None:
        self.context = context
        self.log = log if log is not None else logging.getLogger(__name__)

    @property
    def ti(self) -> Any:
        return self.context["ti"]

    @property
    def task_id(self) -> str:
        return str(self.ti.task_id)

    @property
    def store(self) -> Any | None:
        """The Airflow 3.3+ task state store (shared by every try of the task instance), or ``None``."""
        return self.context.get("task_state_store") if hasattr(self.context, "get") else None

    @property
    def has_store(self) -> bool:
        return self.store is not None

    # -- told: XCom ------------------------------------------------------------------------------
    def tell(self, key: str, value: Any) -> None:
        """Push ``value`` to this task's XCom under ``key`` (never raises)."""
        try:
            self.ti.xcom_push(key=key, value=value)
        except Exception as err:
            self.log.warning("Could not write %s to XCom (%s: %s).", key, type(err).__name__, err)

    @overload
    def read(self, key: str, kind: None = None) -> Any: ...

    @overload
    def read(self, key: str, kind: type[T]) -> T | None: ...

    def read(self, key: str, kind: type[Any] | None = None) -> Any:
        """This task's XCom value of ``key`` in this DAG run, or ``None`` (also when it is not a ``kind``)."""
        return _of_kind(self._pull(self.task_id, key), kind)

    def read_of(self, key: str, task_ids: Iterable[str]) -> list[tuple[str, Any]]:
        """``(task id, value)`` of every task of ``task_ids`` that pushed ``key`` in this DAG run, in that order (a
        mapped task's value is the list of its map indexes' values)."""
        found = []
        for task_id in task_ids:
            value = self._pull(task_id, key)
            if value is not None:
                found.append((task_id, value))
        return found

    def _pull(self, task_id: str, key: str) -> Any:
        try:
            return self.ti.xcom_pull(task_ids=task_id, key=key)
        except Exception:
            return None

    # -- kept: the task state store, and XCom -------------------------------------------------------
    def keep(self, key: str, value: Any) -> None:
        """Remember ``value`` across tries (state store, Airflow 3.3+) and deferrals (XCom); ``None`` forgets it
        in the state store."""
        self.remember(key, value)
        if value is not None:
            self.tell(key, value)

    def kept(self, key: str, kind: type[T]) -> T | None:
        """What :meth:`keep` remembered: this try's (XCom, which lasts its deferrals), else an earlier try's (the
        state store); ``None`` when neither holds a ``kind``."""
        value = self.read(key, kind)
        return value if value is not None else self.stored(key, kind)

    def remember(self, key: str, value: Any, *, failure: str | None = None) -> None:
        """Write ``value`` to the task state store only (``None`` deletes it); nothing before Airflow 3.3.

        :param failure: the warning a failed write logs, followed by the error (default: one naming ``key``).
        """
        store = self.store
        if store is None:
            return
        try:
            if value is None:
                store.delete(key)
            else:
                store.set(key, value)
        except Exception as err:  # e.g. a 404 when Airflow no longer counts this try as running
            if failure is not None:
                self.log.warning("%s (%s).", failure, err)
            else:
                self.log.warning(
                    "Could not write %s to the task state store (%s: %s); the instance keeps what a retry needs.",
                    key,
                    type(err).__name__,
                    err,
                )

    @overload
    def stored(self, key: str, kind: None = None) -> Any: ...

    @overload
    def stored(self, key: str, kind: type[T]) -> T | None: ...

    def stored(self, key: str, kind: type[Any] | None = None) -> Any:
        """The state store's value of ``key`` only (an earlier try's), or ``None`` (also when it is not a
        ``kind``)."""
        store = self.store
        if store is None:
            return None
        try:
            return _of_kind(store.get(key), kind)
        except Exception:
            return None


@dataclass(frozen=True)
class MemoryAccessor:
    """The base of a concept's typed accessor (see the module docstring): its facts in one task's memory.

    :param memory: the task's memory.
    """

    memory: TaskMemory


def _of_kind(value: Any, kind: type[Any] | None) -> Any:
    return value if kind is None or isinstance(value, kind) else None
