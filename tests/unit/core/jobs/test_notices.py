"""Only docker's unencrypted-credentials notice is kept out of the remote stderr a task logs
(airflow_provider_brev/core/jobs/notices.py)."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.jobs.notices import StderrNoticeFilter

DOCKER_24 = [
    "WARNING! Your password will be stored unencrypted in /home/ubuntu/.docker/config.json.",
    "Configure a credential helper to remove this warning. See",
    "https://docs.docker.com/engine/reference/commandline/login/#credential-stores",
    "",
]
DOCKER_25 = [
    "WARNING! Your credentials are stored unencrypted in '/home/ubuntu/.docker/config.json'.",
    "Configure a credential helper to remove this warning. See",
    "https://docs.docker.com/go/credential-store/",
    "",
]


def kept(lines: list[str]) -> list[str]:
    notices = StderrNoticeFilter()
    return [line for line in lines if notices.keep(line)]


@pytest.mark.parametrize("notice", [DOCKER_24, DOCKER_25], ids=["docker-24", "docker-25"])
def test_the_whole_notice_is_dropped_and_what_follows_stays(notice):
    assert kept(["before", *notice, "Login Succeeded", "after"]) == ["before", "Login Succeeded", "after"]


def test_a_notice_without_its_follow_ups_drops_only_its_first_line():
    assert kept([DOCKER_24[0], "Error: something else"]) == ["Error: something else"]


def test_follow_up_lines_without_the_notice_stay():
    lines = [DOCKER_24[1], DOCKER_24[2], "", "WARNING! something else entirely"]
    assert kept(lines) == lines


def test_the_notice_twice_is_dropped_twice():
    assert kept([*DOCKER_24, "x", *DOCKER_25, "y"]) == ["x", "y"]


def test_lines_around_a_notice_that_only_contain_its_words_stay():
    line = "echo 'WARNING! Your password will be stored unencrypted in' is what docker says"
    assert kept([line]) == [line]
