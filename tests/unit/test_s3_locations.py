"""The S3 reachability check before anything is created (``airflow_provider_brev.cli.transfer.locations``): what an
error listing a declared location means, and the error the task fails with."""

from __future__ import annotations

import pytest

from airflow_provider_brev.cli.transfer.locations import classify_s3_error, location_error
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
