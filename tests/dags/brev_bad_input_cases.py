"""DAGs exercised by tests/integration/test_bad_input_matrix.py: one DAG per operator, every parameter templated
from ``params``, so one DAG serves every bad value (``dag.test(run_conf=...)``). The defaults are good values.

Each task has ``retries=2``: a bad value must fail it on the first try (no retry is spent).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.sensors.brev import BrevReadySensor
from airflow_provider_brev.transfers import BrevToS3Operator, S3ToBrevOperator

START = datetime(2026, 1, 1)
#: A retriable failure (only the controls, with good values, reach one) retries at once instead of in 5 minutes.
COMMON = {"retries": 2, "retry_delay": timedelta(0), "brev_conn_id": "{{ params.brev_conn_id }}"}


def templated(*names: str) -> dict[str, str]:
    """``{name: "{{ params.name }}"}`` for every name."""
    return {name: "{{ params.%s }}" % name for name in names}  # noqa: UP031 - Jinja braces


CREATE_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": "",
    "gpu": "L40S:1",
    "instance_types": "",
    "min_vram": "",
    "cloud_cred_id": "",
    "workspace_group_id": "",
    "wait_for_ready": "true",
    "ready_timeout": 60,
    "require_docker": "false",
    "poll_interval": 0.2,
    "deferrable": "false",
    "delete_on_failure": "true",
    "max_lifetime": 3600,
    "name_prefix": "",
    "adopt_existing": "false",
}
with DAG(dag_id="brev_bad_input_create", schedule=None, start_date=START, params=CREATE_PARAMS):
    BrevCreateInstanceOperator(task_id="create", **COMMON, **templated(*CREATE_PARAMS.keys() - {"brev_conn_id"}))

DELETE_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": "nobody-home",
    "wait_for_deletion": "false",
    "deletion_timeout": 30,
}
with DAG(dag_id="brev_bad_input_delete", schedule=None, start_date=START, params=DELETE_PARAMS):
    BrevDeleteInstanceOperator(task_id="delete", **COMMON, **templated(*DELETE_PARAMS.keys() - {"brev_conn_id"}))

SENSOR_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": "nobody-home",
    "require_docker": "false",
    "deferrable": "false",
}
with DAG(dag_id="brev_bad_input_sensor", schedule=None, start_date=START, params=SENSOR_PARAMS):
    BrevReadySensor(
        task_id="ready",
        poke_interval=0.2,
        timeout=30,
        **COMMON,
        **templated(*SENSOR_PARAMS.keys() - {"brev_conn_id"}),
    )

# A sensor's poke_interval and timeout cannot be templated (Airflow's sensor checks their type, and refuses NaN
# and infinities, when the DAG is parsed), but Airflow accepts zero for both: a busy loop of `brev` calls, or a
# sensor that times out at once.
with DAG(
    dag_id="brev_bad_input_sensor_limits", schedule=None, start_date=START, params={"brev_conn_id": "brev_default"}
):
    BrevReadySensor(task_id="zero_poke_interval", instance_name="box", poke_interval=0, timeout=30, **COMMON)
    BrevReadySensor(task_id="zero_timeout", instance_name="box", poke_interval=1, timeout=0, **COMMON)

JANITOR_PARAMS = {
    "brev_conn_id": "brev_default",
    "name_prefix": "",
    "grace_period": "",
    "wait_for_deletion": "false",
    "deletion_timeout": 30,
    "poll_interval": 0.2,
    "cli_retry_limit": "",
    "cli_retry_delay": "",
}
with DAG(dag_id="brev_bad_input_janitor", schedule=None, start_date=START, params=JANITOR_PARAMS):
    BrevSweepInstancesOperator(task_id="sweep", **COMMON, **templated(*JANITOR_PARAMS.keys() - {"brev_conn_id"}))

TRANSFER_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": "nobody-home",
    "s3_bucket": "brev-bad-input",
    "s3_prefix": "in/",
    "remote_dir": "data/in",
    "include": None,
    "exclude": None,
    "aws_conn_id": "aws_default",
    "max_attempts": 2,
    "concurrency": 2,
    "curl_retries": 0,
    "url_expires_in": 600,
    "transfer_timeout": 60,
    "fail_on_empty": True,
}
# Native rendering: s3_prefix may be None (then s3_keys), include/exclude lists.
with DAG(
    dag_id="brev_bad_input_download",
    schedule=None,
    start_date=START,
    render_template_as_native_obj=True,
    params={**TRANSFER_PARAMS, "s3_keys": None},
):
    S3ToBrevOperator(task_id="download", **COMMON, **templated(*TRANSFER_PARAMS.keys() - {"brev_conn_id"}, "s3_keys"))

UPLOAD_PARAMS = {"overwrite": False, "multipart_threshold": 64 * 1024 * 1024, "part_size": 8 * 1024 * 1024}
with DAG(
    dag_id="brev_bad_input_upload",
    schedule=None,
    start_date=START,
    render_template_as_native_obj=True,
    params={**TRANSFER_PARAMS, "s3_prefix": "out/", **UPLOAD_PARAMS},
):
    BrevToS3Operator(
        task_id="upload", **COMMON, **templated(*TRANSFER_PARAMS.keys() - {"brev_conn_id"}, *UPLOAD_PARAMS)
    )
