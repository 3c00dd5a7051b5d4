"""Pure decision of the S3 reachability check that runs before anything is created (no S3 call is made here).

Every S3 location a task declares (a step's ``inputs``/``outputs``, a transfer's bucket and prefix) is listed once
with the task's AWS connection before the first ``brev`` call
(:meth:`~airflow_provider_brev.hooks.s3_staging.S3StagingHook.check_location`): a bucket that does not exist, or
credentials that may not list it, would otherwise surface as a raw ``NoSuchBucket`` after an instance was created
and paid for. :func:`classify_s3_error` turns what S3 (or botocore) answered into one of :data:`S3_PROBLEMS`;
:func:`location_error` words it, naming the location and the connection.
"""

from __future__ import annotations

from typing import Literal

from airflow_provider_brev.exceptions import BrevError, BrevS3LocationError, BrevTransientError

#: ``missing``: no such bucket; ``denied``: the credentials may not list it (or there are none); ``invalid``: any
#: other refusal S3 will repeat (wrong region, bad name); ``transient``: S3 or the network may answer next time.
S3Problem = Literal["missing", "denied", "invalid", "transient"]
S3_PROBLEMS: tuple[S3Problem, ...] = ("missing", "denied", "invalid", "transient")

_MISSING = frozenset({"NoSuchBucket"})
_DENIED = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "AccountProblem",
        "ExpiredToken",
        "InvalidAccessKeyId",
        "InvalidToken",
        "SignatureDoesNotMatch",
        "403",
        # botocore's own errors (no request was sent)
        "NoCredentialsError",
        "PartialCredentialsError",
    }
)
_TRANSIENT = frozenset(
    {
        "InternalError",
        "RequestTimeout",
        "ServiceUnavailable",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        # botocore's connection errors
        "ConnectionClosedError",
        "ConnectTimeoutError",
        "EndpointConnectionError",
        "ReadTimeoutError",
    }
)


def classify_s3_error(code: str, status: int | None = None) -> S3Problem:
    """What an error listing an S3 location means.

    :param code: the S3 error code (``NoSuchBucket``, ``AccessDenied`` ...), or botocore's exception class name
        for errors that carry none (``EndpointConnectionError``, ``NoCredentialsError``).
    :param status: the HTTP status of S3's answer, if there was one.
    """
    if code in _MISSING:
        return "missing"
    if code in _DENIED:
        return "denied"
    if code in _TRANSIENT or status == 429:
        return "transient"
    if status is not None and 400 <= status < 500:
        return "invalid"
    return "transient"  # 5xx, 3xx, no answer or unknown: never turn what may pass into a permanent failure


def location_error(problem: S3Problem, *, uri: str, what: str, aws_conn_id: str | None, code: str) -> BrevError:
    """The error of an unreachable S3 location: :class:`BrevS3LocationError` (no retry) unless ``transient``.

    :param problem: what :func:`classify_s3_error` said.
    :param uri: the location, ``s3://bucket/prefix/``.
    :param what: the parameter that declares it (``inputs``, ``outputs``, ``s3_bucket/s3_prefix``).
    :param aws_conn_id: the AWS connection used.
    :param code: the S3 error code or botocore class name (never a message: it could quote a URL).
    """
    where = f"{uri} ({what}) with the AWS connection {aws_conn_id!r}"
    if problem == "transient":
        return BrevTransientError(f"S3 did not answer for {where} ({code}); nothing was created, a retry may pass.")
    fix = {
        "missing": "the bucket does not exist: create it, or correct the bucket name",
        "denied": "its credentials may not list it: grant s3:ListBucket on the bucket (and read or write on the "
        "prefix), or use another aws_conn_id",
        "invalid": "S3 refused the request: check the bucket name and the connection's region and endpoint",
    }[problem]
    return BrevS3LocationError(f"Cannot reach {where}: {fix} ({code}). Nothing was created.")
