"""DAGs for tests/integration/test_warm_reuse.py: warm reuse across DAG runs (``reuse_key``, ``release="stop"``,
``max_idle``)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.operators.tao import VisualChangeNetTrainOperator

START = datetime(2026, 1, 1)
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
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
PARAMS = {"key": "k", "type": "g6e.xlarge", "release": "stop", "max_idle": 3600, "bucket": "b", "deferrable": False}


def _create(**more: object) -> BrevCreateInstanceOperator:
    return BrevCreateInstanceOperator(
        task_id="create",
        instance_types="{{ params.type }}",
        reuse_key="{{ params.key }}",
        max_idle="{{ params.max_idle }}",
        require_docker=True,
        ready_timeout=60,
        poll_interval=0.2,
        deferrable="{{ params.deferrable }}",
        **more,
    )


def _release() -> BrevDeleteInstanceOperator:
    return BrevDeleteInstanceOperator(
        task_id="delete", instance_name="{{ ti.xcom_pull(task_ids='create') }}", release="{{ params.release }}"
    )


# A TAO training on a keyed instance: pulls its image, stages its dataset from S3, and the teardown stops the
# instance; the next run starts it again and finds both.
with DAG(dag_id="brev_reuse_train", schedule=None, start_date=START, params=PARAMS):
    create = _create()
    train = VisualChangeNetTrainOperator(
        task_id="train",
        instance_name=create.output,
        image=IMAGE,
        spec=TRAIN_SPEC,
        results_dir="vcn/results",
        mounts={"vcn/data": "/data"},
        inputs={"s3://{{ params.bucket }}/datasets/vcn/": "vcn/data"},
        poll_interval=0.2,
        ready_timeout=60,
    )
    delete = _release()
    create >> train >> delete.as_teardown(setups=create)


# Only the lifecycle: create (or start) and release.
with DAG(dag_id="brev_reuse_lifecycle", schedule=None, start_date=START, params=PARAMS):
    create = _create()
    create >> _release().as_teardown(setups=create)


# An ephemeral step that stops its instance for the next run instead of deleting it.
with DAG(dag_id="brev_reuse_ephemeral", schedule=None, start_date=START, params=PARAMS):
    BrevExecOperator(
        task_id="run",
        instance_types="{{ params.type }}",
        command="test -e marker && echo warm || (touch marker && echo cold)",
        reuse_key="{{ params.key }}",
        max_idle="{{ params.max_idle }}",
        release="{{ params.release }}",
        poll_interval=0.2,
        ready_timeout=60,
    )


# A create whose request and price cap change from run to run: a warm start must satisfy them as a create would.
with DAG(dag_id="brev_reuse_capped", schedule=None, start_date=START, params={**PARAMS, "max_price": ""}):
    create = _create(max_price_per_hour="{{ params.max_price }}")
    create >> _release().as_teardown(setups=create)


# An ephemeral step with a run-cost budget: price x (ready_timeout + timeout) = $2.24/h x 840 s = $0.52 on g6e.xlarge.
with DAG(dag_id="brev_reuse_step_budget", schedule=None, start_date=START, params={**PARAMS, "max_run_cost": ""}):
    BrevExecOperator(
        task_id="run",
        instance_types="{{ params.type }}",
        command="echo ran",
        reuse_key="{{ params.key }}",
        max_idle="{{ params.max_idle }}",
        release="{{ params.release }}",
        max_run_cost="{{ params.max_run_cost }}",
        timeout=780,
        ready_timeout=60,
        poll_interval=0.2,
    )


@task
def as_an_earlier_release_recorded_it(ti=None) -> None:
    """The upgrade, mid-run: the instance's record moves into the single Variable of earlier releases, as they
    wrote it (no creating task named; the task holding it is)."""
    from airflow.sdk import Variable

    record = ti.xcom_pull(task_ids="create", key="brev_instance")
    key = f"brev_warm_instance.{record['id']}"
    entry = Variable.get(key, deserialize_json=True)
    entry.pop("created_by")
    Variable.delete(key)
    Variable.set("brev_warm_instances", {entry["key"]: [entry]}, serialize_json=True)


# A run that began before the upgrade (its record in the single Variable) and ends after it: the janitor sweeping
# mid-run keeps the instance by that record, the teardown stops it under a record of its own.
with DAG(dag_id="brev_reuse_upgrade", schedule=None, start_date=START, params=PARAMS):
    create = _create()
    sweep = BrevSweepInstancesOperator(task_id="sweep")
    create >> as_an_earlier_release_recorded_it() >> sweep >> _release().as_teardown(setups=create)
