"""What a task remembers across its tries and deferrals, and what it tells later tasks: one typed store.

Every XCom and task-state-store access of the provider goes through :class:`TaskMemory`, with one policy:

* **kept** values (a job handle, the instance a task created, recoveries used, the TAO resume point) are written
  to the task state store on Airflow 3.3+ (shared by every try of the task instance) *and* to XCom (read by the
  try's own deferrals and by later tasks); read from the state store first, XCom otherwise. XCom is cleared when a
  task retries, so before 3.3 they last one try;
* **told** values (the instance records later tasks read, the step's sync reports, the janitor's report) go to
  XCom only;
* a failed write is logged (one line, the reason), never raised: the remote side keeps what matters (deterministic
  job ids, the instance's id); a failed read counts as nothing.

The keys are the public XCom keys listed below; the values are JSON (no secret ever goes in).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import costs_in
from airflow_provider_brev.core.instances.records import InstanceRecord, records_in
from airflow_provider_brev.core.instances.recovery import recoveries_used

if TYPE_CHECKING:
    from collections.abc import Iterable

#: XCom key of the instance a task runs on (its name).
XCOM_INSTANCE_NAME = "instance_name"
#: XCom key of the instance the create task made, as ``brev ls`` listed it.
XCOM_INSTANCE = "instance"
#: XCom key (and state store key) of the records of the instances a task created
#: (:class:`~airflow_provider_brev.core.instances.records.InstanceRecord`: a create task one, a step a list).
XCOM_INSTANCE_RECORD = "brev_instance"
#: XCom key (and state store key) of a detached job's handle.
XCOM_JOB = "brev_job"
#: XCom key (and state store key) of the recovery count (``{"count": n, "instance": name}``).
XCOM_RECOVERIES = "brev_recoveries"
#: XCom key of what a step's syncs did.
XCOM_STEP_DATA = "brev_step_data"
#: XCom key (and state store key) of the checkpoint a TAO ``train`` launch resumed from ("" for a fresh start).
XCOM_RESUMED_FROM = "tao_resumed_from"
#: XCom key of a TAO step's image pull time.
XCOM_PULL_SECONDS = "tao_pull_seconds"
#: XCom key of the janitor's report.
XCOM_REPORT = "report"
#: XCom key of what a step or create task cost (:func:`~airflow_provider_brev.core.cost.step_cost`).
XCOM_COST = "brev_cost"
#: XCom key of a step's cost clock while it runs (its phases so far, wall-clock starts: it survives deferrals).
XCOM_COST_CLOCK = "brev_cost_clock"
#: XCom key of an instance's lifetime cost, reported by the delete task.
XCOM_LIFETIME_COST = "brev_lifetime_cost"

STATE_STORE_INSTANCE_KEY = XCOM_INSTANCE_RECORD
STATE_STORE_JOB_KEY = XCOM_JOB
STATE_STORE_RECOVERIES_KEY = XCOM_RECOVERIES


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
    def store(self) -> Any | None:
        """The Airflow 3.3+ task state store (shared by every try of the task instance), or ``None``."""
        return self.context.get("task_state_store") if hasattr(self.context, "get") else None

    @property
    def has_store(self) -> bool:
        return self.store is not None

    # -- the two mechanisms ----------------------------------------------------------------------
    def tell(self, key: str, value: Any) -> None:
        """Push ``value`` to this task's XCom under ``key`` (never raises)."""
        try:
            self.ti.xcom_push(key=key, value=value)
        except Exception as err:
            self.log.warning("Could not write %s to XCom (%s: %s).", key, type(err).__name__, err)

    def read(self, key: str, task_id: str | None = None) -> Any:
        """The XCom value of ``key`` pushed by ``task_id`` (default: this task) in this DAG run, or ``None``."""
        try:
            return self.ti.xcom_pull(task_ids=task_id or self.ti.task_id, key=key)
        except Exception:
            return None

    def keep(self, key: str, value: Any) -> None:
        """Remember ``value`` across tries (state store, Airflow 3.3+) and deferrals (XCom); ``None`` forgets it."""
        store = self.store
        if store is not None:
            try:
                if value is None:
                    store.delete(key)
                else:
                    store.set(key, value)
            except Exception as err:  # e.g. a 404 when Airflow no longer counts this try as running
                self.log.warning(
                    "Could not write %s to the task state store (%s: %s); the instance keeps what a retry needs.",
                    key,
                    type(err).__name__,
                    err,
                )
        if value is not None:
            self.tell(key, value)

    def kept(self, key: str) -> Any:
        """What :meth:`keep` remembered: the state store's value (earlier tries), else this try's XCom."""
        stored = self.stored(key)
        return stored if stored is not None else self.read(key)

    def stored(self, key: str) -> Any:
        """The state store's value of ``key`` only (an earlier try's), or ``None``."""
        store = self.store
        if store is None:
            return None
        try:
            return store.get(key)
        except Exception:
            return None

    # -- instances -------------------------------------------------------------------------------
    def records_of(self, task_id: str) -> list[InstanceRecord]:
        """Every instance record ``task_id`` pushed in this DAG run (one per map index, a step's list)."""
        return records_in(self.read(XCOM_INSTANCE_RECORD, task_id))

    def records_for(self, name: str, task_ids: Iterable[str]) -> list[InstanceRecord]:
        """Every record of instance ``name`` pushed by ``task_ids`` and this task, plus this task's kept one."""
        records: list[InstanceRecord] = []
        for task_id in dict.fromkeys([*task_ids, self.ti.task_id]):
            records += self.records_of(task_id)
        stored = self.stored_record()
        if stored is not None:
            records.append(stored)
        return [record for record in records if record.name == name]

    def stored_record(self) -> InstanceRecord | None:
        """The record an earlier try of this task kept in its state store, or ``None``."""
        return InstanceRecord.from_dict(self.stored(STATE_STORE_INSTANCE_KEY))

    def record_instance(self, record: InstanceRecord, *, alone: bool = False) -> None:
        """Remember that this task created (or adopted) ``record``'s instance: kept for its retries, told to later
        tasks. ``alone``: the task's only record (a create task), else added to its list (a step's re-creations)."""
        store = self.store
        if store is not None:
            try:
                store.set(STATE_STORE_INSTANCE_KEY, record.to_dict())
            except Exception as err:
                self.log.warning("Could not record instance %s in the task state store (%s).", record.name, err)
        if alone:
            self.tell(XCOM_INSTANCE_RECORD, record.to_dict())
            return
        mine = [r for r in self.records_of(self.ti.task_id) if r.id != record.id]
        self.tell(XCOM_INSTANCE_RECORD, [r.to_dict() for r in mine] + [record.to_dict()])

    def tell_instance(self, name: str, listed: dict[str, Any] | None = None) -> None:
        """Tell later tasks the instance this task runs on (and, for a create task, how ``brev ls`` listed it)."""
        self.tell(XCOM_INSTANCE_NAME, name)
        if listed is not None:
            self.tell(XCOM_INSTANCE, listed)

    # -- jobs, recoveries, data, TAO -------------------------------------------------------------
    def job_handle(self) -> dict[str, Any] | None:
        """The detached job this task follows (this try's, else the one an earlier try recorded)."""
        value = self.read(XCOM_JOB)
        if not isinstance(value, dict):
            value = self.stored(STATE_STORE_JOB_KEY)
        return value if isinstance(value, dict) else None

    def stored_job_handle(self) -> dict[str, Any] | None:
        """The job handle an earlier try kept in the task state store, or ``None``."""
        value = self.stored(STATE_STORE_JOB_KEY)
        return value if isinstance(value, dict) else None

    def keep_job_handle(self, handle: dict[str, Any] | None) -> None:
        """Remember the job handle (``None``: the job was collected, forget it in the state store)."""
        if handle is None:
            self.keep(STATE_STORE_JOB_KEY, None)
            return
        self.keep(XCOM_JOB, handle)

    def recoveries(self) -> int:
        """Instance recoveries this task instance made so far (all tries on 3.3+, this try before)."""
        return recoveries_used(self.stored(STATE_STORE_RECOVERIES_KEY), self.read(XCOM_RECOVERIES))

    def count_recovery(self, name: str, count: int) -> None:
        self.keep(XCOM_RECOVERIES, {"count": count, "instance": name})

    def sync_reports(self) -> dict[str, Any]:
        """What this try's syncs did so far (kept in XCom across deferrals)."""
        base: dict[str, Any] = {"inputs": [], "outputs": [], "output_syncs": 0}
        value = self.read(XCOM_STEP_DATA)
        if isinstance(value, dict):
            base.update({k: value[k] for k in base if k in value})
        return base

    def tell_sync_reports(self, reports: dict[str, Any]) -> None:
        self.tell(XCOM_STEP_DATA, reports)

    def resumed_from(self) -> str | None:
        """The checkpoint this try's TAO launch resumed from (``None``: a fresh start, or no launch yet)."""
        value = self.read(XCOM_RESUMED_FROM)
        return value if isinstance(value, str) and value else None

    def tell_resumed_from(self, checkpoint: str | None) -> None:
        self.tell(XCOM_RESUMED_FROM, checkpoint or "")  # "" for none: Airflow 3.0's XCom API refuses a null

    def tell_pull_seconds(self, seconds: float) -> None:
        self.tell(XCOM_PULL_SECONDS, seconds)

    def tell_report(self, report: dict[str, Any]) -> None:
        self.tell(XCOM_REPORT, report)

    # -- cost ------------------------------------------------------------------------------------
    def update_record(self, record: InstanceRecord) -> None:
        """Tell later tasks a changed version of this task's only record (a create task: its ready time)."""
        self.tell(XCOM_INSTANCE_RECORD, record.to_dict())

    def own_record(self) -> InstanceRecord | None:
        """The record this task told later tasks (a create task's), or ``None``."""
        records = self.records_of(self.ti.task_id)
        return records[0] if len(records) == 1 else None

    def cost_clock(self) -> dict[str, Any] | None:
        """This try's cost clock (kept in XCom across its deferrals), or ``None`` before it started."""
        value = self.read(XCOM_COST_CLOCK)
        return value if isinstance(value, dict) else None

    def tell_cost_clock(self, clock: dict[str, Any]) -> None:
        self.tell(XCOM_COST_CLOCK, clock)

    def tell_cost(self, cost: dict[str, Any]) -> None:
        self.tell(XCOM_COST, cost)

    def tell_lifetime_cost(self, cost: dict[str, Any]) -> None:
        self.tell(XCOM_LIFETIME_COST, cost)

    def costs_of(self, task_ids: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
        """``(task id, cost)`` of every task in ``task_ids`` that reported one in this DAG run (one per map index)."""
        return [(task_id, cost) for task_id in task_ids for cost in costs_in(self.read(XCOM_COST, task_id))]

    def lifetime_costs_of(self, task_ids: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
        """``(task id, lifetime)`` of every delete task in ``task_ids`` that reported an instance's lifetime."""
        found = []
        for task_id in task_ids:
            value = self.read(XCOM_LIFETIME_COST, task_id)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict) and "total_seconds" in item:
                    found.append((task_id, item))
        return found


def read_instance_records(context: Any, create_task_id: str) -> list[InstanceRecord]:
    """Every record the task ``create_task_id`` pushed in this DAG run (one per map index, a step's list).

    :param context: the calling task's context.
    :param create_task_id: the task that recorded them.
    """
    return TaskMemory(context).records_of(create_task_id)


def read_instance_record(context: Any, create_task_id: str, instance_name: str | None = None) -> InstanceRecord | None:
    """The record of the instance the create task ``create_task_id`` made (or adopted) in this DAG run.

    :param context: the calling task's context.
    :param create_task_id: task id of the :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator`.
    :param instance_name: pick the record of this instance (a mapped create task pushes one per map index).
    :return: the record, or ``None`` when the task recorded none (it failed before creating anything, or it ran
        with a provider version that did not record).
    """
    records = read_instance_records(context, create_task_id)
    if instance_name is not None:
        records = [r for r in records if r.name == instance_name]
    return records[0] if records else None
