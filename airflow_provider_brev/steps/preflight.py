"""Pre-launch checks (the TAO skill's "起動前の確認"): run before anything is created or paid for.

Each check raises :class:`BrevPreflightError` (S3 outputs: :class:`~airflow_provider_brev.exceptions.BrevS3LocationError`)
naming the missing piece and how to provide it. The TAO
operators run them first, and :class:`~airflow_provider_brev.operators.tao.BrevPreflightOperator` runs them as
their own task at the head of a DAG (the flagship retraining DAG does).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import AirflowNotFoundException, BaseHook
from airflow_provider_brev.core.tao.command import image_registry, spec_references_hugging_face, validate_image
from airflow_provider_brev.exceptions import (
    BrevPreflightError,  # re-exported
)
from airflow_provider_brev.staging.sync import check_locations

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


def connection_secret(conn_id: str | None, *, env_fallback: str | None = None) -> str | None:
    """The password (or extra ``token``/``api_key``) of an Airflow connection, else an environment variable."""
    if conn_id:
        try:
            conn = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            conn = None
        if conn is not None:
            extras = conn.extra_dejson or {}
            value = conn.password or extras.get("token") or extras.get("api_key")
            if value:
                return str(value)
    if env_fallback and os.environ.get(env_fallback):
        return os.environ[env_fallback]
    return None


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or ("/" not in uri[5:] and not uri[5:]):
        raise BrevPreflightError(f"Not an S3 URI: {uri!r} (expected s3://bucket/key-or-prefix).")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise BrevPreflightError(f"Not an S3 URI: {uri!r} (expected s3://bucket/key-or-prefix).")
    return bucket, key


def check_s3_inputs(uris: Iterable[str], *, aws_conn_id: str | None) -> dict[str, int]:
    """Every ``s3://bucket/key`` (object) or ``s3://bucket/prefix/`` (≥ 1 object) is readable with ``aws_conn_id``.

    Returns ``{uri: number of objects}``.
    """
    uris = [u for u in uris if u]
    if not uris:
        return {}
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook  # heavy: only here

    client = S3Hook(aws_conn_id=aws_conn_id).get_conn()
    found: dict[str, int] = {}
    problems = []
    for uri in uris:
        bucket, key = split_s3_uri(uri)
        try:
            if key and not key.endswith("/"):
                client.head_object(Bucket=bucket, Key=key)
                found[uri] = 1
                continue
            listing = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
            if listing.get("KeyCount", 0) < 1:
                problems.append(f"{uri}: no object under this prefix")
            else:
                found[uri] = int(listing["KeyCount"])
        except Exception as err:  # botocore ClientError, endpoint errors
            problems.append(f"{uri}: {type(err).__name__}: {err}")
    if problems:
        raise BrevPreflightError(
            f"S3 inputs are missing or unreadable with the AWS connection {aws_conn_id!r}: "
            + "; ".join(problems)
            + ". Upload them or fix the paths/credentials before any GPU is rented."
        )
    return found


def check_s3_outputs(uris: Iterable[str], *, aws_conn_id: str | None) -> list[str]:
    """Every ``s3://bucket/prefix/`` the pipeline will write is in a bucket that exists and that ``aws_conn_id``
    may list (:func:`~airflow_provider_brev.staging.sync.check_locations`, through
    :class:`~airflow_provider_brev.hooks.s3_staging.S3StagingHook`); the prefix itself may be empty or absent.

    Raises :class:`~airflow_provider_brev.exceptions.BrevS3LocationError` naming the location, its bucket and the
    connection (no such bucket: create it or correct the name; access denied: grant it), or
    :class:`~airflow_provider_brev.exceptions.BrevTransientError` when S3 does not answer. Returns the URIs checked.
    """
    uris = list(dict.fromkeys(u for u in uris if u))
    locations = [(*split_s3_uri(uri), "s3_outputs") for uri in uris]
    if locations:
        check_locations(locations, aws_conn_id=aws_conn_id)
    return uris


def check_ngc_key(image: str, *, ngc_conn_id: str | None) -> str | None:
    """Images on nvcr.io need an NGC API key (connection password, or ``NGC_API_KEY``/``NGC_KEY``)."""
    try:
        validate_image(image)
    except ValueError as err:
        raise BrevPreflightError(str(err)) from None
    if image_registry(image) != "nvcr.io":
        return None
    key = connection_secret(ngc_conn_id, env_fallback="NGC_API_KEY") or os.environ.get("NGC_KEY")
    if not key:
        raise BrevPreflightError(
            f"The image {image} is on nvcr.io but no NGC API key is configured: create the Airflow connection "
            f"{ngc_conn_id!r} (any type) with the key in its password field, or set NGC_API_KEY. "
            "Get a key at https://org.ngc.nvidia.com/setup/api-key."
        )
    return key


def check_hf_token(spec: Any, *, hf_conn_id: str | None) -> str | None:
    """A spec that references Hugging Face needs ``HF_TOKEN`` (connection password or environment)."""
    if not spec_references_hugging_face(spec):
        return None
    token = connection_secret(hf_conn_id, env_fallback="HF_TOKEN")
    if not token:
        raise BrevPreflightError(
            "The spec references Hugging Face but no token is configured: create the Airflow connection "
            f"{hf_conn_id!r} with the token in its password field, or set HF_TOKEN."
        )
    return token


def check_input_paths(paths: Iterable[str], *, instance_paths: Sequence[str] = ()) -> list[str]:
    """Refuse local ``/paths`` unless declared as already on the instance (verified there before GPU work).

    Returns the declared instance paths to verify with ``test -e``.
    """
    declared = set(instance_paths)
    refused = [p for p in paths if p and not p.startswith(("s3://", "hf://")) and p not in declared]
    if refused:
        raise BrevPreflightError(
            f"Local path(s) {', '.join(refused)} are not on the Brev instance (no shared filesystem): stage them "
            "through S3 (S3ToBrevOperator), or, if they already exist on the instance, list them in instance_paths."
        )
    return [p for p in paths if p in declared]
