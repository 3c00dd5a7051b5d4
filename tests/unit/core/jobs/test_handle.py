"""Unit tests of ``airflow_provider_brev/core/jobs/handle.py``."""

from __future__ import annotations

import re

import pytest

from airflow_provider_brev.core.jobs.handle import (
    DEFAULT_BASE_DIR,
    DEFAULT_MAX_BYTES,
    FINISHED,
    KILLED_EXIT_CODE,
    LOST,
    MAX_COMMAND_LENGTH,
    MAX_JOB_ID_LENGTH,
    MISSING,
    RUNNING,
    SETUP_FAILED_EXIT_CODE,
    TERMINATED_EXIT_CODE,
    RemoteJob,
    check_path,
    generate_job_id,
    job_id_prefix,
    shell_path,
)
from airflow_provider_brev.core.jobs.pulls import pull_outcome
from unit.core.jobs.follower_helpers import JOB
from unit.core.jobs.pulls_helpers import poll


def test_job_limits_and_exit_codes():
    assert (DEFAULT_BASE_DIR, DEFAULT_MAX_BYTES, MAX_COMMAND_LENGTH) == (".airflow-brev/jobs", 4194304, 102400)
    assert (MAX_JOB_ID_LENGTH, SETUP_FAILED_EXIT_CODE, TERMINATED_EXIT_CODE, KILLED_EXIT_CODE) == (80, 125, 143, 137)


def test_job_ids_are_deterministic_slugs():
    prefix = job_id_prefix(dag_id="My DAG", task_id="train.step", run_id="r", map_index=2)
    assert re.fullmatch(r"my-dag-train-step-[0-9a-f]{10}", prefix)
    assert job_id_prefix(dag_id="My DAG", task_id="train.step", run_id="r", map_index=3) != prefix
    assert job_id_prefix(dag_id="--", task_id="..", run_id="r").startswith("job-")
    long = generate_job_id(dag_id="d" * 100, task_id="t" * 100, run_id="r", try_number=9_999_999_999)
    assert len(long) <= MAX_JOB_ID_LENGTH and long.endswith("-t9999999999")
    assert len(job_id_prefix(dag_id="d" * 100, task_id="t", run_id="r")) == 56 + 1 + 10
    assert generate_job_id(dag_id="d", task_id="t", run_id="r", try_number=0).endswith("-t0")
    for bad in (-1, 10**10, True, 1.0, "1"):
        with pytest.raises(ValueError, match="try_number must be a non-negative integer"):
            generate_job_id(dag_id="d", task_id="t", run_id="r", try_number=bad)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must be a non-empty string"),
        ("  ", "must be a non-empty string"),
        (None, "must be a non-empty string"),
        ("a'b", "must not contain quotes"),
        ('a"b', "must not contain quotes"),
        ("a\nb", "must not contain quotes"),
        ("a\rb", "must not contain quotes"),
        ("a\x00b", "must not contain quotes"),
    ],
)
def test_remote_paths_are_refused_for_their_reason(value, message):
    with pytest.raises(ValueError, match=message):
        check_path(value, "secret_env_path")


@pytest.mark.parametrize(
    ("base_dir", "message"),
    [
        ("a/../b", "must not contain '..'"),
        ("/", "must name a directory"),
        ("~/", "must name a directory"),
        (".", "must name a directory"),
        ("~", "must name a directory"),
        ("", "must be a non-empty string"),
    ],
)
def test_bad_base_dirs(base_dir, message):
    with pytest.raises(ValueError, match=message):
        RemoteJob("j", base_dir=base_dir)


def test_handle_paths_and_round_trip():
    job = RemoteJob("j.1", base_dir="~/work/jobs/")
    assert job.base_dir == "work/jobs"
    assert (job.job_dir, job.log_path, job.pid_path) == ("work/jobs/j.1", "work/jobs/j.1/log", "work/jobs/j.1/pid")
    assert (job.exit_code_path, job.script_path) == ("work/jobs/j.1/exit_code", "work/jobs/j.1/job.sh")
    assert (job.launched_path, job.killed_path) == ("work/jobs/j.1/launched", "work/jobs/j.1/killed")
    assert job.to_dict() == {
        "job_id": "j.1",
        "base_dir": "work/jobs",
        "job_dir": "work/jobs/j.1",
        "log_path": "work/jobs/j.1/log",
    }
    assert RemoteJob.from_dict(job.to_dict()) == job
    assert RemoteJob.from_dict({"job_id": "x", "base_dir": ""}).base_dir == DEFAULT_BASE_DIR
    assert RemoteJob("x", base_dir="/abs/dir/").base_dir == "/abs/dir"
    for bad in ({"base_dir": "x"}, ["job_id"]):
        with pytest.raises(ValueError, match="Not a remote job handle"):
            RemoteJob.from_dict(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Invalid job id"):
        RemoteJob(3)  # type: ignore[arg-type]
    assert shell_path("~", relative_to_home=True) == '"$HOME"'
    assert shell_path("~/", relative_to_home=True) == '"$HOME"'
    assert shell_path("~//a b", relative_to_home=True) == "\"$HOME\"/'a b'"
    assert shell_path("rel", relative_to_home=False) == "rel"
    assert shell_path("rel", relative_to_home=True) == '"$HOME"/rel'
    assert JOB.shell_path("/abs") == "/abs"


@pytest.mark.parametrize(
    ("state", "exit_code", "outcome"),
    [
        (RUNNING, None, "wait"),
        (FINISHED, 0, "done"),
        (FINISHED, 1, "failed"),
        (LOST, None, "failed"),
        (MISSING, None, "failed"),
        (LOST, 0, "failed"),
        (MISSING, 0, "failed"),
    ],
)
def test_what_a_poll_of_a_pull_means(state, exit_code, outcome):
    assert pull_outcome(poll(state, exit_code)) == outcome
