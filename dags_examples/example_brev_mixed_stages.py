"""Mixed CPU and GPU stages on different Brev instance types, handing data over through S3.

A cheap CPU instance prepares the data, a GPU instance trains on it. Each instance has its own setup/teardown
pair, so the GPU is only rented while the GPU stage runs, and each is deleted whatever happens. A preflight task
checks first that the hand-over bucket exists (``bucket`` param, default ``$BREV_EXAMPLE_BUCKET`` or
``brev-examples``; ``make airflow`` and ``make demo`` create it in their local S3): a missing bucket fails the run
before any instance is created.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.tao import BrevPreflightOperator
from airflow_provider_brev.transfers import BrevToS3Operator, S3ToBrevOperator
from airflow_provider_brev.utils.cost import cost_report
from airflow_provider_brev.utils.templates import run_slug

# One prefix per DAG run. run_id, not ds/ds_nodash: manual runs (UI, CLI, REST) have no logical date on Airflow 3.
PREFIX = "mixed/{{ run_id | run_slug }}/prepared/"

with DAG(
    dag_id="example_brev_mixed_stages",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["brev", "example"],
    params={"bucket": os.environ.get("BREV_EXAMPLE_BUCKET", "brev-examples"), "cpu_type": "m6i.2xlarge"},
    user_defined_filters={"run_slug": run_slug},
) as dag:
    # [START howto_brev_mixed_stages]
    # Before anything is rented: the bucket the hand-over writes to exists and aws_default may list it.
    preflight = BrevPreflightOperator(task_id="preflight", s3_outputs=["s3://{{ params.bucket }}/" + PREFIX])
    cpu = BrevCreateInstanceOperator(task_id="create_cpu", instance_types="{{ params.cpu_type }}")
    prepare = BrevExecOperator(
        task_id="prepare_data",
        instance_name=cpu.output,
        command='mkdir -p prepared && for i in $(seq 1 100); do echo "sample $i"; done > prepared/samples.txt',
    )
    hand_over = BrevToS3Operator(
        task_id="upload_prepared",
        instance_name=cpu.output,
        remote_dir="prepared",
        s3_bucket="{{ params.bucket }}",
        s3_prefix=PREFIX,
    )
    delete_cpu = BrevDeleteInstanceOperator(task_id="delete_cpu", instance_name=cpu.output)

    gpu = BrevCreateInstanceOperator(task_id="create_gpu", gpu="L40S:1")
    stage = S3ToBrevOperator(
        task_id="stage_prepared",
        instance_name=gpu.output,
        s3_bucket="{{ params.bucket }}",
        s3_prefix=PREFIX,
        remote_dir="data",
    )
    train = BrevExecOperator(
        task_id="train",
        instance_name=gpu.output,
        command="nvidia-smi >/dev/null && wc -l < data/samples.txt",
    )
    delete_gpu = BrevDeleteInstanceOperator(task_id="delete_gpu", instance_name=gpu.output)

    preflight >> cpu >> prepare >> hand_over >> delete_cpu.as_teardown(setups=cpu)
    hand_over >> gpu >> stage >> train >> delete_gpu.as_teardown(setups=gpu)
    [delete_cpu, delete_gpu] >> cost_report()  # both instances' bills, split into the tasks' phases
    # [END howto_brev_mixed_stages]


try:  # the test suite's runner (tests/system/system_tests.py); elsewhere this is a plain DAG file
    from system.system_tests import get_test_run
except ImportError:
    pass
else:
    test_run = get_test_run(dag)
