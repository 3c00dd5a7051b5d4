"""Checks of the parameters that name Brev's and S3's things: instance names, owner prefixes, placement ids, the
gpu / instance type request, buckets, S3 URIs and directories on the instance (pure: no Airflow, no I/O); and the
checked, frozen parameters of the instance operators built from them (:func:`checked_instance_request`,
:func:`create_spec`, :func:`delete_spec`, :func:`sweep_spec`).

They are :mod:`airflow_provider_brev.core.values`'s checks applied to rules that already exist elsewhere in the pure
core, not repeated: instance names and owner prefixes (:mod:`airflow_provider_brev.core.protocol.names`), the gpu /
instance type request shape (:func:`airflow_provider_brev.core.protocol.argv.instance_type_list`), bucket names
(:func:`airflow_provider_brev.core.staging.manifest.parse_s3_uri`), directories
(:func:`airflow_provider_brev.core.staging.paths.normalize_directory`); :func:`~airflow_provider_brev.core.values.named`
puts the parameter name into their messages.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.release import DeleteSpec, release_policy
from airflow_provider_brev.core.instances.request import CreateSpec, InstanceRequest
from airflow_provider_brev.core.instances.sweep import SweepSpec
from airflow_provider_brev.core.instances.warm_pool import reuse_key_value
from airflow_provider_brev.core.protocol.argv import instance_type_list
from airflow_provider_brev.core.protocol.names import validate_instance_name, validate_owner_prefix
from airflow_provider_brev.core.staging.manifest import parse_s3_uri
from airflow_provider_brev.core.staging.paths import normalize_directory
from airflow_provider_brev.core.values import (
    bool_value,
    conn_id,
    duration_seconds,
    matching,
    named,
    non_negative,
    optional,
    positive_int,
    positive_number,
    refuse,
    safe_text,
)
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "checked_instance_request",
    "create_spec",
    "delete_spec",
    "directory",
    "instance_name",
    "instance_request",
    "owner_prefix",
    "placement_id",
    "s3_bucket",
    "s3_uri",
    "sweep_spec",
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


def checked_instance_request(rendered: Mapping[str, Any]) -> InstanceRequest:
    """The instance request of rendered parameters, checked and normalised: empty text means "not given", numbers
    may be text, ``max_lifetime`` and ``max_idle`` become a ``timedelta``. Reads ``rendered`` and changes nothing.

    :param rendered: rendered values by the names of :class:`~airflow_provider_brev.core.instances.request.InstanceRequest`'s
        fields (a missing one: its default).
    """
    default = InstanceRequest()
    gpu, types = instance_request(rendered.get("gpu"), rendered.get("instance_types"))
    if not gpu and not types:
        raise BrevInvalidInputError(
            "No instance type requested: pass gpu (e.g. 'L40S:1') or instance_types (e.g. ['g6e.xlarge']). "
            "An empty value (such as a template that rendered to '') does not mean 'a default instance'."
        )
    min_vram = optional(positive_number, "min_vram", rendered.get("min_vram"), unit="GB")
    price = optional(positive_number, "max_price_per_hour", rendered.get("max_price_per_hour"), unit="dollars per hour")
    lifetime = duration_seconds("max_lifetime", rendered.get("max_lifetime", default.max_lifetime))
    name = optional(instance_name, "instance_name", rendered.get("instance_name"))
    prefix = optional(owner_prefix, "name_prefix", rendered.get("name_prefix"))
    cloud_cred_id = optional(placement_id, "cloud_cred_id", rendered.get("cloud_cred_id"))
    workspace_group_id = optional(placement_id, "workspace_group_id", rendered.get("workspace_group_id"))
    require_docker = bool_value("require_docker", rendered.get("require_docker"), default=False)
    adopt_existing = bool_value("adopt_existing", rendered.get("adopt_existing"), default=False)
    reuse_key = reuse_key_value(rendered.get("reuse_key"))
    if reuse_key and name:
        raise BrevInvalidInputError(
            f"reuse_key={reuse_key!r} and instance_name={name!r} together: a warm instance keeps "
            "the provider-managed name of the run that created it (its owner prefix and id prove it is ours), "
            "so a later run cannot give it a name of its own. Drop instance_name to reuse across runs, or drop "
            "reuse_key to create (and delete) the named instance."
        )
    max_idle = duration_seconds("max_idle", rendered.get("max_idle", default.max_idle))
    return InstanceRequest(
        instance_name=name,
        gpu=gpu,
        instance_types=tuple(types) if types else None,
        min_vram=min_vram,
        cloud_cred_id=cloud_cred_id,
        workspace_group_id=workspace_group_id,
        max_lifetime=timedelta(seconds=lifetime),
        name_prefix=prefix,
        require_docker=require_docker,
        adopt_existing=adopt_existing,
        max_price_per_hour=price,
        max_run_cost=rendered.get("max_run_cost"),
        estimate_seconds=rendered.get("estimate_seconds"),
        reuse_key=reuse_key,
        max_idle=timedelta(seconds=max_idle),
    )


def create_spec(rendered: Mapping[str, Any], *, deferrable_default: bool) -> CreateSpec:
    """A create task's rendered parameters, checked and frozen (the connection first, then the request).

    :param rendered: the rendered parameters by name.
    :param deferrable_default: what an empty ``deferrable`` means (``[operators] default_deferrable``).
    """
    optional(conn_id, "brev_conn_id", rendered.get("brev_conn_id"))
    request = checked_instance_request(rendered)
    return CreateSpec(
        request=request,
        ready_timeout=duration_seconds("ready_timeout", rendered["ready_timeout"]),
        poll_interval=duration_seconds("poll_interval", rendered["poll_interval"]),
        wait_for_ready=bool_value("wait_for_ready", rendered.get("wait_for_ready"), default=True),
        deferrable=bool_value("deferrable", rendered.get("deferrable"), default=deferrable_default),
        delete_on_failure=bool_value("delete_on_failure", rendered.get("delete_on_failure"), default=True),
    )


def delete_spec(rendered: Mapping[str, Any]) -> DeleteSpec:
    """A delete task's rendered parameters, checked and frozen.

    :param rendered: the rendered parameters by name.
    """
    optional(conn_id, "brev_conn_id", rendered.get("brev_conn_id"))
    return DeleteSpec(
        instance_name=instance_name("instance_name", rendered.get("instance_name")),
        wait_for_deletion=bool_value("wait_for_deletion", rendered.get("wait_for_deletion"), default=False),
        deletion_timeout=duration_seconds("deletion_timeout", rendered["deletion_timeout"]),
        release=release_policy(rendered.get("release")),
    )


def sweep_spec(rendered: Mapping[str, Any]) -> SweepSpec:
    """A janitor task's rendered parameters, checked and frozen (``dry_run`` as the task keeps it: ``dry_run_only``).

    :param rendered: the rendered parameters by name.
    """
    optional(conn_id, "brev_conn_id", rendered.get("brev_conn_id"))
    prefix = optional(owner_prefix, "name_prefix", rendered.get("name_prefix"))
    grace = optional(duration_seconds, "grace_period", rendered.get("grace_period"), allow_zero=True) or 0.0
    return SweepSpec(
        name_prefix=prefix,
        grace_period=timedelta(seconds=grace),
        dry_run=bool_value("dry_run", rendered.get("dry_run_only"), default=False),
        wait_for_deletion=bool_value("wait_for_deletion", rendered.get("wait_for_deletion"), default=False),
        deletion_timeout=duration_seconds("deletion_timeout", rendered["deletion_timeout"]),
        poll_interval=duration_seconds("poll_interval", rendered["poll_interval"]),
        cli_retry_limit=optional(positive_int, "cli_retry_limit", rendered.get("cli_retry_limit")),
        cli_retry_delay=optional(non_negative, "cli_retry_delay", rendered.get("cli_retry_delay"), unit="seconds"),
    )
