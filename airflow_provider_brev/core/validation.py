"""Checks of the parameters that name Brev's and S3's things: instance names, owner prefixes, placement ids, the
gpu / instance type request, buckets, S3 URIs and directories on the instance (pure: no Airflow, no I/O).

They are :mod:`airflow_provider_brev.core.values`'s checks applied to rules that already exist elsewhere in the pure
core, not repeated: instance names and owner prefixes (:mod:`airflow_provider_brev.core.protocol.names`), the gpu /
instance type request shape (:func:`airflow_provider_brev.core.protocol.argv.instance_type_list`), bucket names
(:func:`airflow_provider_brev.core.staging.manifest.parse_s3_uri`), directories
(:func:`airflow_provider_brev.core.staging.paths.normalize_directory`); :func:`~airflow_provider_brev.core.values.named`
puts the parameter name into their messages.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.argv import instance_type_list
from airflow_provider_brev.core.protocol.names import validate_instance_name, validate_owner_prefix
from airflow_provider_brev.core.staging.manifest import parse_s3_uri
from airflow_provider_brev.core.staging.paths import normalize_directory
from airflow_provider_brev.core.values import matching, named, refuse, safe_text
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "directory",
    "instance_name",
    "instance_request",
    "owner_prefix",
    "placement_id",
    "s3_bucket",
    "s3_uri",
]

#: A placement id goes after ``--cloud-cred-id`` / ``--workspace-group-id``: one word, never flag-like.
_PLACEMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


def placement_id(name: str, value: Any) -> str:
    """A placement id (``cloud_cred_id``, ``workspace_group_id``): one word that cannot pass for a flag.

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    return matching(name, value, _PLACEMENT_RE, "an id as `brev` lists it (starting with a letter or digit)")


def instance_name(name: str, value: Any) -> str:
    """A Brev instance name (:func:`airflow_provider_brev.core.protocol.names.validate_instance_name`).

    :param name: the parameter's name.
    :param value: its rendered value (an int from native rendering becomes its text).
    """
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    return named(name, validate_instance_name, text)


def owner_prefix(name: str, value: Any) -> str:
    """An owner prefix of managed names (:func:`airflow_provider_brev.core.protocol.names.validate_owner_prefix`).

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    return named(name, validate_owner_prefix, value)


def s3_bucket(name: str, value: Any) -> str:
    """An S3 bucket name (the rule of :func:`airflow_provider_brev.core.staging.manifest.parse_s3_uri`); surrounding blanks
    are dropped.

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    bucket = safe_text(name, value).strip()
    if "/" in bucket:
        refuse(name, value, "a bucket name alone (the prefix goes into s3_prefix)")
    return named(name, lambda text: parse_s3_uri(f"s3://{text}/")[0], bucket)


def instance_request(gpu: Any, instance_types: Any) -> tuple[str | None, list[str] | None]:
    """The gpu / instance_types request, shape-checked by
    :func:`airflow_provider_brev.core.protocol.argv.instance_type_list` (either one, never both); ``(None, None)`` when
    neither is given.

    :param gpu: ``"L40S:1"`` or empty.
    :param instance_types: a list, a comma-separated string, or empty.
    """
    if gpu is not None and not isinstance(gpu, str):
        refuse("gpu", gpu, "a GPU request such as 'L40S:1'")
    types: Sequence[str] | str | None = instance_types
    if types is not None and not isinstance(types, str | list | tuple):
        refuse("instance_types", types, "a list of instance types or a comma-separated string")
    try:
        return instance_type_list(gpu, types)
    except BrevInvalidInputError as err:
        if "gpu" in err.message:  # it names its parameter already (a bad gpu, or both given)
            raise
        raise BrevInvalidInputError(f"instance_types: {err.message}") from None


def s3_uri(name: str, value: Any, *, object_key: bool = False) -> str:
    """An ``s3://bucket/key-or-prefix`` URI (the rule of :func:`airflow_provider_brev.core.staging.manifest.parse_s3_uri`).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param object_key: the URI must name an object (a non-empty key not ending in ``/``).
    """
    text = safe_text(name, value).strip()
    named(name, parse_s3_uri, text)
    key = text[len("s3://") :].partition("/")[2]
    if object_key and (not key or key.endswith("/")):
        refuse(name, value, "the URI of an S3 object, such as 's3://bucket/specs/train.yaml'")
    return text


def directory(name: str, value: Any) -> str:
    """A directory on the instance (:func:`airflow_provider_brev.core.staging.paths.normalize_directory`: relative to
    the remote home, ``~/...`` or absolute; no ``.``/``..`` component); returned as given.

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    text = safe_text(name, value)
    named(name, normalize_directory, text)
    return text
