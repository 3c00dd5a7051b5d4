"""The recovery count in the task memory (airflow_provider_brev/instances/recovery.py ``RecoveryCount``), kept by a real
task across a real retry (tests/integration/dags/task_memory_cases.py): ``max_instance_recoveries`` is per task instance on
Airflow 3.3+ (the task state store), per try before."""

from __future__ import annotations

from helpers import task_states, xcom_of

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS


def test_the_recoveries_of_every_try_count_against_the_budget(run_dag, task_logs):
    dag_run = run_dag("memory_recovery_count")
    assert task_states(dag_run) == {"step": "success"}
    assert "first try fails after recovery 1 (used before: 0)" in task_logs.as_read
    spent = 1 if AIRFLOW_V_3_3_PLUS else 0  # the first try's recovery, kept in the task state store
    assert xcom_of(dag_run, "step") == {"before": spent, "after": spent + 1}
    assert xcom_of(dag_run, "step", "brev_recoveries") == {"count": spent + 1, "instance": "box"}
