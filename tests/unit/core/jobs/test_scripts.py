"""Unit tests of ``airflow_provider_brev/core/jobs/scripts.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.jobs.handle import MAX_COMMAND_LENGTH, MAX_POLL_WAIT
from airflow_provider_brev.core.jobs.scripts import (
    build_kill_command,
    build_launch_command,
    build_poll_command,
    build_secret_env_file,
)
from unit.core.jobs.follower_helpers import JOB


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
