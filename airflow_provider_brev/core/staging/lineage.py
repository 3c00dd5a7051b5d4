"""Which S3 datasets a step or a transfer reads and writes, named the way OpenLineage names S3 (pure).

OpenLineage's naming spec (``spec/Naming.md`` of the OpenLineage repository) names an object-storage dataset by its
bucket as namespace (``s3://<bucket>``) and its key or "directory" prefix as name; its filesystem helpers drop a
trailing ``/`` and name the whole bucket ``/``, as the Amazon provider's ``convert_asset_to_openlineage`` does. So
``s3://data/train/`` and ``s3://data/train`` are one dataset, ``train``, and a step that writes a prefix connects to
the step that reads it. :mod:`airflow_provider_brev.utils.lineage` turns these pairs into OpenLineage objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.manifest import parse_s3_uri

if TYPE_CHECKING:
    from collections.abc import Iterable

#: ``(namespace, name)`` of one OpenLineage dataset.
DatasetName = tuple[str, str]


def s3_dataset(uri: Any) -> DatasetName | None:
    """``s3://bucket/prefix/`` -> ``("s3://bucket", "prefix")`` (``"/"`` for the whole bucket); ``None`` for a value
    that is not an S3 URI (a task that failed its validation still reports what it can)."""
    try:
        bucket, prefix = parse_s3_uri(uri)
    except ValueError:  # parse_s3_uri's BrevInvalidInputError is one
        return None
    return f"s3://{bucket}", prefix.rstrip("/") or "/"


def s3_datasets(uris: Iterable[Any]) -> list[DatasetName]:
    """The datasets of ``uris``, each once, in the order given; values that are not S3 URIs are left out."""
    named: list[DatasetName] = []
    for uri in uris:
        dataset = s3_dataset(uri)
        if dataset is not None and dataset not in named:
            named.append(dataset)
    return named


def mapping_keys(value: Any) -> list[Any]:
    """The keys of a step's ``inputs`` (S3 URI -> directory); nothing when it is not a mapping."""
    return list(value.keys()) if hasattr(value, "keys") else []


def mapping_values(value: Any) -> list[Any]:
    """The values of a step's ``outputs`` (directory -> S3 URI); nothing when it is not a mapping."""
    return list(value.values()) if hasattr(value, "values") else []


def listed(value: Any) -> list[Any]:
    """A parameter that holds one URI or several (``s3_inputs``, ``s3_keys``) as a list; ``None`` -> ``[]``."""
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list | tuple) else []


def bucket_uris(bucket: Any, prefix: Any = None, keys: Any = None) -> list[str]:
    """The S3 URIs a transfer names by bucket and prefix, or by bucket and explicit keys."""
    if not isinstance(bucket, str) or not bucket:
        return []
    if keys:
        return [f"s3://{bucket}/{key}" for key in listed(keys) if isinstance(key, str)]
    return [f"s3://{bucket}/{prefix if isinstance(prefix, str) else ''}"]
