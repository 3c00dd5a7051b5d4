"""DAG for tests/integration/test_lineage.py: an exec step and a TAO step on one instance, for the OpenLineage
datasets they report."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.tao import VisualChangeNetTrainOperator
from airflow_provider_brev.utils.templates import run_slug

RUN_PREFIX = "runs/{{ run_id | run_slug }}"
TRAIN_SPEC = {
    "dataset": {
        "classify": {
            "train_dataset": {"csv_path": "/data/train.csv", "images_dir": "/data/images"},
            "validation_dataset": {"csv_path": "/data/val.csv", "images_dir": "/data/images"},
            "image_ext": ".jpg",
            "batch_size": 4,
            "workers": 2,
        }
    },
    "train": {"num_epochs": 1, "checkpoint_interval": 1, "validation_interval": 1},
}

with DAG(
    dag_id="brev_lineage",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={"bucket": "b"},
    user_defined_filters={"run_slug": run_slug},
):
    create = BrevCreateInstanceOperator(
        task_id="create", gpu="L40S:1", require_docker=True, ready_timeout=60, poll_interval=0.2
    )
    run = BrevExecOperator(
        task_id="run",
        instance_name=create.output,
        command="mkdir -p work/out && ls work/in > work/out/list.txt",
        inputs={"s3://{{ params.bucket }}/inputs/": "work/in"},
        outputs={"work/out": "s3://{{ params.bucket }}/" + RUN_PREFIX + "/out"},
        poll_interval=0.2,
    )
    train = VisualChangeNetTrainOperator(
        task_id="train",
        instance_name=create.output,
        image="nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt",
        spec=TRAIN_SPEC,
        results_dir="vcn/results",
        mounts={"vcn/data": "/data"},
        s3_inputs=["s3://{{ params.bucket }}/datasets/vcn/train.csv"],
        inputs={"s3://{{ params.bucket }}/datasets/vcn/": "vcn/data"},
        outputs={"vcn/results/train": "s3://{{ params.bucket }}/" + RUN_PREFIX + "/train/"},
        poll_interval=0.2,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> run >> train >> delete.as_teardown(setups=create)
