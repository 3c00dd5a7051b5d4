"""DAGs exercised by tests/integration/test_ephemeral_kill.py: a SIGTERM in any phase of an ephemeral step.

The step creates its own instance, syncs inputs from S3, runs a command, syncs outputs, and recovers a lost instance
once; the tests kill it in each of those phases and count the instances left.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevExecOperator

START = datetime(2026, 1, 1)

with DAG(
    dag_id="kill_ephemeral_step",
    schedule=None,
    start_date=START,
    params={"bucket": "b", "command": "echo done"},
):
    BrevExecOperator(
        task_id="run",
        gpu="L40S:1",
        command="{{ params.command }}",
        inputs={"s3://{{ params.bucket }}/inputs/": "work/in"},
        outputs={"work/out": "s3://{{ params.bucket }}/kill/out/"},
        output_sync_interval=3600,
        max_instance_recoveries=1,
        poll_interval=0.2,
        ready_timeout=120,
    )
