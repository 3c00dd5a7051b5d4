"""Pure decisions of S3 <-> Brev transfer rounds (no process, no S3 call is made here).

A transfer runs in *rounds*: the worker presigns URLs for every file (or part) still pending, the instance runs
one transfer script (:mod:`airflow_provider_brev.core.staging.scripts`) and reports each task
(:mod:`airflow_provider_brev.core.staging.reports`); what this module decides is

* what the operators' parameters mean (:func:`transfer_settings`: every parameter validated up front, raising
  :class:`~airflow_provider_brev.exceptions.BrevInvalidInputError`);
* which S3 objects or remote files a transfer moves, and where they land (:func:`select_downloads`,
  :func:`plan_uploads`);
* whether a round's report settles a file (:meth:`StagedDownload.settle`, :meth:`StagedUpload.settle_parts`:
  multipart uploads keep the parts that arrived, so the next round sends only the missing ones);
* in which order tasks run and how failures are named (:func:`task_order`, :func:`describe_failures`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.names import validate_instance_name
from airflow_provider_brev.core.staging.checksums import (
    S3_MAX_SINGLE_PUT,
    choose_part_size,
    multipart_etag,
    split_parts,
)
from airflow_provider_brev.core.staging.paths import (
    PathFilter,
    find_path_conflicts,
    normalize_directory,
    normalize_prefix,
    printable,
    validate_relpath,
)
from airflow_provider_brev.core.values import bool_value, duration_seconds, integer, named
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from airflow_provider_brev.core.staging.reports import RemoteFile, TransferReport
    from airflow_provider_brev.core.staging.types import S3Object

#: ``(code, detail)`` of a file that did not transfer: a script failure code (``curl``, ``md5``, ...),
#: ``verify`` (the worker's check failed), ``error`` (the round could not run) or ``unreported``.
Failure = tuple[str, str]

#: At most this many names appear in an error message (the rest are counted).
MAX_NAMED_FAILURES = 20
DEFAULT_URL_EXPIRES_IN = 3600
#: SigV4 presigned URLs live at most 7 days.
MAX_URL_EXPIRES_IN = 7 * 24 * 3600


# ------------------------------------------------------------------------------------------------ settings


def _text(value: Any) -> Any:
    """Native rendering turns ``"{{ ds_nodash }}"`` into an int: names and prefixes are text."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


@dataclass(frozen=True)
class TransferSettings:
    """The validated parameters shared by both transfer directions (see :func:`transfer_settings`).

    :param instance_name: the Brev instance.
    :param bucket: the S3 bucket.
    :param prefix: the S3 "directory" prefix, ``""`` or ending in ``/``.
    :param remote_dir: the directory on the instance.
    :param path_filter: include/exclude globs.
    :param max_attempts: rounds at most.
    :param concurrency: tasks in parallel on the instance.
    :param curl_retries: ``curl --retry`` count in a round.
    :param url_expires_in: presigned URL lifetime in seconds.
    :param transfer_timeout: time budget of one round in seconds.
    :param fail_on_empty: fail when nothing matches.
    """

    instance_name: str
    bucket: str
    prefix: str
    remote_dir: str
    path_filter: PathFilter
    max_attempts: int
    concurrency: int
    curl_retries: int
    url_expires_in: int
    transfer_timeout: float
    fail_on_empty: bool

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def remote(self) -> str:
        return f"{self.instance_name}:{self.remote_dir}"


def transfer_settings(
    *,
    instance_name: Any,
    s3_bucket: Any,
    s3_prefix: Any,
    remote_dir: Any,
    include: Any,
    exclude: Any,
    max_attempts: Any,
    concurrency: Any,
    curl_retries: Any,
    url_expires_in: Any,
    transfer_timeout: Any,
    fail_on_empty: Any,
) -> TransferSettings:
    """Validate and normalise the operators' common parameters (raises ``BrevInvalidInputError``)."""
    instance_name, s3_bucket, s3_prefix, remote_dir = map(_text, (instance_name, s3_bucket, s3_prefix, remote_dir))
    validate_instance_name(instance_name)
    if not isinstance(s3_bucket, str) or not s3_bucket.strip():
        raise BrevInvalidInputError("s3_bucket must be a non-empty bucket name.")
    remote_dir = named("remote_dir", normalize_directory, remote_dir)
    try:
        prefix = normalize_prefix(s3_prefix)
        path_filter = PathFilter.create(include, exclude)
    except ValueError as err:
        raise BrevInvalidInputError(str(err)) from None
    expires = integer("url_expires_in", url_expires_in, minimum=1)
    if expires > MAX_URL_EXPIRES_IN:
        raise BrevInvalidInputError("url_expires_in must be at most 604800 s (7 days, SigV4's limit).")
    return TransferSettings(
        instance_name=instance_name,
        bucket=s3_bucket.strip(),
        prefix=prefix,
        remote_dir=remote_dir,
        path_filter=path_filter,
        max_attempts=integer("max_attempts", max_attempts, minimum=1),
        concurrency=integer("concurrency", concurrency, minimum=1),
        curl_retries=integer("curl_retries", curl_retries, minimum=0),
        url_expires_in=expires,
        transfer_timeout=duration_seconds("transfer_timeout", transfer_timeout),
        fail_on_empty=bool_value("fail_on_empty", fail_on_empty, default=False),
    )


def parse_keys(s3_keys: Any) -> list[str] | None:
    """Explicit object keys (``None`` when none are given)."""
    if s3_keys is None or s3_keys == "" or s3_keys == []:
        return None
    keys = [s3_keys] if isinstance(s3_keys, str) else list(s3_keys)
    if not all(isinstance(k, str) and k.strip() and not k.endswith("/") for k in keys):
        raise BrevInvalidInputError(f"s3_keys must be object keys (not ending in '/'), got {keys!r}.")
    return keys


# --------------------------------------------------------------------------------------------------- names


def task_order(key: str) -> tuple[int, ...]:
    """Sort key of a task key (``"10"`` after ``"9"``, parts ``"3.2"`` after ``"3.1"``)."""
    return tuple(int(part) for part in key.split("."))


def name_some(names: Sequence[str], limit: int = MAX_NAMED_FAILURES, separator: str = ", ") -> str:
    """The first ``limit`` names (control characters escaped: :func:`~.transfer_paths.printable`), then how many
    more there are."""
    shown = [printable(name) for name in names[:limit]]
    if len(names) > limit:
        shown.append(f"and {len(names) - limit} more")
    return separator.join(shown)


def describe_failures(failures: Mapping[str, Failure]) -> str:
    """``relpath (code: detail); ...`` for an error message or a log line (sorted, at most 20 named)."""
    return name_some(
        [f"{name} ({failures[name][0]}: {failures[name][1]})" for name in sorted(failures)], separator="; "
    )


# ----------------------------------------------------------------------------------------------- downloads


@dataclass
class StagedDownload:
    """One object to download and what its content must be.

    :param key: the object key.
    :param relpath: where it lands, relative to the remote directory.
    :param size: its size in bytes.
    :param etag: its ETag (bare, lower case).
    :param md5: the md5 the instance must see (``None``: size only).
    :param md5_from_etag: ``md5`` was taken from the ETag (wrong for SSE-KMS/SSE-C objects).
    """

    key: str
    relpath: str
    size: int
    etag: str
    md5: str | None = None
    md5_from_etag: bool = False

    def settle(self, task_key: str, report: TransferReport) -> Failure | None:
        """``None`` when the round placed this file with the expected size and md5."""
        outcome = report.outcome(task_key)
        result = report.ok.get(task_key)
        if outcome is None and result is not None:
            if result.size != self.size or (self.md5 is not None and result.md5 != self.md5):
                return ("verify", "the reported size or md5 does not match S3")
            return None
        return outcome or ("unreported", "")

    def suspects_etag(self, failure: Failure) -> bool:
        """An md5 mismatch against an md5 read from the ETag: the object may be KMS-encrypted."""
        return failure[0] == "md5" and self.md5_from_etag


def select_downloads(
    objects: Iterable[S3Object], prefix: str | None, path_filter: PathFilter
) -> tuple[list[StagedDownload], list[str]]:
    """The objects to download, sorted by where they land: relative to ``prefix``, or by basename when
    ``prefix`` is ``None`` (explicit keys); and ``"<key>: <why>"`` of the objects skipped because no safe path on
    the instance can hold them (``a//b``, ``../x``; a key that is also the "directory" of other keys). One stray
    key costs a warning, not the transfer. Explicit keys that land on the same file are refused."""
    found = [
        StagedDownload(
            obj.key, obj.key[len(prefix) :] if prefix is not None else obj.key.rsplit("/", 1)[-1], obj.size, obj.etag
        )
        for obj in objects
    ]
    skipped = []
    safe = []
    for item in found:
        try:
            validate_relpath(item.relpath)
        except ValueError as err:
            skipped.append(f"{item.key}: {err}")
            continue
        safe.append(item)
    selected = [item for item in safe if path_filter.matches(item.relpath)]
    duplicates = sorted(rel for rel, count in Counter(i.relpath for i in selected).items() if count > 1)
    if duplicates:
        raise BrevInvalidInputError(f"Several keys map to the same file: {name_some(duplicates)}.")
    conflicts = set(find_path_conflicts(i.relpath for i in selected))
    skipped += [f"{i.key}: also the directory of other keys" for i in selected if i.relpath in conflicts]
    kept = [item for item in selected if item.relpath not in conflicts]
    return sorted(kept, key=lambda i: i.relpath), skipped


# ------------------------------------------------------------------------------------------------- uploads


@dataclass
class StagedUpload:
    """One remote file to upload, and (multipart) the upload in progress.

    :param relpath: path relative to the remote directory.
    :param key: the destination key.
    :param size: bytes when listed.
    :param md5: md5 hex of the whole file (computed on the instance).
    :param multipart: sent in parts.
    :param part_size: bytes per part (multipart).
    :param upload_id: the open multipart upload, if any.
    :param parts: part number -> (ETag, md5) of the parts that arrived.
    :param signature: size, times and inode when listed: every ``PUT`` and part checks the file still has them
        (else it fails as ``changed``: the md5 is no longer the file's).
    """

    relpath: str
    key: str
    size: int
    md5: str
    multipart: bool
    part_size: int = 0
    upload_id: str | None = None
    parts: dict[int, tuple[str, str]] = field(default_factory=dict)
    signature: str | None = None

    @property
    def part_count(self) -> int:
        return len(split_parts(self.size, self.part_size)) if self.multipart else 1

    def missing_parts(self) -> list[tuple[int, int, int]]:
        """``(number, offset, length)`` of the parts still to send."""
        return [part for part in split_parts(self.size, self.part_size) if part[0] not in self.parts]

    def expected_etag(self) -> str:
        """The ETag S3 must report for what was sent (not for SSE-KMS/SSE-C objects)."""
        return multipart_etag([self.parts[n][1] for n in sorted(self.parts)]) if self.multipart else self.md5

    def settle_parts(self, task_key: str, report: TransferReport) -> Failure | None:
        """Record the parts this round sent; the first missing part's failure, or ``None`` when all arrived."""
        first_problem: Failure | None = None
        for number, _offset, length in self.missing_parts():
            outcome = report.outcome(f"{task_key}.{number}")
            result = report.ok.get(f"{task_key}.{number}")
            if outcome is None and result is not None and result.etag and result.md5 and result.size == length:
                self.parts[number] = (result.etag, result.md5)
            elif first_problem is None:
                code, detail = outcome or ("verify", "incomplete part report")
                first_problem = (code, f"part {number}: {detail}")
        return first_problem

    def restart(self) -> None:
        """Forget the multipart upload (aborted or completed): a next round starts this file over."""
        self.upload_id = None
        self.parts.clear()


def plan_uploads(
    files: Iterable[RemoteFile], prefix: str, *, multipart_threshold: int, part_size: int
) -> tuple[list[StagedUpload], list[str]]:
    """The uploads of the listed files, and why some files cannot be uploaded (unsafe names, no md5)."""
    uploads = []
    bad = []
    for entry in files:
        try:
            validate_relpath(entry.relpath)
        except ValueError as err:
            bad.append(str(err))
            continue
        if entry.md5 is None:
            bad.append(f"{entry.relpath}: no md5")
            continue
        multipart = entry.size > multipart_threshold or entry.size > S3_MAX_SINGLE_PUT
        uploads.append(
            StagedUpload(
                relpath=entry.relpath,
                key=f"{prefix}{entry.relpath}",
                size=entry.size,
                md5=entry.md5,
                multipart=multipart,
                part_size=choose_part_size(entry.size, part_size) if multipart else 0,
                signature=entry.signature,
            )
        )
    return uploads, bad
