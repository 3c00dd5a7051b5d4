"""What a TAO step tells its task memory (airflow_provider_brev/steps/tao.py ``TaoFacts``), in real tasks
(tests/integration/dags/task_memory_cases.py): the checkpoint a launch resumed from ("" for a fresh start) and the pull time."""

from __future__ import annotations

from helpers import succeeded, xcom_of


def test_a_fresh_start_is_told_as_an_empty_checkpoint_and_read_as_none(run_dag):
    dag_run = succeeded(run_dag("memory_tao_facts"))
    assert xcom_of(dag_run, "fresh") == {"before": None, "resumed_from": None}
    assert xcom_of(dag_run, "fresh", "tao_resumed_from") == ""  # Airflow 3.0's XCom API refuses a null
    assert xcom_of(dag_run, "fresh", "tao_pull_seconds") == 12.5


def test_a_resumed_launch_tells_its_checkpoint(run_dag):
    dag_run = succeeded(run_dag("memory_tao_facts"))
    assert xcom_of(dag_run, "resumed") == "model_epoch_004.pth"
    assert xcom_of(dag_run, "resumed", "tao_resumed_from") == "model_epoch_004.pth"
