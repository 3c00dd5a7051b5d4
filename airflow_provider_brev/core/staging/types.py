"""The transfer core's shared words: the types and names several of its modules use, so none of them has to import
another in a circle (pure)."""

from __future__ import annotations

from dataclasses import dataclass

#: The input manifest, at the top of each input directory on the instance (never listed for upload; the rules are
#: :mod:`airflow_provider_brev.core.staging.manifest`'s).
MANIFEST_NAME = ".brev-manifest.jsonl"


@dataclass(frozen=True)
class StagingPair:
    """One validated ``inputs``/``outputs`` entry.

    :param uri: the S3 URI, normalised (``s3://bucket/prefix/``).
    :param bucket: the bucket.
    :param prefix: the "directory" prefix (``""`` or ending in ``/``).
    :param directory: the directory on the instance (relative = under the remote home; ``~/x`` or absolute).
    """

    uri: str
    bucket: str
    prefix: str
    directory: str


@dataclass(frozen=True)
class S3Object:
    """A listed object: its key, size and ETag (bare, lower case)."""

    key: str
    size: int
    etag: str
