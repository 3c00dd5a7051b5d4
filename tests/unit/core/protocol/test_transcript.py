"""The pure rules of a transcript of ``brev`` calls (``core/protocol/transcript.py``): what is scrubbed, what a
record holds, and what the provider makes of one (outcome, answer shape)."""

from __future__ import annotations

import json

import pytest

from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.transcript import (
    answer_shape,
    call_outcome,
    json_shape,
    scrub,
    subcommand,
    transcript_record,
)

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("text", "secrets", "scrubbed"),
    [
        ("login --token s3cr3t-value", ["s3cr3t-value"], "login --token ***"),
        (f"token {JWT} end", [], "token *** end"),  # a JWT whatever the connection holds
        ("key bak-abcdef123456", [], "key ***"),  # an API key by its shape
        ("bak-12", [], "bak-12"),  # too short to be one
        ("a\npem-line-one\nb", ["-----BEGIN-----\npem-line-one\n-----END-----"], "a\n***\nb"),  # line by line
        ("nothing to hide", ["", "other"], "nothing to hide"),
    ],
)
def test_secrets_and_credential_shapes_are_scrubbed(text, secrets, scrubbed):
    assert scrub(text, secrets) == scrubbed


def test_a_record_holds_the_call_scrubbed_everywhere():
    result = ProcessResult(1, [f"echo tok {JWT}"], ["https://x/api/me?utm_source=cli 401 Unauthorized", "s3cr3t"])
    record = transcript_record(["login", "--token", "s3cr3t"], result, secrets=["s3cr3t", ""], cli_version="v0.6.327")
    assert record == {
        "source": "recorded",
        "cli_version": "v0.6.327",
        "argv": ["login", "--token", "***"],
        "exit_code": 1,
        "timed_out": False,
        "stdout": "echo tok ***",
        "stderr": "https://x/api/me?utm_source=cli 401 Unauthorized\n***",
    }
    assert "s3cr3t" not in json.dumps(record)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["ls", "--json"], "ls"),
        (["--version"], "--version"),
        (["--no-check-latest", "delete", "x"], "delete"),
        ([], ""),
    ],
)
def test_the_subcommand_is_the_first_word_that_is_no_flag(argv, command):
    assert subcommand(argv) == command


@pytest.mark.parametrize(
    ("record", "outcome"),
    [
        ({"argv": ["ls"], "exit_code": 0, "stdout": "", "stderr": ""}, "ok"),
        ({"argv": ["ls"], "exit_code": -9, "timed_out": True, "stdout": "", "stderr": ""}, "timeout"),
        (
            {
                "argv": ["delete", "x"],
                "exit_code": 1,
                "stdout": "",
                "stderr": "1 error occurred:\n\t* instance with id/name x not found\n",
            },
            "BrevInstanceNotFoundError",
        ),
        (
            {"argv": ["delete", "--yes"], "exit_code": 1, "stdout": "", "stderr": "unknown flag: --yes"},
            "BrevInvalidInputError",
        ),
        (
            {
                "argv": ["ls"],
                "exit_code": 1,
                "stdout": "no oauth found for token\nYou are currently logged out, would you like to log in? [Y/n]: ",
                "stderr": "EOF",
            },
            "BrevAuthError",
        ),
    ],
)
def test_the_outcome_is_what_the_provider_classifies_the_call_as(record, outcome):
    assert call_outcome(record) == outcome


def test_an_answer_shape_is_keys_and_types_read_past_breadcrumbs():
    stdout = 'no oauth found for token\n{"workspaces": [{"name": "a", "id": "1", "n": 2, "ok": true}, {"name": "b", "id": "2", "n": 3, "ok": false}]}'
    assert answer_shape(stdout) == [
        ["workspaces", ["list", [["id", "string"], ["n", "number"], ["name", "string"], ["ok", "bool"]]]]
    ]
    assert answer_shape('{"workspaces": null}') == [["workspaces", "null"]]
    assert answer_shape('{"b": 1, "a": 1}') == answer_shape('{"a": 2, "b": 3.5}')  # order and values do not count
    assert answer_shape("brev has been refreshed") is None
    assert json_shape([1, "x", 2]) == ["list", "number", "string"]  # distinct element shapes, sorted
    assert json_shape([]) == ["list"]
