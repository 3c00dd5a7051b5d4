"""DAGs for tests/integration/test_proof_misc.py: branches of issue 11's "Proof" list (part B).

Every DAG works on an instance named by ``params.name`` (seeded by the test, or created by the DAG itself).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevDeleteInstanceOperator
from airflow_provider_brev.operators.exec import BrevExecOperator
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.operators.tao import VisualChangeNetTrainOperator

START = datetime(2026, 1, 1)
NAME = "{{ params.name }}"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
#: the training spec the TAO DAG reads from ``spec_file``/``spec_s3_uri`` (the dataset is staged under ``data``)
TAO_DATA_DIR = "data"
TAO_RESULTS_DIR = "tao-results"

with DAG(dag_id="brev_proof_delete_wait", schedule=None, start_date=START, params={"name": "", "timeout": 60}):
    # A standalone delete (no create task upstream): it deletes by name and waits until `brev ls` drops it.
    BrevDeleteInstanceOperator(
        task_id="delete", instance_name=NAME, wait_for_deletion=True, deletion_timeout="{{ params.timeout }}"
    )


with DAG(dag_id="brev_proof_shared_home_logins", schedule=None, start_date=START, params={"name": ""}):
    # Two connections whose CLI state lives in one HOME: brev_default (a good token) works, brev_wrong_token's
    # login fails, then brev_default works on.
    first = BrevExecOperator(task_id="good_first", instance_name=NAME, command="echo good-first", detach=False)
    wrong = BrevExecOperator(
        task_id="wrong_token", brev_conn_id="brev_wrong_token", instance_name=NAME, command="echo never", detach=False
    )
    again = BrevExecOperator(
        task_id="good_again", instance_name=NAME, command="echo good-again", detach=False, trigger_rule="all_done"
    )
    first >> wrong >> again


with DAG(dag_id="brev_proof_skip", schedule=None, start_date=START, params={"name": ""}):
    BrevExecOperator(
        task_id="run",
        instance_name=NAME,
        command="echo nothing new to process; exit 3",
        skip_on_exit_code=[3, 4],
        poll_interval=0.2,
    )


with DAG(dag_id="brev_proof_janitor_grace", schedule=None, start_date=START, params={"grace_seconds": 0}):
    BrevSweepInstancesOperator(
        task_id="sweep",
        grace_period="{{ params.grace_seconds }}",
        wait_for_deletion=True,
        deletion_timeout=30,
        poll_interval=0.1,
    )


with DAG(
    dag_id="brev_proof_tao",
    schedule=None,
    start_date=START,
    params={"name": "", "spec_file": "", "spec_s3_uri": ""},
):
    # TAO train on an existing instance; the spec comes from a file on the worker or from S3 (exactly one is set).
    # One immediate retry: a failed image pull (BrevTransientError) is retried by a new try.
    VisualChangeNetTrainOperator(
        task_id="train",
        instance_name=NAME,
        image=IMAGE,
        spec_file="{{ params.spec_file }}",
        spec_s3_uri="{{ params.spec_s3_uri }}",
        results_dir=TAO_RESULTS_DIR,
        mounts={TAO_DATA_DIR: "/data"},
        poll_interval=0.2,
        pull_timeout=120,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )
