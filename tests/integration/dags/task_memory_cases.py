"""DAGs exercised by the task memory's unit tests (tests/unit/utils/test_task_memory.py and the accessors' tests at
their mirrored paths): real tasks of a real DAG run write and read their facts through the task memory, so XCom
and, on Airflow 3.3+, the task state store are Airflow's own.

Each task returns what it read (JSON) for the test to compare with what it wrote; a task that keeps something and
fails on its first try reads it back on its second (``retries=1``, no delay). Mapped tasks are classic operators
(``PythonOperator.partial(...).expand(...)``): the tests run a deep copy of each DAG, which keeps their expansion.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, get_current_context, task

START = datetime(2026, 1, 1)
RETRY_ONCE = {"retries": 1, "retry_delay": timedelta(0)}
#: A value neither XCom nor the task state store can serialise: its writes fail.
UNWRITABLE = object()


def _memory() -> Any:
    """The running task's memory, logging where an operator's does (the task's own logger)."""
    from airflow_provider_brev.utils.task_memory import TaskMemory

    context = get_current_context()
    return TaskMemory(context, context["task"].log)


def _try_number() -> int:
    return int(get_current_context()["ti"].try_number)


# -- the generic memory --------------------------------------------------------------------------------------------
with DAG(dag_id="memory_generic", schedule=None, start_date=START):

    @task(multiple_outputs=False)
    def teller() -> dict:
        memory = _memory()
        memory.tell("memo_note", {"n": 1})
        memory.tell("memo_unwritable", UNWRITABLE)  # logged, not raised
        memory.keep("memo_kept", {"v": 1})
        memory.remember("memo_stored_only", ["s"])
        memory.remember("memo_unstorable", UNWRITABLE)  # logged, not raised
        memory.remember("memo_unrecordable", UNWRITABLE, failure="Could not record memo in the task state store")
        return {
            "read": memory.read("memo_note"),
            "read_dict": memory.read("memo_note", dict),
            "read_other_kind": memory.read("memo_note", list),
            "unwritten": memory.read("memo_unwritable"),
            "kept": memory.kept("memo_kept", dict),
            "stored": memory.stored("memo_kept"),
            "stored_other_kind": memory.stored("memo_kept", str),
            "stored_only": memory.stored("memo_stored_only", list),
            "stored_only_told": memory.read("memo_stored_only"),
            "never_written": memory.read("memo_never"),
            "has_store": memory.has_store,
            "task_id": memory.task_id,
        }

    def tell_note(n: int) -> None:
        _memory().tell("memo_note", {"n": n})

    @task(multiple_outputs=False)
    def reader() -> list:
        return [
            list(pair) for pair in _memory().read_of("memo_note", ["teller", "mapped_teller", "reader", "no_such_task"])
        ]

    mapped_teller = PythonOperator.partial(task_id="mapped_teller", python_callable=tell_note)
    [teller(), mapped_teller.expand(op_args=[[2], [3]])] >> reader()


with DAG(dag_id="memory_generic_retry", schedule=None, start_date=START):

    @task(multiple_outputs=False, **RETRY_ONCE)
    def keeper() -> dict:
        memory = _memory()
        if _try_number() == 1:
            memory.keep("memo_kept", {"try": 1})
            memory.keep("memo_forgotten", {"try": 1})
            memory.tell("memo_told", {"try": 1})
            raise RuntimeError("first try fails after keeping")
        found = {
            "kept": memory.kept("memo_kept", dict),
            "stored": memory.stored("memo_kept"),
            "told": memory.read("memo_told"),
            "this_try": memory.read("memo_kept"),
        }
        memory.keep("memo_forgotten", None)
        return {
            **found,
            "forgotten": memory.stored("memo_forgotten"),
            "forgotten_kept": memory.kept("memo_forgotten", dict),
        }

    keeper()


# -- instances: the records, the instance a task runs on -----------------------------------------------------------
def _record(name: str, instance_id: str, **fields: Any) -> Any:
    from airflow_provider_brev.core.instances.records import InstanceRecord

    return InstanceRecord(name, instance_id, owned=True, adopted=False, spec={"gpu": "L40S:1"}, **fields)


with DAG(dag_id="memory_instance_records", schedule=None, start_date=START):

    @task(multiple_outputs=False)
    def create() -> dict:
        from dataclasses import replace

        from airflow_provider_brev.instances.records import InstanceRecords

        records = InstanceRecords(_memory())
        record = _record("box", "id-1", price_per_hour=2.24, created_at=100.0)
        records.record(record, alone=True)
        records.tell_instance("box", {"name": "box", "id": "id-1", "status": "RUNNING"})
        own = records.own()
        records.tell(replace(record, ready_at=160.0))
        return {"own": own.to_dict() if own else None, "stored": _dict(records.stored())}

    @task(multiple_outputs=False)
    def step() -> dict:
        from airflow_provider_brev.instances.records import InstanceRecords

        records = InstanceRecords(_memory())
        records.tell_instance("box")
        records.record(_record("box", "id-2"))  # a re-creation
        records.record(_record("box", "id-3"))  # another
        records.record(_record("box", "id-3", price_per_hour=1.0))  # the same id again: replaced in the list
        return {
            "own": _dict(records.own()),  # a step's list is no single record
            "named": [r.to_dict() for r in records.named("box", ["create", "no_such_task"])],
            "other_name": records.named("other", ["create"]),
        }

    @task(multiple_outputs=False)
    def reader() -> dict:
        from airflow_provider_brev.instances.records import InstanceRecords, read_instance_record, read_instance_records

        context = get_current_context()
        return {
            "of_create": [r.to_dict() for r in InstanceRecords(_memory()).of("create")],
            "records_of_step": [r.to_dict() for r in read_instance_records(context, "step")],
            "record": _dict(read_instance_record(context, "create")),
            "record_named": _dict(read_instance_record(context, "step", "box")),
            "record_other": _dict(read_instance_record(context, "create", "other")),
            "none": _dict(read_instance_record(context, "no_such_task")),
        }

    create() >> step() >> reader()


with DAG(dag_id="memory_instance_records_retry", schedule=None, start_date=START):

    @task(multiple_outputs=False, **RETRY_ONCE)
    def step() -> dict:
        from airflow_provider_brev.instances.records import InstanceRecords

        records = InstanceRecords(_memory())
        if _try_number() == 1:
            records.record(_record("box", "id-1"))
            raise RuntimeError("first try fails after recording")
        return {
            "stored": _dict(records.stored()),
            "of_this_try": records.of("step"),
            "named": [r.to_dict() for r in records.named("box", [])],
        }

    step()


def _dict(record: Any) -> dict | None:
    return record.to_dict() if record is not None else None


# -- instances: the recoveries, the janitor's report ---------------------------------------------------------------
with DAG(dag_id="memory_recovery_count", schedule=None, start_date=START):

    @task(multiple_outputs=False, **RETRY_ONCE)
    def step() -> dict:
        from airflow_provider_brev.instances.recovery import RecoveryCount

        count = RecoveryCount(_memory())
        before = count.used()
        if _try_number() == 1:
            count.count("box", 1)
            raise RuntimeError(f"first try fails after recovery 1 (used before: {before})")
        count.count("box", before + 1)
        return {"before": before, "after": count.used()}

    step()


with DAG(dag_id="memory_sweep_report", schedule=None, start_date=START):

    @task(multiple_outputs=False)
    def janitor() -> None:
        from airflow_provider_brev.instances.sweep import SweepReport, empty_report

        SweepReport(_memory()).tell({**empty_report(False), "deleted": ["afbrev-x"]})

    janitor()


# -- jobs: the handle ------------------------------------------------------------------------------------------------
HANDLE = {"instance_name": "box", "instance_id": "id-1", "job": {"job_id": "bj-1"}, "try_number": 1}

with DAG(dag_id="memory_job_handle", schedule=None, start_date=START):

    @task(multiple_outputs=False, **RETRY_ONCE)
    def step() -> dict:
        from airflow_provider_brev.jobs.handle import KeptJobHandle

        handle = KeptJobHandle(_memory())
        if _try_number() == 1:
            before = handle.read()
            handle.keep(HANDLE)
            raise RuntimeError(f"first try fails after keeping its handle (before: {before}, now: {handle.read()})")
        found = {"read": handle.read(), "stored": handle.stored()}
        handle.keep({**HANDLE, "try_number": 2})
        found["newer"] = handle.read()
        handle.keep(None)  # collected
        return {**found, "stored_after_collect": handle.stored()}

    step()


# -- staging: what a step's syncs did --------------------------------------------------------------------------------
with DAG(dag_id="memory_sync_reports", schedule=None, start_date=START):

    @task(multiple_outputs=False)
    def step() -> dict:
        from airflow_provider_brev.staging.step_data import SyncReports

        reports = SyncReports(_memory())
        empty = reports.read()
        reports.tell({"inputs": [{"files": 2}], "output_syncs": 1, "unknown": "dropped on read"})
        return {"empty": empty, "read": reports.read()}

    step()


# -- cost: the clock, costs, lifetimes ---------------------------------------------------------------------------------
def _cost(name: str, dollars: float) -> dict:
    from airflow_provider_brev.core.cost import step_cost

    return step_cost(
        instance_name=name, instance_type="g6e.xlarge", price_per_hour=dollars * 3600, phases={"work": 1.0}
    )


with DAG(dag_id="memory_cost_ledger", schedule=None, start_date=START):

    @task(multiple_outputs=False)
    def step() -> dict:
        from airflow_provider_brev.cost.ledger import CostLedger

        ledger = CostLedger(_memory())
        before = ledger.clock()
        ledger.tell_clock({"started_at": 1.0, "seconds": {"pull": 2.0}, "open": {}, "instance": {}})
        ledger.tell_cost(_cost("box", 1.0))
        return {"before": before, "clock": ledger.clock()}

    def tell_cost(dollars: float) -> None:
        from airflow_provider_brev.cost.ledger import CostLedger

        CostLedger(_memory()).tell_cost(_cost("box", dollars))

    @task(multiple_outputs=False)
    def delete() -> None:
        from airflow_provider_brev.core.cost import lifetime_cost
        from airflow_provider_brev.cost.ledger import CostLedger

        lifetime = lifetime_cost(
            instance_name="box", instance_type="g6e.xlarge", price_per_hour=3.6, created_at=0.0, ended_at=100.0
        )
        CostLedger(_memory()).tell_lifetime(lifetime)

    @task(multiple_outputs=False)
    def report() -> dict:
        from airflow_provider_brev.cost.ledger import CostLedger

        ledger = CostLedger(_memory())
        task_ids = ["step", "mapped_step", "delete", "report"]
        return {
            "costs": [list(pair) for pair in ledger.costs_of(task_ids)],
            "lifetimes": [list(pair) for pair in ledger.lifetimes_of(task_ids)],
        }

    mapped_step = PythonOperator.partial(task_id="mapped_step", python_callable=tell_cost)
    [step(), mapped_step.expand(op_args=[[2.0], [3.0]]), delete()] >> report()


# -- TAO: the checkpoint a launch resumed from, the image pull time ----------------------------------------------------
with DAG(dag_id="memory_tao_facts", schedule=None, start_date=START):

    @task(multiple_outputs=False)
    def fresh() -> dict:
        from airflow_provider_brev.steps.tao import TaoFacts

        facts = TaoFacts(_memory())
        before = facts.resumed_from()
        facts.tell_resumed_from(None)
        facts.tell_pull_seconds(12.5)
        return {"before": before, "resumed_from": facts.resumed_from()}

    @task(multiple_outputs=False)
    def resumed() -> str | None:
        from airflow_provider_brev.steps.tao import TaoFacts

        facts = TaoFacts(_memory())
        facts.tell_resumed_from("model_epoch_004.pth")
        return facts.resumed_from()

    [fresh(), resumed()]
