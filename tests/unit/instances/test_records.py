"""The instance records in the task memory (airflow_provider_brev/instances/records.py), written and read by real tasks
of real DAG runs (tests/integration/dags/task_memory_cases.py): the keys and values later tasks, retries and the teardown read."""

from __future__ import annotations

from helpers import succeeded, task_states, xcom_of

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS
from airflow_provider_brev.core.instances.records import InstanceRecord
from airflow_provider_brev.instances.provisioning import STATE_STORE_INSTANCE_KEY
from airflow_provider_brev.instances.provisioning import XCOM_INSTANCE_RECORD as PUBLIC_KEY
from airflow_provider_brev.instances.records import XCOM_INSTANCE, XCOM_INSTANCE_NAME, XCOM_INSTANCE_RECORD
from airflow_provider_brev.operators.brev import XCOM_INSTANCE as OPERATOR_INSTANCE_KEY
from airflow_provider_brev.operators.exec import XCOM_INSTANCE_NAME as OPERATOR_NAME_KEY


def record(instance_id: str, **fields: object) -> dict:
    return InstanceRecord("box", instance_id, owned=True, adopted=False, spec={"gpu": "L40S:1"}, **fields).to_dict()  # type: ignore[arg-type]


CREATED = record("id-1", price_per_hour=2.24, created_at=100.0)
READY = record("id-1", price_per_hour=2.24, created_at=100.0, ready_at=160.0)
STEP_RECORDS = [record("id-2"), record("id-3", price_per_hour=1.0)]


def test_the_keys_keep_their_public_names_and_homes():
    assert (XCOM_INSTANCE_RECORD, XCOM_INSTANCE_NAME, XCOM_INSTANCE) == ("brev_instance", "instance_name", "instance")
    assert PUBLIC_KEY == STATE_STORE_INSTANCE_KEY == XCOM_INSTANCE_RECORD
    assert (OPERATOR_INSTANCE_KEY, OPERATOR_NAME_KEY) == (XCOM_INSTANCE, XCOM_INSTANCE_NAME)


def test_a_create_task_keeps_its_one_record_and_tells_it_again_when_it_changes(run_dag):
    dag_run = succeeded(run_dag("memory_instance_records"))
    found = xcom_of(dag_run, "create")
    assert found["own"] == CREATED  # its only record, as told
    assert found["stored"] == (CREATED if AIRFLOW_V_3_3_PLUS else None)  # kept for its retries
    assert xcom_of(dag_run, "create", "brev_instance") == READY  # told again with its ready time
    assert xcom_of(dag_run, "create", "instance_name") == "box"
    assert xcom_of(dag_run, "create", "instance") == {"name": "box", "id": "id-1", "status": "RUNNING"}


def test_a_step_tells_the_list_of_its_records_one_per_instance_id(run_dag):
    dag_run = succeeded(run_dag("memory_instance_records"))
    assert xcom_of(dag_run, "step", "brev_instance") == STEP_RECORDS  # id-3 replaced, not added twice
    assert xcom_of(dag_run, "step", "instance_name") == "box"
    assert xcom_of(dag_run, "step", "instance") is None
    found = xcom_of(dag_run, "step")
    assert found["own"] is None  # a list is no single record
    stored = [STEP_RECORDS[-1]] if AIRFLOW_V_3_3_PLUS else []  # the state store holds the newest one
    assert found["named"] == [READY, *STEP_RECORDS, *stored]  # the tasks asked, then its own, then its kept one
    assert found["other_name"] == []


def test_a_later_task_reads_the_records_of_the_run(run_dag):
    dag_run = succeeded(run_dag("memory_instance_records"))
    found = xcom_of(dag_run, "reader")
    assert found["of_create"] == [READY]
    assert found["records_of_step"] == STEP_RECORDS
    assert found["record"] == READY
    assert found["record_named"] == STEP_RECORDS[0]
    assert found["record_other"] is None and found["none"] is None


def test_a_retry_finds_its_record_in_the_task_state_store_only(run_dag):
    dag_run = run_dag("memory_instance_records_retry")
    assert task_states(dag_run) == {"step": "success"}
    found = xcom_of(dag_run, "step")
    assert found["of_this_try"] == []  # XCom is cleared when a task retries
    kept = [record("id-1")] if AIRFLOW_V_3_3_PLUS else []
    assert found["named"] == kept
    assert found["stored"] == (kept[0] if kept else None)
