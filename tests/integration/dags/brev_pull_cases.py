"""DAGs for tests/integration/test_image_pulls.py: background image pulls on one instance."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.tao import VisualChangeNetEvaluateOperator, VisualChangeNetTrainOperator

TRAIN_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
EVALUATE_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt-eval"
DATASET = {
    "csv_path": "/data/train.csv",
    "images_dir": "/data/images",
}
SPEC = {
    "dataset": {
        "classify": {
            "train_dataset": DATASET,
            "validation_dataset": {**DATASET, "csv_path": "/data/val.csv"},
            "test_dataset": {**DATASET, "csv_path": "/data/test.csv"},
            "image_ext": ".jpg",
            "batch_size": 4,
            "workers": 2,
        }
    },
    "train": {"num_epochs": 1, "checkpoint_interval": 1, "validation_interval": 1},
}

with DAG(
    dag_id="brev_pull_two_images",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={"bucket": "b", "dataset_prefix": "datasets/vcn/"},
):
    # train pulls its image while its inputs sync, then starts evaluate's image in the background; evaluate waits
    # only for what that pull has not done yet.
    create = BrevCreateInstanceOperator(
        task_id="create", gpu="L40S:1", require_docker=True, ready_timeout=60, poll_interval=0.2
    )
    common = {
        "instance_name": create.output,
        "results_dir": "vcn/results",
        "mounts": {"vcn/data": "/data"},
        "inputs": {"s3://{{ params.bucket }}/{{ params.dataset_prefix }}": "vcn/data"},
        "poll_interval": 0.2,
        "retries": 0,
    }
    train = VisualChangeNetTrainOperator(task_id="train", image=TRAIN_IMAGE, spec=SPEC, **common)
    evaluate = VisualChangeNetEvaluateOperator(
        task_id="evaluate",
        image=EVALUATE_IMAGE,
        spec={
            **SPEC,
            "evaluate": {"checkpoint": "/results/train/{{ ti.xcom_pull(task_ids='train')['checkpoints'][-1] }}"},
        },
        **common,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> train >> evaluate >> delete.as_teardown(setups=create)
