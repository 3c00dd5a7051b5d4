"""Issue 11, finding 2: bad input costs nothing. For every operator (but the exec/TAO ones) and every numeric,
name, path and spec parameter, a bad value fails the task on its first try (no retry spent), with an error naming
the parameter, before any ``brev`` call: nothing created, nothing launched, nothing listed.

Real ``dag.test()`` runs of the DAGs in tests/dags/brev_bad_input_cases.py against the simulator; one DAG per
operator, the bad value comes in through ``params`` (so numbers arrive as rendered text, as they do in real DAGs).
"""

from __future__ import annotations

import pytest
from helpers import cli_calls, task_states

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
    # --- BrevDeleteInstanceOperator -----------------------------------------------------------------------
    ("delete", {"instance_name": NAME}, "instance_name: Invalid instance name"),
    ("delete", {"instance_name": ""}, "The instance name is empty: pass instance_name"),
    ("delete", {"wait_for_deletion": BOOL}, "wait_for_deletion must be a boolean"),
    ("delete", {"deletion_timeout": 0}, "deletion_timeout must be a positive number of seconds"),
    ("delete", {"deletion_timeout": "nan"}, "deletion_timeout must be a positive number of seconds"),
    ("delete", {"brev_conn_id": CONN}, "brev_conn_id must be a connection id"),
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
    ("upload", {"overwrite": BOOL}, "overwrite must be a boolean"),
    ("upload", {"multipart_threshold": -1}, "multipart_threshold must be a whole number >= 0"),
    ("upload", {"part_size": 1024}, "part_size must be a whole number >= 5242880 and <= 5368709120"),
    ("upload", {"part_size": "8.5"}, "part_size must be a whole number"),
]


def _single_task(dag_run):
    (ti,) = dag_run.get_task_instances()
    return ti


@pytest.fixture
def run_case(run_dag, dagbag):
    """Run ``brev_bad_input_<dag>`` with its default params overridden by ``conf``: every param is passed, because
    params given to one ``dag.test()`` run would otherwise leak into the next."""

    def run(dag: str, conf: dict | None = None):
        dag_id = f"brev_bad_input_{dag}"
        return run_dag(dag_id, conf={**dagbag.get_dag(dag_id).params.dump(), **(conf or {})})

    return run


@pytest.mark.parametrize(
    ("dag", "conf", "expected"), CASES, ids=[f"{dag}-{'-'.join(conf)}-{i}" for i, (dag, conf, _) in enumerate(CASES)]
)
def test_bad_input_fails_on_the_first_try_before_any_brev_call(run_case, brev_sim, task_logs, dag, conf, expected):
    ti = _single_task(run_case(dag, conf))
    assert ti.state == "failed"
    assert ti.try_number == 1  # BrevInvalidInputError is an AirflowFailException: no retry is spent
    assert "BrevInvalidInputError" in task_logs.text
    for fragment in (expected,) if isinstance(expected, str) else expected:
        assert fragment in task_logs.text
    assert cli_calls(brev_sim, "create") == []
    assert brev_sim.runs() == []  # nothing launched on any instance
    assert brev_sim.calls() == []  # not even a listing: validation comes before the first `brev` call


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


def test_upload_defaults_get_past_validation_to_the_instance(run_case, brev_sim, task_logs):
    ti = _single_task(run_case("upload"))
    assert ti.state == "failed"  # the instance does not exist...
    assert ti.try_number == 3  # (a retriable error)...
    assert cli_calls(brev_sim, "exec")  # ...which only `brev` could tell
    assert "BrevInvalidInputError" not in task_logs.text
