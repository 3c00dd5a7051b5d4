"""DAGs for tests/integration/test_durable_steps.py: steps own their data (S3 inputs/outputs), a lost instance is
re-created under the same name, TAO training resumes from its newest checkpoint in S3."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.tao import VisualChangeNetTrainOperator
from airflow_provider_brev.utils.templates import run_slug

START = datetime(2026, 1, 1)
RUN_PREFIX = "runs/{{ run_id | run_slug }}"
FILTERS = {"run_slug": run_slug}
# Lists its inputs into its outputs, marks the start (the instance_lost fault waits for that marker), then
# finishes a little later.
WORK = (
    "mkdir -p work/out && ls work/in > work/out/inputs.txt && echo started >> work/out/progress.txt && "
    "touch work/started && sleep 1 && echo finished >> work/out/progress.txt && echo done"
)

for deferrable in (False, True):
    with DAG(
        dag_id=f"brev_durable_exec_{'deferrable' if deferrable else 'sync'}",
        schedule=None,
        start_date=START,
        params={"bucket": "b", "command": WORK},
        user_defined_filters=FILTERS,
    ):
        create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
        run = BrevExecOperator(
            task_id="run",
            instance_name=create.output,
            command="{{ params.command }}",
            inputs={"s3://{{ params.bucket }}/inputs/": "work/in"},
            outputs={"work/out": "s3://{{ params.bucket }}/" + RUN_PREFIX + "/out/"},
            output_sync_interval=60,
            max_instance_recoveries=2,
            deferrable=deferrable,
            poll_interval=0.2,
            ready_timeout=60,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> run >> delete.as_teardown(setups=create)


with DAG(dag_id="brev_durable_ephemeral", schedule=None, start_date=START, params={"bucket": "b"}):
    # Ephemeral mode: recovery is "create it again with the same request"; the finally deletes what exists.
    BrevExecOperator(
        task_id="run",
        gpu="L40S:1",
        command=WORK,
        inputs={"s3://{{ params.bucket }}/inputs/": "work/in"},
        outputs={"work/out": "s3://{{ params.bucket }}/ephemeral/out/"},
        poll_interval=0.2,
        ready_timeout=60,
    )


with DAG(dag_id="brev_durable_two_steps", schedule=None, start_date=START, params={"bucket": "b"}):
    # Two steps with the same inputs on one instance: the second downloads nothing.
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    common = {"instance_name": create.output, "inputs": {"s3://{{ params.bucket }}/inputs/": "work/in"}}
    first = BrevExecOperator(task_id="first", command="ls work/in", poll_interval=0.2, **common)
    second = BrevExecOperator(task_id="second", command="ls work/in", poll_interval=0.2, **common)
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> first >> second >> delete.as_teardown(setups=create)


with DAG(
    dag_id="brev_durable_handoff", schedule=None, start_date=START, params={"bucket": "b"}, user_defined_filters=FILTERS
):
    # The first step's outputs are the second's inputs, on one instance: the second downloads none of them.
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1", ready_timeout=60, poll_interval=0.2)
    produced = "s3://{{ params.bucket }}/" + RUN_PREFIX + "/produced/"
    produce = BrevExecOperator(
        task_id="produce",
        instance_name=create.output,
        command="mkdir -p work/made/sub && echo one > work/made/a.txt && echo two > work/made/sub/b.txt",
        outputs={"work/made": produced},
        poll_interval=0.2,
    )
    consume = BrevExecOperator(
        task_id="consume",
        instance_name=create.output,
        command="cat work/made/a.txt work/made/sub/b.txt",
        inputs={produced: "work/made"},
        poll_interval=0.2,
    )
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> produce >> consume >> delete.as_teardown(setups=create)


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
    "train": {"num_epochs": 10, "checkpoint_interval": 1, "validation_interval": 1},
}

for deferrable in (False, True):
    with DAG(
        dag_id=f"brev_durable_tao_train_{'deferrable' if deferrable else 'sync'}",
        schedule=None,
        start_date=START,
        params={"bucket": "b", "dataset_prefix": "datasets/vcn/"},
        user_defined_filters=FILTERS,
    ):
        create = BrevCreateInstanceOperator(
            task_id="create", gpu="L40S:1", require_docker=True, ready_timeout=60, poll_interval=0.2
        )
        train = VisualChangeNetTrainOperator(
            task_id="train",
            instance_name=create.output,
            image="nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt",
            spec=TRAIN_SPEC,
            results_dir="vcn/results",
            mounts={"vcn/data": "/data"},
            inputs={"s3://{{ params.bucket }}/{{ params.dataset_prefix }}": "vcn/data"},
            outputs={"vcn/results/train": "s3://{{ params.bucket }}/" + RUN_PREFIX + "/train/"},
            output_sync_interval=timedelta(minutes=5),
            deferrable=deferrable,
            poll_interval=0.2,
            ready_timeout=60,
        )
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> train >> delete.as_teardown(setups=create)


# A step whose S3 locations cannot be used (the bucket does not exist): refused before anything is created, in
# ephemeral mode and on an existing instance ("busy-box", which the test creates in the simulator directly).
for mode, target in (("ephemeral", {"gpu": "L40S:1"}), ("on_instance", {"instance_name": "busy-box"})):
    with DAG(
        dag_id=f"brev_durable_missing_bucket_{mode}",
        schedule=None,
        start_date=START,
        params={"in_bucket": "b", "out_bucket": "b"},
    ):
        BrevExecOperator(
            task_id="run",
            command="ls work/in",
            inputs={"s3://{{ params.in_bucket }}/inputs/": "work/in"},
            outputs={"work/out": "s3://{{ params.out_bucket }}/runs/out/"},
            retries=2,
            retry_delay=timedelta(0),
            poll_interval=0.2,
            ready_timeout=60,
            **target,  # type: ignore[arg-type]
        )


with DAG(dag_id="brev_durable_stray_keys", schedule=None, start_date=START, params={"bucket": "b"}):
    # An input prefix holding keys no file on the instance can be named after (a//b, ../x): skipped, named.
    BrevExecOperator(
        task_id="run",
        gpu="L40S:1",
        command="mkdir -p work/out && ls -R work/in > work/out/inputs.txt",
        inputs={"s3://{{ params.bucket }}/odd/": "work/in"},
        outputs={"work/out": "s3://{{ params.bucket }}/odd-out/"},
        poll_interval=0.2,
        ready_timeout=60,
    )
