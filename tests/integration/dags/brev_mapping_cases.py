"""DAGs exercised by tests/integration/test_mapping.py: every operator and the sensor mapped with ``.partial()`` /
``.expand()`` on a connection that is not the default one (``brev_alt``; ``brev_default`` is broken in that test),
and the preflight and TAO operators expanded over their S3 and NGC connections (whose defaults are broken or
missing there)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.operators.tao import BrevPreflightOperator, VisualChangeNetTrainOperator
from airflow_provider_brev.sensors.brev import BrevReadySensor
from airflow_provider_brev.transfers.s3 import BrevToS3Operator, S3ToBrevOperator

ALT = "brev_alt"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
DATASET = {"csv_path": "/data/train.csv", "images_dir": "/data/images"}
SPEC = {
    "dataset": {"classify": {"train_dataset": DATASET, "validation_dataset": DATASET, "image_ext": ".jpg"}},
    "train": {"num_epochs": 1, "checkpoint_interval": 1, "validation_interval": 1},
}

with DAG(dag_id="mapped_on_another_connection", schedule=None, start_date=datetime(2026, 1, 1), params={"bucket": "b"}):
    preflight = BrevPreflightOperator.partial(task_id="preflight", brev_conn_id=ALT, image=IMAGE).expand(
        s3_inputs=[["s3://{{ params.bucket }}/in/"]]
    )
    create = BrevCreateInstanceOperator.partial(
        task_id="create", brev_conn_id=ALT, gpu="L40S:1", ready_timeout=60, poll_interval=0.2
    ).expand(instance_name=["mapped-a", "mapped-b"])
    ready = BrevReadySensor.partial(task_id="ready", brev_conn_id=ALT, poke_interval=0.2).expand(
        instance_name=create.output
    )
    run = BrevExecOperator.partial(
        task_id="run", brev_conn_id=ALT, command="echo mapped > work.txt", poll_interval=0.2
    ).expand(instance_name=create.output)
    push = S3ToBrevOperator.partial(
        task_id="push", brev_conn_id=ALT, s3_bucket="{{ params.bucket }}", s3_prefix="in", remote_dir="data"
    ).expand(instance_name=create.output)
    train = VisualChangeNetTrainOperator.partial(
        task_id="train", brev_conn_id=ALT, image=IMAGE, spec=SPEC, mounts={"data": "/data"}, poll_interval=0.2
    ).expand(instance_name=create.output)
    pull = BrevToS3Operator.partial(
        task_id="pull", brev_conn_id=ALT, s3_bucket="{{ params.bucket }}", s3_prefix="out", remote_dir="data"
    ).expand(instance_name=create.output)
    janitor = BrevSweepInstancesOperator.partial(task_id="janitor", brev_conn_id=ALT, dry_run=True).expand(
        name_prefix=["afbrev"]
    )
    delete = BrevDeleteInstanceOperator.partial(task_id="delete", brev_conn_id=ALT).expand(instance_name=create.output)
    preflight >> create >> ready >> run >> push >> train >> pull >> janitor >> delete.as_teardown(setups=create)


with DAG(
    dag_id="mapped_over_other_connections", schedule=None, start_date=datetime(2026, 1, 1), params={"bucket": "b"}
):
    # four checks: each pair of an S3 and an NGC connection
    preflight = BrevPreflightOperator.partial(
        task_id="preflight", image=IMAGE, check_brev=False, s3_inputs=["s3://{{ params.bucket }}/in/"]
    ).expand(aws_conn_id=["aws_alt_a", "aws_alt_b"], ngc_conn_id=["ngc_alt_a", "ngc_alt_b"])
    instance = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    stage = S3ToBrevOperator(
        task_id="push",
        instance_name=instance.output,
        aws_conn_id="aws_alt_b",
        s3_bucket="{{ params.bucket }}",
        s3_prefix="in",
        remote_dir="data",
    )
    # two trainings on one instance, each logging in to nvcr.io with its own key, in its own results directory
    trainings = VisualChangeNetTrainOperator.partial(
        task_id="train",
        instance_name=instance.output,
        image=IMAGE,
        spec=SPEC,
        mounts={"data": "/data"},
        results_dir="tao-results-{{ ti.map_index }}",
        poll_interval=0.2,
    ).expand(ngc_conn_id=["ngc_alt_a", "ngc_alt_b"])
    release = BrevDeleteInstanceOperator(task_id="delete", instance_name=instance.output)
    preflight >> instance >> stage >> trainings >> release.as_teardown(setups=instance)
