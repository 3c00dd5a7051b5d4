"""DAGs for tests/integration/test_tao_preflight.py: pre-launch checks stop a run before anything is created."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.tao import BrevPreflightOperator, VisualChangeNetTrainOperator

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"

with DAG(
    dag_id="brev_tao_preflight",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={"backbone": "/results/backbone.safetensors", "input_paths": [], "instance_paths": []},
):
    preflight = BrevPreflightOperator(
        task_id="preflight",
        image=IMAGE,
        spec={"model": {"backbone": {"pretrained_backbone_path": "{{ params.backbone }}"}}},
        input_paths="{{ params.input_paths }}",
        instance_paths="{{ params.instance_paths }}",
        check_brev=False,
    )
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1")
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    preflight >> create >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_tao_ephemeral_train",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={"instance_paths": ["/definitely/not/on/the/instance"]},
):
    # Ephemeral TAO run whose declared instance path does not exist: verified with `test -e` before any
    # GPU work; the ephemeral instance is deleted in the finally.
    VisualChangeNetTrainOperator(
        task_id="train",
        gpu="L40S:1",
        image=IMAGE,
        spec={"train": {"num_epochs": 1}},
        input_paths="{{ params.instance_paths }}",
        instance_paths="{{ params.instance_paths }}",
        ready_timeout=60,
        poll_interval=0.2,
    )
