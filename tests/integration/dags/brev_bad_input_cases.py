"""DAGs exercised by tests/integration/test_bad_input_matrix.py: one DAG per operator, every parameter templated
from ``params``, so one DAG serves every bad value (``dag.test(run_conf=...)``). The defaults are good values.

Each task has ``retries=2``: a bad value must fail it on the first try (no retry is spent).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.exec import BrevExecOperator
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.operators.tao import BrevPreflightOperator, TaoOperator
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
    "max_price_per_hour": "",
    "reuse_key": "",
    "max_idle": 3600,
}
with DAG(dag_id="brev_bad_input_create", schedule=None, start_date=START, params=CREATE_PARAMS):
    BrevCreateInstanceOperator(task_id="create", **COMMON, **templated(*CREATE_PARAMS.keys() - {"brev_conn_id"}))

DELETE_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": "nobody-home",
    "wait_for_deletion": "false",
    "deletion_timeout": 30,
    "release": "delete",
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

# --- exec, TAO and preflight ----------------------------------------------------------------------------------
#: The instance the "existing instance" cases run on (the test creates it directly in the simulator).
EXISTING = "busy-box"
TAO_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"

# Their templated fields take dicts and lists: native rendering. The defaults are good values (ephemeral mode).
EXEC_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": None,
    "command": "echo ok",
    "env": None,
    "secret_env": None,
    "cwd": None,
    "gpu": "L40S:1",
    "instance_types": None,
    "min_vram": None,
    "inputs": None,
    "outputs": None,
    "max_price_per_hour": None,
    "max_run_cost": None,
    "reuse_key": None,
    "max_idle": 3600,
    "release": None,
    "aws_conn_id": "aws_default",
}
with DAG(
    dag_id="brev_bad_input_exec",
    schedule=None,
    start_date=START,
    render_template_as_native_obj=True,
    params=EXEC_PARAMS,
):
    BrevExecOperator(task_id="run", ready_timeout=60, **COMMON, **templated(*EXEC_PARAMS.keys() - {"brev_conn_id"}))

TAO_PARAMS = {
    "brev_conn_id": "brev_default",
    "instance_name": EXISTING,
    "image": TAO_IMAGE,
    "spec": {"evaluate": {"batch_size": 1}},
    "spec_file": None,
    "spec_s3_uri": None,
    "overrides": None,
    "results_dir": "tao-results",
    "mounts": None,
    "container_env": None,
    "container_secret_env": None,
    "s3_inputs": None,
    "input_paths": None,
    "instance_paths": None,
    "aws_conn_id": "aws_default",
    "ngc_conn_id": "ngc_default",
    "hf_conn_id": "hf_default",
}
with DAG(
    dag_id="brev_bad_input_tao", schedule=None, start_date=START, render_template_as_native_obj=True, params=TAO_PARAMS
):
    TaoOperator(
        task_id="tao",
        task="visual_changenet",
        action="evaluate",
        **COMMON,
        **templated(*TAO_PARAMS.keys() - {"brev_conn_id"}),
    )

PREFLIGHT_PARAMS = {
    "brev_conn_id": "brev_default",
    "s3_inputs": None,
    "image": None,
    "spec": None,
    "input_paths": None,
    "instance_paths": None,
    "aws_conn_id": "aws_default",
    "ngc_conn_id": "ngc_default",
    "hf_conn_id": "hf_default",
}
with DAG(
    dag_id="brev_bad_input_preflight",
    schedule=None,
    start_date=START,
    render_template_as_native_obj=True,
    params=PREFLIGHT_PARAMS,
):
    BrevPreflightOperator(task_id="preflight", **COMMON, **templated(*PREFLIGHT_PARAMS.keys() - {"brev_conn_id"}))

# Parameters that are not templated: one DAG per bad value, ``brev_bad_input_<case>``, each with one task.
EPHEMERAL = {"operator": BrevExecOperator, "command": "echo ok", "gpu": "L40S:1"}
ON_EXISTING = {"operator": BrevExecOperator, "command": "echo ok", "instance_name": EXISTING}
TAO = {
    "operator": TaoOperator,
    "task": "visual_changenet",
    "action": "evaluate",
    "instance_name": EXISTING,
    "image": TAO_IMAGE,
    "spec": {"evaluate": {}},
}
LITERAL_CASES: dict[str, dict] = {
    "exec_ready_timeout": {**EPHEMERAL, "ready_timeout": -5},  # measured
    "exec_max_lifetime": {**EPHEMERAL, "max_lifetime": -60},
    "exec_require_docker": {**EPHEMERAL, "require_docker": "perhaps"},
    "exec_log_chunk_bytes": {**ON_EXISTING, "log_chunk_bytes": 0},  # measured
    "exec_poll_interval": {**ON_EXISTING, "poll_interval": -1},  # measured
    "exec_timeout": {**ON_EXISTING, "timeout": 0},
    "exec_deferrable": {**ON_EXISTING, "deferrable": "perhaps"},
    "exec_detach": {**ON_EXISTING, "detach": "perhaps"},
    "exec_skip_on_exit_code": {**ON_EXISTING, "skip_on_exit_code": [1, 256]},
    "exec_on_kill_action": {**ON_EXISTING, "on_kill_action": "explode"},
    "exec_max_poll_failures": {**ON_EXISTING, "max_poll_failures": "2.5"},
    "exec_max_instance_recoveries": {**ON_EXISTING, "max_instance_recoveries": -1},
    "exec_output_sync_interval": {**ON_EXISTING, "output_sync_interval": 0},
    "exec_progress_regex": {**ON_EXISTING, "progress_regex": "(\\d+"},
    "exec_checkpoint_regex": {**ON_EXISTING, "checkpoint_regex": "[a-"},
    "tao_task": {**TAO, "task": "Visual ChangeNet"},
    "tao_num_gpus": {**TAO, "num_gpus": 0},
    "tao_pull_timeout": {**TAO, "pull_timeout": "nan"},
    "tao_require_new_checkpoint": {**TAO, "require_new_checkpoint": "perhaps"},
    "tao_shm_size": {**TAO, "shm_size": "8g\n--privileged"},
    "preflight_check_brev": {"operator": BrevPreflightOperator, "check_brev": "perhaps"},
}
for _case, _kwargs in LITERAL_CASES.items():
    with DAG(
        dag_id=f"brev_bad_input_{_case}", schedule=None, start_date=START, params={"brev_conn_id": "brev_default"}
    ):
        _options = dict(_kwargs)
        _options.pop("operator")(task_id="run", **COMMON, **_options)
