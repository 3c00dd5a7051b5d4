"""The S3 reachability check before anything is created (``airflow_provider_brev.core.staging.locations``): what an
error listing a declared location means, and the error the task fails with."""

from __future__ import annotations

from typing import get_args

import pytest

from airflow_provider_brev.core.staging.locations import (
    S3_PROBLEMS,
    S3Problem,
    classify_s3_error,
    location_error,
)
from airflow_provider_brev.exceptions import (
    BrevInvalidInputError,
    BrevS3LocationError,
    BrevTransientError,
    retry_policy,
)


@pytest.mark.parametrize(
    ("code", "status", "problem"),
    [
        ("NoSuchBucket", 404, "missing"),
        ("AccessDenied", 403, "denied"),
        ("403", 403, "denied"),  # a HEAD request's error has no body: the status is the code
        ("InvalidAccessKeyId", 403, "denied"),
        ("SignatureDoesNotMatch", 403, "denied"),
        ("ExpiredToken", 400, "denied"),
        ("NoCredentialsError", None, "denied"),
        ("PermanentRedirect", 301, "transient"),  # not a 4xx: never made permanent
        ("AuthorizationHeaderMalformed", 400, "invalid"),  # wrong region
        ("InvalidBucketName", 400, "invalid"),
        ("SlowDown", 503, "transient"),
        ("InternalError", 500, "transient"),
        ("ServiceUnavailable", 503, "transient"),
        ("RequestTimeout", 400, "transient"),
        ("Throttling", 400, "transient"),
        ("SomethingNew", 502, "transient"),
        ("SomethingNew", 429, "transient"),
        ("SomethingNew", 409, "invalid"),
        ("SomethingNew", None, "transient"),
        ("EndpointConnectionError", None, "transient"),
        ("ReadTimeoutError", None, "transient"),
        ("ConnectTimeoutError", None, "transient"),
    ],
)
def test_what_an_error_listing_a_location_means(code, status, problem):
    assert classify_s3_error(code, status) == problem


@pytest.mark.parametrize("problem", ["missing", "denied", "invalid"])
def test_a_location_that_cannot_work_fails_the_task_at_once_naming_it_and_the_connection(problem):
    error = location_error(problem, uri="s3://no-bucket/in/", what="inputs", aws_conn_id="aws_lab", code="X")
    assert isinstance(error, BrevS3LocationError) and isinstance(error, BrevInvalidInputError)
    assert retry_policy(error) == "never"
    assert "s3://no-bucket/in/ (inputs)" in str(error) and "'aws_lab'" in str(error)
    assert "Nothing was created." in str(error)


def test_a_transient_error_stays_retriable():
    error = location_error("transient", uri="s3://b/p/", what="outputs", aws_conn_id="aws_default", code="SlowDown")
    assert isinstance(error, BrevTransientError) and not isinstance(error, BrevInvalidInputError)
    assert retry_policy(error) == "hook"
    assert "s3://b/p/ (outputs)" in str(error) and "'aws_default'" in str(error) and "SlowDown" in str(error)


# One row per code the rule names, each with the status S3 answers it with -- and without one (botocore's own
# errors and a HEAD request's bare status carry no body): the code decides, not the status.
MISSING = ["NoSuchBucket"]
DENIED = [
    "AccessDenied",
    "AllAccessDisabled",
    "AccountProblem",
    "ExpiredToken",
    "InvalidAccessKeyId",
    "InvalidToken",
    "SignatureDoesNotMatch",
    "403",
    "NoCredentialsError",
    "PartialCredentialsError",
]
TRANSIENT = [
    "InternalError",
    "RequestTimeout",
    "ServiceUnavailable",
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "ConnectionClosedError",
    "ConnectTimeoutError",
    "EndpointConnectionError",
    "ReadTimeoutError",
]


@pytest.mark.parametrize("code", MISSING)
def test_every_missing_code_is_missing(code):
    assert classify_s3_error(code, 404) == classify_s3_error(code, None) == "missing"


@pytest.mark.parametrize("code", DENIED)
def test_every_denied_code_is_denied_whatever_the_status(code):
    assert classify_s3_error(code, 403) == classify_s3_error(code, None) == classify_s3_error(code, 400) == "denied"


@pytest.mark.parametrize("code", TRANSIENT)
def test_every_transient_code_is_transient_even_with_a_4xx_status(code):
    assert classify_s3_error(code, 400) == classify_s3_error(code, None) == "transient"


@pytest.mark.parametrize(
    ("code", "status", "problem"),
    [
        ("NoSuchKey", 404, "invalid"),  # near misses: a code the rule does not name falls to its status
        ("AccessDeniedByPolicy", 400, "invalid"),
        ("accessdenied", 400, "invalid"),  # codes are case-sensitive, as S3 sends them
        ("SlowDownPlease", 400, "invalid"),
        ("SomethingNew", 500, "transient"),  # the status boundaries
        ("SomethingNew", 499, "invalid"),
        ("SomethingNew", 400, "invalid"),
        ("SomethingNew", 399, "transient"),
        ("SomethingNew", 428, "invalid"),
    ],
)
def test_codes_the_rule_does_not_name_fall_to_their_status(code, status, problem):
    assert classify_s3_error(code, status) == problem


def test_the_problems_are_the_four_the_type_names():
    assert S3_PROBLEMS == get_args(S3Problem) == ("missing", "denied", "invalid", "transient")


@pytest.mark.parametrize(
    ("problem", "fix"),
    [
        ("missing", "the bucket does not exist: create it, or correct the bucket name"),
        (
            "denied",
            "its credentials may not list it: grant s3:ListBucket on the bucket (and read or write on the prefix), "
            "or use another aws_conn_id",
        ),
        ("invalid", "S3 refused the request: check the bucket name and the connection's region and endpoint"),
    ],
)
def test_each_problem_says_what_to_do(problem, fix):
    error = location_error(problem, uri="s3://b/p/", what="outputs", aws_conn_id="aws_default", code="Code9")
    assert str(error) == f"Cannot reach s3://b/p/ (outputs) with the AWS connection 'aws_default': {fix} (Code9). " + (
        "Nothing was created."
    )
