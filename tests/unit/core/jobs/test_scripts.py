"""Unit tests of ``airflow_provider_brev/core/jobs/scripts.py``."""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.core.jobs.handle import MAX_COMMAND_LENGTH, MAX_POLL_WAIT
from airflow_provider_brev.core.jobs.remote import RemoteJob, parse_poll_output
from airflow_provider_brev.core.jobs.scripts import (
    build_kill_command,
    build_launch_command,
    build_poll_command,
    build_poll_many_command,
    build_secret_env_file,
    polls_that_fit,
)
from unit.core.jobs.follower_helpers import JOB

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": ""}, "command must be a non-empty string"),
        ({"command": None}, "command must be a non-empty string"),
        ({"command": "a\x00b"}, "command must not contain NUL"),
        ({"env": {"A": "x\x00"}}, "Environment variable A must not contain NUL"),
        ({"cwd": ""}, "cwd must be a non-empty path"),
        ({"cwd": "  "}, "cwd must be a non-empty path"),
        ({"cwd": 3}, "cwd must be a non-empty path"),
        ({"cwd": "a\x00"}, "cwd must be a non-empty path"),
        ({"secret_env_path": ""}, "secret_env_path must be a non-empty string"),  # the empty secret-file guard
        ({"secret_env_path": "a'b"}, "must not contain quotes"),
    ],
)
def test_launch_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_launch_command(JOB, **{"command": "echo", **kwargs})


def test_poll_and_kill_arguments_are_checked():
    for offset, max_bytes, message in (
        (-1, 1, "offset must be an integer >= 0"),
        (0, 0, "max_bytes must be an integer >= 1"),
    ):
        with pytest.raises(ValueError, match=message):
            build_poll_command(JOB, offset=offset, max_bytes=max_bytes)
    with pytest.raises(ValueError, match="offset must be an integer >= 0, got True"):
        build_poll_command(JOB, offset=True)
    with pytest.raises(ValueError, match="max_bytes must be an integer >= 1, got 1.5"):
        build_poll_command(JOB, offset=0, max_bytes=1.5)  # type: ignore[arg-type]
    assert "__BJ_OFFSET=7\n__BJ_MAX=1\n__BJ_WAIT=0\n" in build_poll_command(JOB, offset=7, max_bytes=1)
    for wait, tenths in ((2.0, 20), (0.04, 0), (0.06, 1), (-1.0, 0), (MAX_POLL_WAIT + 1, int(MAX_POLL_WAIT * 10))):
        assert f"__BJ_WAIT={tenths}\n" in build_poll_command(JOB, offset=0, wait=wait), wait
    for wait in (True, "1", float("nan")):
        with pytest.raises(ValueError, match="wait must be a number of seconds"):
            build_poll_command(JOB, offset=0, wait=wait)  # type: ignore[arg-type]
    for grace in (-0.1, 3600.1, True, "1"):
        with pytest.raises(ValueError, match="grace_seconds must be between 0 and 3600"):
            build_kill_command(JOB, grace_seconds=grace)  # type: ignore[arg-type]
    assert "__BJ_TICKS=1\n" in build_kill_command(JOB, grace_seconds=0)
    assert "__BJ_TICKS=36000\n" in build_kill_command(JOB, grace_seconds=3600)
    assert "__BJ_TICKS=25\n__BJ_GRACE=3\n" in build_kill_command(JOB, grace_seconds=2.5)
    with pytest.raises(ValueError, match="longer than 102400 bytes"):
        build_launch_command(JOB, "x" * MAX_COMMAND_LENGTH)
    build_launch_command(JOB, "x" * (MAX_COMMAND_LENGTH - 8000))


def test_the_secret_env_file():
    assert build_secret_env_file({"A": "it's", "B": 2}) == "export A='it'\\''s'\nexport B='2'\n"
    with pytest.raises(ValueError, match="Secret environment variable A must not contain NUL"):
        build_secret_env_file({"A": "x\x00"})
    assert build_secret_env_file({}) == ""


def _run(script: str, home: Path) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", script],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        cwd=home,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.splitlines()


def _job(home: Path, job_id: str, log: bytes, *, exit_code: int | None = None, pid: int | None = None) -> RemoteJob:
    job = RemoteJob(job_id)
    (home / job.job_dir).mkdir(parents=True)
    (home / job.log_path).write_bytes(log)
    if exit_code is not None:
        (home / job.exit_code_path).write_text(f"{exit_code}\n")
    if pid is not None:
        (home / job.pid_path).write_text(f"{pid}\n")
    return job


@pytest.fixture
def leader():
    """A live process group leader standing in for a running job."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


def test_each_job_gets_the_block_its_own_poll_would_print(tmp_path, leader):
    done = _job(tmp_path, "done-1", b"a\nb\nc\n", exit_code=3)
    running = _job(tmp_path, "run-1", b"0123456789", pid=leader)
    missing = RemoteJob("gone-1")
    polls = [(done, 2, 100), (running, 4, 3), (missing, 0, 10)]
    lines = _run(build_poll_many_command(polls), tmp_path)
    for job, offset, max_bytes in polls:
        alone = parse_poll_output(
            _run(build_poll_command(job, offset=offset, max_bytes=max_bytes), tmp_path), job.job_id, offset
        )
        assert parse_poll_output(lines, job.job_id, offset) == alone
    assert parse_poll_output(lines, "done-1", 2).chunk == b"b\nc\n"
    assert parse_poll_output(lines, "run-1", 4).chunk == b"456"
    assert parse_poll_output(lines, "gone-1", 0).state == "missing"


def test_the_wait_ends_as_soon_as_any_job_ends(tmp_path, leader):
    running = _job(tmp_path, "run-1", b"", pid=leader)
    other = _job(tmp_path, "run-2", b"", pid=leader)
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", build_poll_many_command([(running, 0, 10), (other, 0, 10)], wait=10.0)],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # the poll is waiting: both jobs run
    assert proc.poll() is None
    (tmp_path / other.exit_code_path).write_text("0\n")
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - started < 9  # not the whole wait
    assert parse_poll_output(out.splitlines(), "run-2", 0).state == "finished"
    assert parse_poll_output(out.splitlines(), "run-1", 0).state == "running"


@pytest.mark.parametrize(
    ("polls", "match"),
    [([], "at least one job"), ([(RemoteJob("a"), 0, 1), (RemoteJob("a"), 5, 1)], "each job once")],
)
def test_a_many_job_poll_refuses_no_job_and_a_job_twice(polls, match):
    with pytest.raises(ValueError, match=match):
        build_poll_many_command(polls)


def test_polls_that_fit_are_the_most_jobs_one_poll_script_holds():
    base = "/".join(["d" * 200] * 4)  # job directories of over 900 characters
    polls = [(RemoteJob(f"many-{i:03d}-" + "x" * 110, base_dir=base), 10**9, 10**9) for i in range(120)]
    fit = polls_that_fit(polls)
    assert 1 < fit < len(polls)
    assert len(build_poll_many_command(polls[:fit], wait=MAX_POLL_WAIT).encode()) <= MAX_COMMAND_LENGTH
    with pytest.raises(ValueError, match="longer than"):
        build_poll_many_command(polls[: fit + 1], wait=MAX_POLL_WAIT)
    assert polls_that_fit(polls[:3]) == 3
    assert polls_that_fit(polls[:1]) == 1


def test_offsets_and_sizes_are_checked_per_job():
    with pytest.raises(ValueError, match="offset"):
        build_poll_many_command([(RemoteJob("a"), 0, 1), (RemoteJob("b"), -1, 1)])
