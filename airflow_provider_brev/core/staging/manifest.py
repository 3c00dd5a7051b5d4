"""Pure rules of step staging (:mod:`airflow_provider_brev.staging.runner`): the shape of ``inputs``/``outputs``,
the input manifest kept on the instance, and the decision of what an incremental input sync downloads.

The manifest
    Each input directory on the instance holds ``<dir>/.brev-manifest.jsonl`` (:data:`MANIFEST_NAME`): a first
    line ``{"source": "s3://bucket/prefix/"}``, then one JSON object per file that a sync placed,
    ``{"path": <relpath>, "key": <S3 key>, "size": <bytes>, "etag": <ETag>}``. It is written by the worker after
    each sync (``brev copy``; no secret in it) and read back by the next sync's listing. A manifest of another
    source, or an unreadable line, simply counts as "not known" (those files are downloaded again). The
    transfer list script never lists that file, so it is never uploaded (:mod:`~airflow_provider_brev.core.staging.scripts`).

The decision (:func:`plan_input_sync`)
    An object is *unchanged*, and not downloaded, when the manifest records it under the same path with the same
    key, size and ETag, and the local file still has that size. Anything else (new object, changed ETag or size,
    a local file edited to another size or deleted, no manifest) is downloaded.

The handoff (:func:`handoff_manifest`)
    A step's final output sync records what it verified in S3 (uploaded and checked, or found identical by size
    and md5/ETag) in the manifest of that directory, as if an input sync of the same prefix had placed it: a later
    step on the same instance whose ``inputs`` sync that prefix into that directory finds the files present and
    downloads none of them. A manifest of another source is left alone (that input's own sync owns it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.paths import normalize_directory, normalize_prefix
from airflow_provider_brev.core.staging.types import MANIFEST_NAME, StagingPair
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from airflow_provider_brev.core.staging.rounds import StagedDownload
    from airflow_provider_brev.core.staging.types import S3Object


_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BAD_CHARS = ("\n", "\r", "\t", "\x00")


# ------------------------------------------------------------------------------------------------ shapes


def parse_s3_uri(uri: Any) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> ``(bucket, normalised prefix)``; raises :class:`BrevInvalidInputError`."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise BrevInvalidInputError(f"Expected an s3://bucket/prefix URI, got {uri!r}.")
    if any(ch in uri for ch in _BAD_CHARS):
        raise BrevInvalidInputError(f"The S3 URI {uri!r} contains a tab, newline or NUL character.")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not _BUCKET_RE.match(bucket):
        raise BrevInvalidInputError(f"Invalid bucket name {bucket!r} in {uri!r}.")
    if ".." in prefix.split("/"):
        raise BrevInvalidInputError(f"The S3 prefix of {uri!r} has a '..' component.")
    return bucket, normalize_prefix(prefix)


def _anchored(directory: str) -> str:
    """The directory as an absolute-looking path for overlap checks (``~/x`` and ``x`` are the same place)."""
    if directory.startswith("/"):
        return directory
    return "~/" + directory.removeprefix("~/")


def _check_overlaps(pairs: Sequence[StagingPair], what: str) -> None:
    seen: list[str] = []
    for pair in pairs:
        here = _anchored(pair.directory)
        for other in seen:
            if here == other or here.startswith(other + "/") or other.startswith(here + "/"):
                raise BrevInvalidInputError(f"{what}: the directories {other!r} and {here!r} overlap.")
        seen.append(here)


def _pairs(mapping: Any, what: str, *, uri_first: bool) -> list[StagingPair]:
    if mapping is None:
        return []
    if not hasattr(mapping, "items"):
        raise BrevInvalidInputError(f"{what} must be a mapping, got {type(mapping).__name__}.")
    pairs = []
    for first, second in mapping.items():
        uri, directory = (first, second) if uri_first else (second, first)
        bucket, prefix = parse_s3_uri(uri)
        try:
            where = normalize_directory(directory)
        except BrevInvalidInputError as err:
            raise BrevInvalidInputError(f"{what}: {err}") from None
        pairs.append(StagingPair(f"s3://{bucket}/{prefix}", bucket, prefix, where))
    _check_overlaps(pairs, what)
    return pairs


def validate_inputs(inputs: Mapping[str, str] | None) -> list[StagingPair]:
    """``inputs`` (S3 URI prefix -> directory on the instance), validated and normalised; directories must not
    overlap (each holds its own manifest). Raises :class:`BrevInvalidInputError`."""
    return _pairs(inputs, "inputs", uri_first=True)


def validate_outputs(outputs: Mapping[str, str] | None) -> list[StagingPair]:
    """``outputs`` (directory on the instance -> S3 URI prefix), validated and normalised; directories must not
    overlap (a file would be uploaded twice). Raises :class:`BrevInvalidInputError`."""
    return _pairs(outputs, "outputs", uri_first=False)


def manifest_remote_path(directory: str) -> str:
    """Where the manifest of ``directory`` goes, as ``brev copy`` takes a remote path (relative = home)."""
    return f"{directory.removeprefix('~/')}/{MANIFEST_NAME}"


# -------------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class ManifestEntry:
    """What a sync placed at ``relpath``: the object's key, size and ETag."""

    relpath: str
    key: str
    size: int
    etag: str


def parse_manifest(lines: Iterable[str], source: str) -> dict[str, ManifestEntry]:
    """The entries of a manifest written for ``source`` (relpath -> entry); another source's manifest, or
    anything unreadable, yields nothing (those files are simply downloaded again). The header is the first JSON
    object, as for :func:`manifest_source`; a line that cannot be read is skipped."""
    entries: dict[str, ManifestEntry] = {}
    header_seen = False
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        if not header_seen:
            if data.get("source") != source:
                return {}
            header_seen = True
            continue
        try:
            entry = ManifestEntry(str(data["path"]), str(data["key"]), int(data["size"]), str(data["etag"]))
        except (KeyError, TypeError, ValueError):
            continue
        if entry.size >= 0:
            entries[entry.relpath] = entry
    return entries


def manifest_source(lines: Iterable[str]) -> str | None:
    """The source a manifest was written for (its first JSON object's ``source``, the header
    :func:`parse_manifest` reads), or ``None``: no manifest, or none that can be read."""
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            source = data.get("source")
            return source if isinstance(source, str) else None
    return None


def render_manifest(source: str, entries: Iterable[ManifestEntry]) -> str:
    """The manifest file (see the module doc), entries sorted by path."""
    lines = [json.dumps({"source": source})]
    lines.extend(
        json.dumps({"path": e.relpath, "key": e.key, "size": e.size, "etag": e.etag}, ensure_ascii=False)
        for e in sorted(entries, key=lambda e: e.relpath)
    )
    return "\n".join(lines) + "\n"


def entry_of(item: StagedDownload) -> ManifestEntry:
    return ManifestEntry(item.relpath, item.key, item.size, item.etag)


@dataclass(frozen=True)
class InputSyncPlan:
    """What an input sync does: download ``fetch``; leave ``unchanged`` as it is."""

    fetch: list[StagedDownload]
    unchanged: list[StagedDownload]


def plan_input_sync(
    listing: Iterable[StagedDownload], manifest: Mapping[str, ManifestEntry], local_sizes: Mapping[str, int]
) -> InputSyncPlan:
    """Split the S3 listing into the objects to download and the unchanged ones (see the module doc)."""
    fetch: list[StagedDownload] = []
    unchanged: list[StagedDownload] = []
    for item in listing:
        same = manifest.get(item.relpath) == entry_of(item) and local_sizes.get(item.relpath) == item.size
        (unchanged if same else fetch).append(item)
    return InputSyncPlan(fetch=fetch, unchanged=unchanged)


def handoff_manifest(
    source: str, current: Sequence[str], verified: Iterable[tuple[str, str, int]], stored: Iterable[S3Object]
) -> str | None:
    """The manifest an output sync of ``source`` leaves in its directory (see the module doc), or ``None`` when
    the directory's manifest (``current``, its lines) belongs to another source or nothing changes.

    :param source: the output's S3 URI prefix (normalised, as :func:`validate_outputs` gives it).
    :param current: the lines of the directory's manifest now (none: no manifest).
    :param verified: ``(relpath, key, size)`` of every file the sync verified in S3.
    :param stored: the objects under the prefix after the sync (their ETags are what an input sync compares).
    """
    owner = manifest_source(current)
    if owner is not None and owner != source:
        return None
    known = parse_manifest(current, source)
    objects = {obj.key: obj for obj in stored}
    entries = dict(known)
    for relpath, key, size in verified:
        obj = objects.get(key)
        if obj is not None and obj.size == size:
            entries[relpath] = ManifestEntry(relpath, key, size, obj.etag)
    if entries == known:  # nothing changes (without a readable header known is empty: nothing was verified)
        return None
    return render_manifest(source, entries.values())
