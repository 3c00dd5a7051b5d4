"""The generic task memory (airflow_provider_brev/utils/task_memory.py) in real tasks of real DAG runs
(tests/integration/dags/task_memory_cases.py): XCom and, on Airflow 3.3+, the task state store are Airflow's own."""

from __future__ import annotations

from helpers import succeeded, task_states, xcom_of

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS


def test_told_values_go_to_xcom_and_are_read_back_typed(run_dag, task_logs):
    dag_run = succeeded(run_dag("memory_generic"))
    found = xcom_of(dag_run, "teller")
    assert found["task_id"] == "teller"
    assert found["read"] == found["read_dict"] == {"n": 1}
    assert found["read_other_kind"] is None  # typed by the caller: a dict is no list
    assert found["never_written"] is None
    assert xcom_of(dag_run, "teller", "memo_note") == {"n": 1}


def test_a_failed_write_is_logged_and_the_task_goes_on(run_dag, task_logs):
    dag_run = succeeded(run_dag("memory_generic"))
    found = xcom_of(dag_run, "teller")
    assert found["unwritten"] is None
    assert "Could not write memo_unwritable to XCom (" in task_logs.as_read
    if AIRFLOW_V_3_3_PLUS:
        assert "Could not write memo_unstorable to the task state store (" in task_logs.as_read
        assert "the instance keeps what a retry needs." in task_logs.as_read
        assert "Could not record memo in the task state store (" in task_logs.as_read  # the caller's words


def test_kept_values_go_to_xcom_and_the_task_state_store(run_dag):
    dag_run = succeeded(run_dag("memory_generic"))
    found = xcom_of(dag_run, "teller")
    assert found["has_store"] is AIRFLOW_V_3_3_PLUS
    assert found["kept"] == {"v": 1}
    assert xcom_of(dag_run, "teller", "memo_kept") == {"v": 1}
    assert found["stored"] == ({"v": 1} if AIRFLOW_V_3_3_PLUS else None)
    assert found["stored_other_kind"] is None
    assert found["stored_only"] == (["s"] if AIRFLOW_V_3_3_PLUS else None)  # remembered, not told
    assert found["stored_only_told"] is None


def test_read_of_reads_other_tasks_of_the_run_in_the_order_asked(run_dag):
    dag_run = succeeded(run_dag("memory_generic"))
    found = xcom_of(dag_run, "reader")
    assert found == [["teller", {"n": 1}], ["mapped_teller", [{"n": 2}, {"n": 3}]]]  # no value: left out


def test_a_retry_finds_what_its_first_try_kept_in_the_task_state_store_only(run_dag):
    dag_run = run_dag("memory_generic_retry")
    assert task_states(dag_run) == {"keeper": "success"}
    found = xcom_of(dag_run, "keeper")
    assert found["told"] is None and found["this_try"] is None  # XCom is cleared when a task retries
    assert found["kept"] == found["stored"] == ({"try": 1} if AIRFLOW_V_3_3_PLUS else None)
    assert found["forgotten"] is None and found["forgotten_kept"] is None  # keep(None) forgets
