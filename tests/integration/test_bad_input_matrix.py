"""Issue 11, finding 2: bad input costs nothing. For every operator and every numeric,
name, path and spec parameter, a bad value fails the task on its first try (no retry spent), with an error naming
the parameter, before any ``brev`` call: nothing created, nothing launched, nothing listed.

Real ``dag.test()`` runs of the DAGs in tests/integration/dags/brev_bad_input_cases.py against the simulator; one DAG per
operator, the bad value comes in through ``params`` (so numbers arrive as rendered text, as they do in real DAGs).
"""

from __future__ import annotations

import pytest
from helpers import cli_calls, task_states

EXISTING = "busy-box"  # tests/integration/dags/brev_bad_input_cases.py: the "existing instance" of the exec/TAO cases

NAME = "bad name!"
CONN = "no such conn"
BOOL = "perhaps"
SECONDS = "must be a positive number of seconds (or a timedelta)"

CASES = [
    # --- BrevCreateInstanceOperator -----------------------------------------------------------------------
    ("create", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("create", {"instance_name": "x" * 64}, "instance_name: Instance name"),
    ("create", {"gpu": "L40S:zero"}, "Invalid gpu 'L40S:zero'"),
    ("create", {"gpu": "L40S:0"}, "GPU count must be at least 1"),
    ("create", {"gpu": "", "instance_types": "g6e xlarge"}, "instance_types: Invalid instance type"),
    ("create", {"instance_types": "g6e.xlarge"}, "Pass either gpu"),
    ("create", {"gpu": ""}, "No instance type requested"),
    ("create", {"min_vram": "-8"}, "min_vram must be a positive number of GB, got '-8'"),
    ("create", {"min_vram": "lots"}, "min_vram must be a positive number of GB, got 'lots'"),
    ("create", {"cloud_cred_id": "--org=other"}, "cloud_cred_id must be an id"),
    ("create", {"workspace_group_id": "ws 1"}, "workspace_group_id must be an id"),
    ("create", {"wait_for_ready": BOOL}, "wait_for_ready must be a boolean"),
    ("create", {"ready_timeout": -1}, "ready_timeout must be a positive number of seconds"),
    ("create", {"ready_timeout": 0}, "ready_timeout must be a positive number of seconds"),
    ("create", {"ready_timeout": "nan"}, "ready_timeout " + SECONDS + ", got 'nan'"),
    ("create", {"ready_timeout": "inf"}, "ready_timeout " + SECONDS + ", got 'inf'"),
    ("create", {"ready_timeout": "soon"}, "ready_timeout " + SECONDS + ", got 'soon'"),
    ("create", {"require_docker": BOOL}, "require_docker must be a boolean"),
    ("create", {"poll_interval": -1}, "poll_interval " + SECONDS + ", got '-1'"),  # measured
    ("create", {"poll_interval": 0}, "poll_interval must be a positive number of seconds"),
    ("create", {"deferrable": BOOL}, "deferrable must be a boolean"),
    ("create", {"delete_on_failure": "2"}, "delete_on_failure must be a boolean"),
    ("create", {"max_lifetime": -3600}, "max_lifetime must be a positive number of seconds"),
    ("create", {"max_lifetime": "1e12"}, "max_lifetime must be a positive number of seconds (or a timedelta) no"),
    ("create", {"name_prefix": "Bad_Prefix"}, "name_prefix: Invalid owner prefix"),
    ("create", {"adopt_existing": BOOL}, "adopt_existing must be a boolean"),
    ("create", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    ("create", {"max_price_per_hour": "cheap"}, "max_price_per_hour must be a positive number of dollars per hour"),
    ("create", {"max_price_per_hour": "0"}, "max_price_per_hour must be a positive number of dollars per hour"),
    ("create", {"reuse_key": "x" * 201}, "Invalid reuse_key"),
    ("create", {"reuse_key": "weekly", "instance_name": "my-box"}, "reuse_key='weekly' and instance_name='my-box'"),
    ("create", {"max_idle": "-60"}, "max_idle must be a positive number of seconds"),
    ("create", {"max_idle": "a week"}, "max_idle " + SECONDS + ", got 'a week'"),
    # --- BrevDeleteInstanceOperator -----------------------------------------------------------------------
    ("delete", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("delete", {"instance_name": ""}, "The instance name is empty: pass instance_name"),
    ("delete", {"wait_for_deletion": BOOL}, "wait_for_deletion must be a boolean"),
    ("delete", {"deletion_timeout": 0}, "deletion_timeout must be a positive number of seconds"),
    ("delete", {"deletion_timeout": "nan"}, "deletion_timeout must be a positive number of seconds"),
    ("delete", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    ("delete", {"release": "park"}, "Invalid release 'park': use 'delete' or 'stop'"),
    # --- BrevReadySensor ----------------------------------------------------------------------------------
    ("sensor", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("sensor", {"instance_name": ""}, "The instance name is empty"),
    ("sensor", {"require_docker": BOOL}, "require_docker must be a boolean"),
    ("sensor", {"deferrable": BOOL}, "deferrable must be a boolean"),
    ("sensor", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    # --- BrevSweepInstancesOperator -----------------------------------------------------------------------
    ("janitor", {"name_prefix": "Bad_Prefix"}, "name_prefix: Invalid owner prefix"),
    ("janitor", {"grace_period": -60}, "grace_period must be a number >= 0 of seconds"),
    ("janitor", {"grace_period": "forever"}, "grace_period must be a number >= 0 of seconds"),
    ("janitor", {"wait_for_deletion": BOOL}, "wait_for_deletion must be a boolean"),
    ("janitor", {"deletion_timeout": "-5"}, "deletion_timeout must be a positive number of seconds"),
    ("janitor", {"poll_interval": "inf"}, "poll_interval must be a positive number of seconds"),
    ("janitor", {"cli_retry_limit": 0}, "cli_retry_limit must be a whole number >= 1"),
    ("janitor", {"cli_retry_limit": "2.5"}, "cli_retry_limit must be a whole number >= 1"),
    ("janitor", {"cli_retry_delay": -1}, "cli_retry_delay must be a number >= 0 of seconds"),
    ("janitor", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    # --- S3ToBrevOperator ---------------------------------------------------------------------------------
    ("download", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("download", {"s3_bucket": "Bad_Bucket"}, "s3_bucket: Invalid bucket name"),
    ("download", {"s3_bucket": "bucket/in"}, "s3_bucket must be a bucket name alone"),
    ("download", {"s3_prefix": "in\nx/"}, "s3_prefix must be text without NUL characters or newlines"),
    ("download", {"s3_prefix": None, "s3_keys": ["in/"]}, "s3_keys must be object keys"),
    ("download", {"s3_keys": ["in/a"]}, "Pass either s3_prefix"),
    ("download", {"remote_dir": "data\nin"}, "remote_dir must be text without NUL characters or newlines"),
    ("download", {"remote_dir": ""}, "remote_dir must be a non-empty string"),
    ("download", {"remote_dir": "~"}, "remote_dir: The directory '~' is the remote home itself"),
    ("download", {"remote_dir": "~/.ssh/../.airflow-brev"}, "remote_dir: The directory"),
    ("download", {"include": "[a\\b]"}, "include: Pattern '[a\\\\b]'"),
    ("download", {"exclude": [""]}, "Every exclude pattern must be a non-empty string"),
    ("download", {"aws_conn_id": CONN}, "aws_conn_id must be a connection id"),
    ("download", {"max_attempts": 0}, ("max_attempts must be a", ">= 1")),
    ("download", {"concurrency": "many"}, ("concurrency must be a", "'many'")),
    ("download", {"curl_retries": -1}, ("curl_retries must be a", ">= 0")),
    ("download", {"url_expires_in": 10**7}, "url_expires_in must be at most 604800 s"),
    ("download", {"transfer_timeout": "nan"}, "transfer_timeout must be a positive number of seconds"),
    ("download", {"fail_on_empty": BOOL}, ("fail_on_empty", "boolean", "'perhaps'")),
    ("download", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    # --- BrevToS3Operator ---------------------------------------------------------------------------------
    ("upload", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("upload", {"s3_prefix": "out\x00/"}, "s3_prefix must be text without NUL characters or newlines"),
    ("upload", {"remote_dir": "a\rb"}, "remote_dir must be text without NUL characters or newlines"),
    ("upload", {"transfer_timeout": "inf"}, "transfer_timeout must be a positive number of seconds"),
    ("upload", {"remote_dir": "~/"}, "remote_dir: The directory '~/' is the remote home itself"),
    ("upload", {"remote_dir": "."}, "remote_dir: The directory '.' is the remote home itself"),
    ("upload", {"remote_dir": "/"}, "remote_dir: The directory '/' is the root directory"),
    ("upload", {"remote_dir": "$HOME"}, "remote_dir: The directory '$HOME' starts with a variable"),
    ("upload", {"overwrite": BOOL}, "overwrite must be a boolean"),
    ("upload", {"multipart_threshold": -1}, "multipart_threshold must be a whole number >= 0"),
    ("upload", {"part_size": 1024}, "part_size must be a whole number >= 5242880 and <= 5368709120"),
    ("upload", {"part_size": "8.5"}, "part_size must be a whole number"),
]


SECRET = "s3cr3t-value-never-shown"
#: The exec, TAO and preflight operators. The "existing instance" cases run on ``EXISTING``, which the test creates
#: directly in the simulator (no ``brev`` call); ``exec`` and the literal cases are ephemeral unless they name it.
#: Dags ``exec``/``tao``/``preflight`` take templated values; the others are ``LITERAL_CASES`` of the DAG file.
EXEC_CASES = [
    # --- BrevExecOperator, ephemeral (each of these created and deleted an instance, three times: measured) ----
    ("exec", {"secret_env": {"A;rm -rf ~": SECRET}}, "secret_env key must be an environment variable name"),
    ("exec", {"env": {"BAD-NAME": "x"}}, "env key must be an environment variable name such as MY_VAR"),
    ("exec", {"command": "echo " + "x" * 200 * 1024}, ("command (204805 bytes)", "longer than 102400 bytes")),
    ("exec", {"cwd": "a\x00b"}, "cwd must be text without NUL characters or newlines"),
    ("exec_ready_timeout", {}, "ready_timeout " + SECONDS + ", got -5"),
    ("exec", {"command": ""}, "The command is empty"),
    ("exec", {"command": "echo a\x00b"}, "command must not contain NUL characters"),
    ("exec", {"env": {"A": "x\x00y"}}, "env['A'] must not contain NUL characters"),
    ("exec", {"secret_env": "A=b"}, "secret_env must be a dict of environment variables"),
    ("exec", {"gpu": "L40S:0"}, "GPU count must be at least 1"),
    ("exec", {"gpu": None}, "No instance: pass instance_name"),
    ("exec", {"min_vram": "-8"}, "min_vram must be a positive number of GB"),
    ("exec", {"release": "park"}, "Invalid release 'park': use 'delete' or 'stop'"),
    ("exec", {"max_idle": "-1"}, "max_idle must be a positive number of seconds"),
    ("exec", {"instance_name": EXISTING, "gpu": None, "reuse_key": "k"}, "reuse_key and release apply to the"),
    ("exec", {"instance_name": NAME, "gpu": None}, "instance_name: Invalid instance name"),
    ("exec", {"inputs": {"http://bucket/in/": "data"}}, "Expected an s3://bucket/prefix URI"),
    ("exec", {"outputs": {"../out": "s3://bucket/out/"}}, "outputs"),
    # a step's directories are its own: never the home, the provider's state, a variable (measured: "~" uploaded
    # the whole home, "~" as an input wrote over ~/.bashrc, and "~" next to "~/ckpt" passed the overlap check)
    ("exec", {"outputs": {"~": "s3://bucket/out/"}}, ("outputs: The directory '~' is the remote home", "work/out")),
    ("exec", {"inputs": {"s3://bucket/in/": "~"}}, "inputs: The directory '~' is the remote home itself"),
    ("exec", {"outputs": {"~": "s3://bucket/a/", "~/ckpt": "s3://bucket/b/"}}, "'~' is the remote home itself"),
    ("exec", {"outputs": {"~/": "s3://bucket/out/"}}, "outputs: The directory '~/' is the remote home itself"),
    ("exec", {"inputs": {"s3://bucket/in/": "."}}, "inputs: The directory '.' is the remote home itself"),
    ("exec", {"inputs": {"s3://bucket/in/": "./"}}, "inputs: The directory './' is the remote home itself"),
    ("exec", {"inputs": {"s3://bucket/in/": ""}}, "inputs: A directory on the instance must be a non-empty path"),
    ("exec", {"outputs": {"$HOME": "s3://bucket/out/"}}, "outputs: The directory '$HOME' starts with a variable"),
    ("exec", {"outputs": {"~/.airflow-brev/jobs": "s3://bucket/o/"}}, "outputs: The directory '~/.airflow-brev/jobs'"),
    ("exec", {"inputs": {"s3://bucket/in/": ".airflow-brev"}}, "is the provider's own working state"),
    ("exec", {"outputs": {"/home/ubuntu": "s3://bucket/out/"}}, "'/home/ubuntu' is, or holds, a home directory"),
    ("exec", {"outputs": {"/": "s3://bucket/out/"}}, "outputs: The directory '/' is the root directory"),
    ("exec", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    ("exec", {"aws_conn_id": CONN}, "aws_conn_id must be a connection id"),
    ("exec", {"max_price_per_hour": "-1"}, "max_price_per_hour must be a positive number of dollars per hour"),
    ("exec", {"max_run_cost": "free"}, "max_run_cost must be a positive number of dollars, got 'free'"),
    ("exec", {"max_run_cost": 5}, "max_run_cost=5 needs timeout"),  # without one a step's cost has no bound
    ("exec", {"instance_name": EXISTING, "gpu": None, "max_price_per_hour": 1}, "set max_price_per_hour on the task"),
    ("exec_max_lifetime", {}, "max_lifetime " + SECONDS),
    ("exec_require_docker", {}, "require_docker must be a boolean"),
    # --- BrevExecOperator on an existing instance (measured: launched the job, then failed, job left running) --
    ("exec_log_chunk_bytes", {}, "log_chunk_bytes must be a whole number >= 1, got 0"),
    ("exec_poll_interval", {}, "poll_interval " + SECONDS + ", got -1"),
    ("exec_timeout", {}, "timeout " + SECONDS + ", got 0"),
    ("exec_deferrable", {}, "deferrable must be a boolean"),
    ("exec_detach", {}, "detach must be a boolean"),
    ("exec_skip_on_exit_code", {}, "skip_on_exit_code must be a whole number >= 0 and <= 255, got 256"),
    ("exec_on_kill_action", {}, "on_kill_action must be one of 'keep', 'kill', got 'explode'"),
    ("exec_max_poll_failures", {}, "max_poll_failures must be a whole number >= 0, got '2.5'"),
    ("exec_max_instance_recoveries", {}, "max_instance_recoveries must be a whole number >= 0, got -1"),
    ("exec_output_sync_interval", {}, "output_sync_interval " + SECONDS + ", got 0"),
    ("exec_progress_regex", {}, "progress_regex must be a valid regular expression"),
    ("exec_checkpoint_regex", {}, "checkpoint_regex must be a valid regular expression"),
    # --- TaoOperator ------------------------------------------------------------------------------------------
    ("tao", {"image": "tao-toolkit"}, "image: Invalid TAO image 'tao-toolkit'"),
    ("tao", {"image": "nvcr.io/nvidia/tao/tao-toolkit"}, "image: Invalid TAO image"),  # no tag: no 'latest'
    ("tao", {"spec": None, "spec_s3_uri": "s3://Bad_Bucket/spec.yaml"}, "spec_s3_uri: Invalid bucket name"),
    ("tao", {"spec": None, "spec_s3_uri": "s3://bucket/specs/"}, "spec_s3_uri must be the URI of an S3 object"),
    ("tao", {"spec": "evaluate: {}"}, "spec must be a dict"),
    ("tao", {"spec_file": "a\nb"}, "spec_file must be text without NUL characters or newlines"),
    ("tao", {"results_dir": "../results"}, "results_dir: "),
    ("tao", {"results_dir": ""}, "results_dir must be a non-empty string"),
    ("tao", {"results_dir": "~"}, "results_dir: The directory '~' is the remote home itself"),
    ("tao", {"overrides": ["a=1"]}, "overrides must be a dict"),
    ("tao", {"overrides": {"bad key": 1}}, "The TAO command cannot be built: Invalid override key 'bad key'"),
    ("tao", {"mounts": {"data": "relative"}}, "mounts['data'] must be an absolute container path"),
    ("tao", {"container_env": {"1X": "y"}}, "container_env key must be an environment variable name"),
    ("tao", {"container_secret_env": {"A B": SECRET}}, "container_secret_env key must be an environment variable"),
    ("tao", {"s3_inputs": ["http://bucket/x"]}, "s3_inputs: Expected an s3://bucket/prefix URI"),
    ("tao", {"input_paths": ["a\nb"]}, "input_paths must be text without NUL characters or newlines"),
    ("tao", {"instance_paths": [""]}, "instance_paths must be a non-empty string"),
    ("tao", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("tao_task", {}, "Invalid TAO task 'Visual ChangeNet'"),
    ("tao_num_gpus", {}, "num_gpus must be 'all' or a whole number >= 1, got 0"),
    ("tao_pull_timeout", {}, "pull_timeout " + SECONDS + ", got 'nan'"),
    ("tao", {"ngc_conn_id": CONN}, "ngc_conn_id must be a connection id"),
    ("tao", {"hf_conn_id": CONN}, "hf_conn_id must be a connection id"),
    ("tao", {"aws_conn_id": CONN}, "aws_conn_id must be a connection id"),
    ("tao_require_new_checkpoint", {}, "require_new_checkpoint must be a boolean"),
    ("tao_shm_size", {}, "shm_size must be text without NUL characters or newlines"),
    # --- BrevPreflightOperator --------------------------------------------------------------------------------
    ("preflight", {"s3_inputs": ["s3://Bad_Bucket/x"]}, "s3_inputs: Invalid bucket name"),
    ("preflight", {"image": "ubuntu:latest"}, "image: Invalid TAO image"),
    ("preflight", {"spec": ["x"]}, "spec must be a dict"),
    ("preflight", {"input_paths": "a\x00b"}, "input_paths must be text without NUL characters"),
    ("preflight", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
    ("preflight_check_brev", {}, "check_brev must be a boolean"),
    ("preflight", {"aws_conn_id": CONN}, "aws_conn_id must be a connection id"),
    ("preflight", {"ngc_conn_id": CONN}, "ngc_conn_id must be a connection id"),
    ("preflight", {"hf_conn_id": CONN}, "hf_conn_id must be a connection id"),
]


def _single_task(dag_run):
    (ti,) = dag_run.get_task_instances()
    return ti


@pytest.fixture
def run_case(run_dag):
    """Run ``brev_bad_input_<dag>`` with its default params overridden by ``conf``."""

    def run(dag: str, conf: dict | None = None):
        return run_dag(f"brev_bad_input_{dag}", conf=conf)

    return run


@pytest.mark.parametrize(
    ("dag", "conf", "expected"), CASES, ids=[f"{dag}-{'-'.join(conf)}-{i}" for i, (dag, conf, _) in enumerate(CASES)]
)
def test_bad_input_fails_on_the_first_try_before_any_brev_call(run_case, brev_sim, task_logs, dag, conf, expected):
    _assert_refused_before_any_brev_call(run_case(dag, conf), brev_sim, task_logs, expected)


@pytest.mark.parametrize(
    ("dag", "conf", "expected"),
    EXEC_CASES,
    ids=[f"{dag}-{'-'.join(conf)}-{i}" for i, (dag, conf, _) in enumerate(EXEC_CASES)],
)
def test_bad_exec_tao_input_fails_on_the_first_try_before_any_brev_call(
    run_case, brev_sim, task_logs, dag, conf, expected
):
    brev_sim.create_instance_directly(EXISTING)
    _assert_refused_before_any_brev_call(run_case(dag, conf), brev_sim, task_logs, expected)
    assert SECRET not in task_logs.text  # secret values are never shown, not even a bad variable's


def _assert_refused_before_any_brev_call(dag_run, brev_sim, task_logs, expected) -> None:
    ti = _single_task(dag_run)
    assert ti.state == "failed"
    assert ti.try_number == 1  # BrevInvalidInputError is an AirflowFailException: no retry is spent
    assert "BrevInvalidInputError" in task_logs.text
    for fragment in (expected,) if isinstance(expected, str) else expected:
        assert fragment in task_logs.text
    assert cli_calls(brev_sim, "create") == []
    assert brev_sim.runs() == []  # nothing launched on any instance
    assert brev_sim.calls() == []  # not even a listing: validation comes before the first `brev` call


def test_a_bad_value_given_to_one_run_does_not_reach_the_next(run_case, brev_sim, task_logs):
    """The params of one ``dag.test()`` run stay in that run (tests/conftest.py ``run_dag``): on Airflow 3.0 a DAG's
    deep copy shares its tasks' params, into which the run writes its conf."""
    run_case("create", {"max_idle": "a week"})
    task_logs.lines.clear()
    dag_run = run_case("create", {"gpu": "NOPE:1"})
    assert task_states(dag_run) == {"create": "failed"}
    assert "a week" not in task_logs.text
    assert "No Brev instance type offers 1x NOPE" in task_logs.as_read


def test_exec_defaults_get_past_validation_to_brev(run_case, brev_sim, task_logs):
    ti = _single_task(run_case("exec"))
    assert ti.state == "success"
    assert len(cli_calls(brev_sim, "create")) == 1  # ephemeral: created, ran, deleted
    assert brev_sim.runs()
    assert "BrevInvalidInputError" not in task_logs.text


@pytest.mark.parametrize("dag", ["tao", "preflight"])
def test_tao_and_preflight_defaults_get_past_validation(run_case, brev_sim, task_logs, dag):
    brev_sim.create_instance_directly(EXISTING)
    run_case(dag)
    assert "BrevInvalidInputError" not in task_logs.text  # whatever happens next (no NGC key, ...) is not validation


def test_sensor_zero_poke_interval_and_zero_timeout_fail_before_any_brev_call(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_bad_input_sensor_limits")
    assert task_states(dag_run) == {"zero_poke_interval": "failed", "zero_timeout": "failed"}
    assert {ti.try_number for ti in dag_run.get_task_instances()} == {1}
    assert "poke_interval " + SECONDS + ", got 0.0" in task_logs.text
    assert "timeout " + SECONDS + ", got 0.0" in task_logs.text
    assert brev_sim.calls() == []


# --- controls: the defaults of every matrix DAG are good, so each failure above is the bad value's alone --------


def test_create_defaults_are_good(run_case, brev_sim):
    ti = _single_task(run_case("create"))
    assert ti.state == "success"
    assert len(cli_calls(brev_sim, "create")) == 1
    (instance,) = brev_sim.instances()
    assert instance["name"].startswith("afbrev-")  # instance_name "" rendered: a derived name


def test_create_with_wait_for_ready_false_as_text_does_not_wait(run_case, brev_sim):
    brev_sim.set_fault("ssh_refused", seconds=120)  # waiting for readiness would time out (ready_timeout 2 s)
    ti = _single_task(run_case("create", {"wait_for_ready": "false", "ready_timeout": 2}))
    assert ti.state == "success"
    assert len(brev_sim.instances()) == 1


@pytest.mark.parametrize(("dag", "command"), [("delete", "delete"), ("sensor", "ls"), ("janitor", "ls")])
def test_other_defaults_get_past_validation_to_brev(run_case, brev_sim, task_logs, dag, command):
    brev_sim.create_instance_directly("nobody-home")
    ti = _single_task(run_case(dag))
    assert ti.state == "success"
    assert cli_calls(brev_sim, command)
    assert "BrevInvalidInputError" not in task_logs.text


def test_upload_defaults_get_past_validation_to_the_instance(run_case, brev_sim, aws_connection, task_logs):
    ti = _single_task(run_case("upload", {"s3_bucket": aws_connection.bucket}))  # a bucket that exists
    assert ti.state == "failed"  # the instance does not exist...
    assert ti.try_number == 3  # (a retriable error)...
    assert cli_calls(brev_sim, "exec")  # ...which only `brev` could tell
    assert "BrevInvalidInputError" not in task_logs.text
