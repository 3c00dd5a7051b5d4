"""Unit tests of ``airflow_provider_brev/core/lepton/agent.py``."""

from __future__ import annotations

import functools
import random
import string

import pytest

from airflow_provider_brev.core.lepton import agent
from airflow_provider_brev.exceptions import BrevInvalidInputError


# -- agent: the container's command and its plan -----------------------------------------------------------------
def test_the_container_command_enters_the_workdir_and_runs_the_agent():
    assert agent.job_command() == [
        "bash",
        "-c",
        'mkdir -p /workspace && cd /workspace && exec python3 -c "$AIRFLOW_LEPTON_AGENT"',
    ]


def test_the_agent_reads_the_plan_and_state_dir_the_step_names():
    source = agent.agent_source()
    assert f'PLAN_ENV = "{agent.PLAN_ENV}"' in source and f'STATE_DIR = "{agent.STATE_DIR}"' in source
    assert (agent.PLAN_ENV, agent.STATE_DIR) == ("AIRFLOW_LEPTON_PLAN", ".airflow-lepton")
    assert source.startswith('"""') and "def main" in source


@pytest.mark.parametrize(
    ("path", "seen"),
    [
        ("data", "/workspace/data"),
        ("results/train/", "/workspace/results/train"),
        ("/mnt/results", "/mnt/results"),  # an absolute path stays
    ],
)
def test_container_paths(path, seen):
    assert agent.container_path(path) == seen


@pytest.mark.parametrize(
    ("value", "directory"),
    [
        ("data", "data"),
        ("results/train/", "results/train"),
        ("./a//b/.", "a/b"),
        ("a\\b", "a/b"),
        (" data ", "data"),
        ("a..b", "a..b"),  # near miss of '..': a name with dots
        (".", ""),  # the working directory itself
    ],
)
def test_job_directories(value, directory):
    assert agent.job_directory("inputs", value) == directory


@pytest.mark.parametrize("value", ["", None, "   ", "/etc", "~/data", "../up", "a/../../b", "a\x00b", "a\nb", "a\rb"])
def test_job_directories_outside_the_workdir_are_refused(value):
    with pytest.raises(BrevInvalidInputError, match="inputs directory .* relative path below"):
        agent.job_directory("inputs", value)


@functools.cache
def _noise() -> str:
    """1.5 million random letters and digits: text zlib hardly compresses (made once, when first needed)."""
    return "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=1_500_000))


def _plan_of_size(chars: int) -> dict[str, object]:
    return {"inputs": [{"url": _noise()[:chars], "path": "p", "size": 1}]}


def _encoded_length(chars: int) -> int:
    try:
        return len(agent.encode_plan(_plan_of_size(chars)))
    except BrevInvalidInputError as err:
        return int(str(err).split(" is ")[1].split(" bytes")[0])


def _size_for(length: int) -> int:
    """The smallest plan size whose encoding is exactly ``length`` bytes (a multiple of 4: base64): a secant step
    onto it (the length grows about linearly with the size), then one character at a time."""
    chars = length
    for _ in range(8):
        got = _encoded_length(chars)
        if abs(got - length) <= 16:
            break
        chars = chars * length // got
    while _encoded_length(chars) < length:
        chars += 1
    while _encoded_length(chars - 1) >= length:
        chars -= 1
    assert _encoded_length(chars) == length
    return chars


def test_a_plan_of_up_to_one_mebibyte_is_encoded_and_decoded():
    plan = {"inputs": [{"url": "https://x/y?sig=1", "path": "a/b", "size": 3}], "outputs": [], "env": {"A": "b"}}
    encoded = agent.encode_plan(plan)
    assert agent.decode_plan(encoded) == plan and "sig" not in encoded
    limit = 1024 * 1024  # what a Lepton workspace secret holds
    exact = _size_for(limit)
    assert len(agent.encode_plan(_plan_of_size(exact))) == limit  # exactly the limit: fits
    larger = _size_for(limit + 4)  # the next longer encoding
    with pytest.raises(BrevInvalidInputError, match=r"\(1 input objects\) is 1048580 bytes, more than a Lepton secret"):
        agent.encode_plan(_plan_of_size(larger))
