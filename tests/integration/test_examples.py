"""Every example DAG imports cleanly and runs end to end against the simulator (and moto S3 where it needs S3)."""

from __future__ import annotations

import time
from pathlib import Path

from helpers import cli_calls, run_state, task_states

EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"


def wait_for_no_instances(sim, timeout=20.0):
    deadline = time.monotonic() + timeout
    while sim.instances():
        assert time.monotonic() < deadline, sim.instances()
        time.sleep(0.05)


def test_every_example_imports_without_errors(dagbag):
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(EXAMPLES))
    assert bag.import_errors == {}
    assert {
        "example_brev_lifecycle",
        "example_brev_ephemeral_exec",
        "example_brev_mixed_stages",
        "tao_visual_changenet_retrain",
        "brev_janitor",
    } <= set(bag.dag_ids)


def test_ephemeral_exec_example(run_dag, brev_sim):
    dag_run = run_dag("example_brev_ephemeral_exec")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert len(cli_calls(brev_sim, "create")) == 1
    wait_for_no_instances(brev_sim)


def test_mixed_stages_example(run_dag, brev_sim, aws_connection):
    dag_run = run_dag("example_brev_mixed_stages", conf={"bucket": aws_connection.bucket, "cpu_type": "m6i.2xlarge"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    creates = [call["argv"] for call in cli_calls(brev_sim, "create")]
    types = sorted(argv[argv.index("--type") + 1] for argv in creates)
    assert len(types) == 2 and "m6i.2xlarge" in types  # a CPU type and a GPU type
    train = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "train")
    assert train.xcom_pull(task_ids="train")["last_line"].strip() == "100"
    assert any(k.endswith("prepared/samples.txt") for k in aws_connection.keys("mixed/"))
    wait_for_no_instances(brev_sim)
