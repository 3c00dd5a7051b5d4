"""Unit tests of ``airflow_provider_brev/core/lepton/errors.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.lepton.errors import MAX_QUOTED, api_error, quote
from airflow_provider_brev.exceptions import (
    LeptonAuthError,
    LeptonJobExistsError,
    LeptonNotFoundError,
    LeptonRejectedError,
    LeptonResourcesUnavailableError,
    LeptonTransientError,
    retry_policy,
)


# -- errors: what an answer of the API means ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (401, "", LeptonAuthError, "(create job j, 401)"),
        (402, "", LeptonRejectedError, "Lepton refused the request (create job j, 402)."),  # near miss of 401
        (403, "", LeptonAuthError, "may not do this (create job j, 403)"),
        (404, "", LeptonNotFoundError, "Not found in Lepton workspace 'ws' (create job j)."),
        (405, "", LeptonRejectedError, "Lepton refused the request (create job j, 405)."),
        (409, "", LeptonJobExistsError, "Lepton says it exists already (create job j)."),
        (410, "", LeptonRejectedError, "Lepton refused the request (create job j, 410)."),
        (429, "", LeptonTransientError, "failed (create job j, 429)."),
        (430, "", LeptonRejectedError, "Lepton refused the request (create job j, 430)."),
        (428, "", LeptonRejectedError, "Lepton refused the request (create job j, 428)."),
        (499, "", LeptonRejectedError, "Lepton refused the request (create job j, 499)."),
        (500, "", LeptonTransientError, "failed (create job j, 500)."),
        (501, "", LeptonTransientError, "failed (create job j, 501)."),
        (503, "", LeptonTransientError, "failed (create job j, 503)."),
        (400, "", LeptonRejectedError, "Lepton refused the request (create job j, 400)."),
    ],
)
def test_every_status_has_its_typed_error(status, body, error, message):
    err = api_error(status, body, what="create job j", workspace="ws")
    assert type(err) is error
    assert message in str(err) and "Lepton said" not in str(err) and "XX" not in str(err)


@pytest.mark.parametrize(
    ("body", "no_resources"),
    [
        ("workspace quota exceeded", True),
        ("Quota: 0 left", True),
        ("insufficient gpu.8xh100-sxm", True),
        ("not enough nodes", True),
        ("request exceeds the limit", True),
        ("exceeded capacity", True),
        ("exceed limit", True),
        ("no available node", True),
        ("no free gpu", True),
        ("no available resource in the group", True),
        ("resources unavailable", True),
        ("resource is unavailable", True),
        ("resources are unavailable", True),
        ("", False),
        ("unknown resource shape", False),  # near misses: the words without the phrase
        ("enough", False),
        ("limit reached", False),
        ("no gpu", False),
        ("available nodes: 0", False),
        ("unavailable", False),
    ],
)
def test_a_refusal_for_want_of_resources_is_told_by_its_phrase(body, no_resources):
    err = api_error(400, body, what="create job j", workspace="ws")
    assert type(err) is (LeptonResourcesUnavailableError if no_resources else LeptonRejectedError)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (403, LeptonResourcesUnavailableError),  # the phrase comes before "forbidden"
        (404, LeptonResourcesUnavailableError),
        (409, LeptonJobExistsError),  # the status comes first
        (429, LeptonTransientError),
        (503, LeptonTransientError),
        (401, LeptonAuthError),
    ],
)
def test_the_quota_phrase_under_other_statuses(status, error):
    assert type(api_error(status, "quota exceeded", what="w", workspace="ws")) is error


def test_no_answer_is_transient_and_says_why():
    err = api_error(None, "ConnectionResetError", what="get job j", workspace="ws")
    assert type(err) is LeptonTransientError
    assert str(err) == "Could not reach the Lepton API of workspace 'ws' (get job j): ConnectionResetError"


@pytest.mark.parametrize(
    ("body", "quotable", "said"),
    [
        ("bad  shape\n  gpu.x", True, " Lepton said: bad shape gpu.x"),  # on one line
        ("bad shape", False, ""),  # a call that carried a secret value: never quoted
        ("", True, ""),
        (None, True, ""),
    ],
)
def test_the_body_is_quoted_only_when_the_call_may_quote_it(body, quotable, said):
    err = api_error(400, body, what="create secret S", workspace="ws", quotable=quotable)  # type: ignore[arg-type]
    assert str(err) == f"Lepton refused the request (create secret S, 400).{said}"


def test_the_body_is_quoted_by_default():
    assert str(api_error(404, "no job j", what="get job j", workspace="ws")).endswith(" Lepton said: no job j")


@pytest.mark.parametrize(
    ("body", "quoted"),
    [
        ("x" * MAX_QUOTED, "x" * MAX_QUOTED),
        ("x" * (MAX_QUOTED + 1), "x" * (MAX_QUOTED - 3) + "..."),
        (" a\n\tb ", "a b"),
        ("", ""),
    ],
)
def test_a_quote_is_one_line_of_at_most_max_quoted(body, quoted):
    assert quote(body) == quoted


def test_max_quoted_is_300():
    assert MAX_QUOTED == 300  # the messages' documented limit (core/lepton/errors.py)


@pytest.mark.parametrize(
    ("status", "body", "error", "policy"),
    [
        (None, "ConnectionError", LeptonTransientError, "hook"),
        (401, "", LeptonAuthError, "task"),
        (403, "forbidden", LeptonAuthError, "task"),
        (403, "workspace quota exceeded for gpu.8xh100-sxm", LeptonResourcesUnavailableError, "task"),
        (404, "not found", LeptonNotFoundError, "task"),
        (409, "exists", LeptonJobExistsError, "task"),
        (400, "unknown resource shape", LeptonRejectedError, "never"),
        (429, "slow down", LeptonTransientError, "hook"),
        (503, "unavailable", LeptonTransientError, "hook"),
    ],
)
def test_api_answers_become_typed_errors(status, body, error, policy):
    err = api_error(status, body, what="create job j", workspace="ws")
    assert type(err) is error and retry_policy(err) == policy
    secret_body = api_error(400, "echo s3cr3t", what="create secret S", workspace="ws", quotable=False)
    assert "s3cr3t" not in str(secret_body)
