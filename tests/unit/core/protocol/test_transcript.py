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


PRESIGNED = (
    "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
    "&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEXAMPLE&X-Amz-Signature=0f1e2d3c4b5a69788796a5b4c3d2e1f0"
)


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        (  # a presigned URL keeps its host, key and algorithm, never its credential, token or signature
            f"curl {PRESIGNED} failed",
            "curl https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
            "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token=***"
            "&X-Amz-Signature=*** failed",
        ),
        (  # SigV2 presigned URLs
            "https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1&Signature=abc%2Bdef%3D",
            "https://b.s3.amazonaws.com/k?AWSAccessKeyId=***&Expires=1&Signature=***",
        ),
        ("key id AKIAIOSFODNN7EXAMPLE, session ASIAIOSFODNN7EXAMPLE", "key id ***, session ***"),
        ("NGC key nvapi-AbCdEf0123456789AbCdEf0123456789-_xyz", "NGC key ***"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=***"),
        ("aws_session_token = IQoJb3JpZ2luX2VjEXAMPLE", "aws_session_token = ***"),
        ("export NGC_API_KEY='c2VjcmV0LW5nYy1rZXk='", "export NGC_API_KEY=***"),
        ("AKIA is a prefix; Signature verified", "AKIA is a prefix; Signature verified"),  # no value: kept
    ],
    ids=["sigv4-url", "sigv2-url", "aws-key-ids", "ngc-key", "aws-secret-var", "aws-token-var", "ngc-var", "none"],
)
def test_cloud_credentials_and_presigned_urls_are_scrubbed_by_their_shape(text, scrubbed):
    assert scrub(text, []) == scrubbed


def test_a_record_holds_the_call_scrubbed_everywhere():
    result = ProcessResult(
        1, [f"echo tok {JWT}"], ["https://x/api/me?utm_source=cli 401 Unauthorized", "s3cr3t"], started_at=1.23456
    )
    record = transcript_record(["login", "--token", "s3cr3t"], result, secrets=["s3cr3t", ""], cli_version="v0.6.327")
    assert record == {
        "source": "recorded",
        "cli_version": "v0.6.327",
        "argv": ["login", "--token", "***"],
        "exit_code": 1,
        "timed_out": False,
        "stdout": "echo tok ***",
        "stderr": "https://x/api/me?utm_source=cli 401 Unauthorized\n***",
        "started_at": 1.235,
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
