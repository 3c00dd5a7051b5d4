"""Copy between S3 and a directory on a Brev instance, without any AWS credential on the instance.

The worker's :class:`~airflow.providers.amazon.aws.hooks.s3.S3Hook` lists and presigns; the instance only runs
``curl`` with the presigned URLs. URLs are short-lived credentials themselves: they travel to the instance in
one 0600 *plan file* per round (``brev copy`` of a private temp file), which the transfer script reads into
memory and deletes before the first download or upload starts; they are on no command line, in no log and in
no file left behind (:mod:`airflow_provider_brev.cli.transfer_scripts`).

Every file is verified: downloads by size and md5 on the instance (the md5 comes from the ETag when it is a
plain md5, or from the ``airflow-brev-md5`` metadata this operator writes on multipart uploads), uploads by
``head_object`` on the worker (size, and the ETag against the md5 of the file or of each part). A round that
leaves files failed or unreported is followed by another round for just those files, with fresh URLs, up to
``max_attempts`` rounds; then the task fails naming them. A partial transfer is never reported as success.

``boto3`` and the S3 hook are imported inside ``execute`` only (DAG parsing stays cheap).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.names import validate_instance_name
from airflow_provider_brev.cli.transfer_scripts import (
    MD5_METADATA_KEY,
    MIB,
    OP_GET,
    OP_PART,
    OP_PUT,
    S3_MAX_PART_SIZE,
    S3_MAX_SINGLE_PUT,
    S3_MIN_PART_SIZE,
    PathFilter,
    TransferReport,
    TransferTask,
    build_cleanup_script,
    build_list_script,
    build_plan,
    build_transfer_script,
    choose_part_size,
    find_path_conflicts,
    is_md5,
    md5_hex_to_base64,
    multipart_etag,
    normalize_prefix,
    parse_list_output,
    parse_transfer_output,
    plan_path,
    redact,
    remote_path_word,
    split_parts,
    validate_relpath,
)
from airflow_provider_brev.exceptions import (  # re-exported
    BrevCLIError,
    BrevInvalidInputError,
    BrevTimeoutError,
    BrevTransferConflictError,
    BrevTransferError,
    BrevTransientError,
)
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.utils.mixins import brev_template_fields

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import Context

__all__ = ["BrevToS3Operator", "BrevTransferConflictError", "BrevTransferError", "S3ToBrevOperator"]

DEFAULT_MULTIPART_THRESHOLD = 64 * MIB
DEFAULT_PART_SIZE = 64 * MIB
DEFAULT_URL_EXPIRES_IN = 3600
MAX_URL_EXPIRES_IN = 7 * 24 * 3600
DEFAULT_TRANSFER_TIMEOUT = 3600.0
#: At most this many failed files are named in an error message (the rest are counted).
MAX_NAMED_FAILURES = 20

#: Exec failures after which another round may succeed (anything else is raised at once).
_ROUND_ERRORS = (BrevTransientError, BrevTimeoutError, BrevCLIError)


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("", "0", "false", "no", "off", "none"):
            return False
        raise BrevInvalidInputError(f"Expected a boolean, got {value!r}.")
    return bool(value)


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BrevInvalidInputError(f"{name} must be an integer, got {value!r}.") from None
    if number < minimum or isinstance(value, bool):
        raise BrevInvalidInputError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return number


def _key_order(key: str) -> tuple[int, ...]:
    return tuple(int(part) for part in key.split("."))


def _s3_uri(bucket: str, prefix: str) -> str:
    return f"s3://{bucket}/{prefix}"


def _is_kms(head: dict[str, Any]) -> bool:
    """Objects encrypted with SSE-KMS or SSE-C have ETags that are not the md5 of their content."""
    return str(head.get("ServerSideEncryption") or "").startswith("aws:kms") or bool(head.get("SSECustomerAlgorithm"))


def _describe(failures: dict[str, tuple[str, str]]) -> str:
    names = sorted(failures)
    described = [f"{name} ({failures[name][0]}: {failures[name][1]})" for name in names[:MAX_NAMED_FAILURES]]
    if len(names) > MAX_NAMED_FAILURES:
        described.append(f"and {len(names) - MAX_NAMED_FAILURES} more")
    return "; ".join(described)


class _BrevS3TransferBase(BrevBaseOperator):
    """Arguments and the round machinery shared by both directions."""

    template_fields = brev_template_fields(
        "instance_name", "s3_bucket", "s3_prefix", "remote_dir", "include", "exclude", "aws_conn_id"
    )
    ui_color = "#76b900"

    def __init__(
        self,
        *,
        instance_name: str,
        remote_dir: str,
        s3_bucket: str,
        s3_prefix: str | None = None,
        include: str | Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
        aws_conn_id: str | None = "aws_default",
        max_attempts: int = 3,
        concurrency: int = 4,
        curl_retries: int = 3,
        url_expires_in: int = DEFAULT_URL_EXPIRES_IN,
        transfer_timeout: float = DEFAULT_TRANSFER_TIMEOUT,
        fail_on_empty: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.remote_dir = remote_dir
        self.s3_bucket = s3_bucket
        self.s3_prefix = s3_prefix
        self.include = include
        self.exclude = exclude
        self.aws_conn_id = aws_conn_id
        self.max_attempts = max_attempts
        self.concurrency = concurrency
        self.curl_retries = curl_retries
        self.url_expires_in = url_expires_in
        self.transfer_timeout = transfer_timeout
        self.fail_on_empty = fail_on_empty

    # -- input ---------------------------------------------------------------------------------
    def _validate_common(self) -> PathFilter:
        for attr in ("instance_name", "s3_bucket", "s3_prefix", "remote_dir"):
            value = getattr(self, attr)
            if isinstance(value, int) and not isinstance(value, bool):  # native rendering of "{{ ds_nodash }}"
                setattr(self, attr, str(value))
        validate_instance_name(self.instance_name)
        if not isinstance(self.s3_bucket, str) or not self.s3_bucket.strip():
            raise BrevInvalidInputError("s3_bucket must be a non-empty bucket name.")
        self.s3_bucket = self.s3_bucket.strip()
        try:
            remote_path_word(self.remote_dir)
            self.s3_prefix = normalize_prefix(self.s3_prefix)
            path_filter = PathFilter.create(self.include, self.exclude)
        except ValueError as err:
            raise BrevInvalidInputError(str(err)) from None
        self.max_attempts = _positive_int("max_attempts", self.max_attempts)
        self.concurrency = _positive_int("concurrency", self.concurrency)
        self.curl_retries = _positive_int("curl_retries", self.curl_retries, 0)
        self.url_expires_in = _positive_int("url_expires_in", self.url_expires_in)
        if self.url_expires_in > MAX_URL_EXPIRES_IN:
            raise BrevInvalidInputError("url_expires_in must be at most 604800 s (7 days, SigV4's limit).")
        if float(self.transfer_timeout) <= 0:
            raise BrevInvalidInputError("transfer_timeout must be a positive number of seconds.")
        return path_filter

    def _s3_client(self) -> Any:
        """The connection's S3 client, presigning with SigV4 unless the connection chose a signature version
        (botocore's default presigned URLs are SigV2, which newer regions reject)."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook
        from botocore.config import Config

        hook = S3Hook(aws_conn_id=self.aws_conn_id)
        config = hook.config
        if not getattr(config, "signature_version", None):
            config = config.merge(Config(signature_version="s3v4"))
        return hook.get_client_type(region_name=hook.region_name, config=config)

    def _presign(self, client: Any, method: str, params: dict[str, Any]) -> str:
        return str(client.generate_presigned_url(method, Params=params, ExpiresIn=self.url_expires_in))

    # -- rounds --------------------------------------------------------------------------------
    def _run_round(self, tasks: list[TransferTask], attempt: int) -> TransferReport:
        """Ship one plan and run one transfer script; an exec that failed part-way reports nothing."""
        xfer_id = f"{int(time.time())}-{secrets.token_hex(6)}"
        script = build_transfer_script(
            xfer_id=xfer_id,
            remote_dir=self.remote_dir,
            concurrency=self.concurrency,
            curl_retries=self.curl_retries,
        )
        self.log.info(
            "Transfer round %d/%d on %s: %d task(s) (round id %s).",
            attempt,
            self.max_attempts,
            self.instance_name,
            len(tasks),
            xfer_id,
        )
        try:
            self.hook.write_file_to_instance(self.instance_name, build_plan(tasks), plan_path(xfer_id), mode=0o600)
            result = self.hook.exec_script(self.instance_name, script, timeout=float(self.transfer_timeout))
        except _ROUND_ERRORS as err:
            self.log.warning("Transfer round %s did not complete: %s", xfer_id, redact(str(err)))
            with contextlib.suppress(Exception):
                self.hook.exec_script(self.instance_name, build_cleanup_script(xfer_id), timeout=60)
            return TransferReport(error=f"the round did not complete ({type(err).__name__})")
        report = parse_transfer_output(result.stdout_lines)
        if report.error:
            self.log.warning("Transfer round %s failed on the instance: %s", xfer_id, report.error)
        elif not report.complete:
            self.log.warning("Transfer round %s ended without its final report (connection lost?).", xfer_id)
        return report

    def _log_round_failures(self, attempt: int, failures: dict[str, tuple[str, str]]) -> None:
        if not failures:
            return
        retry = attempt < self.max_attempts
        self.log.warning(
            "Round %d/%d: %d file(s) failed%s: %s",
            attempt,
            self.max_attempts,
            len(failures),
            ", retrying them with fresh URLs" if retry else "",
            _describe(failures),
        )


# ------------------------------------------------------------------------------------------ download


@dataclass
class _Download:
    key: str
    relpath: str
    size: int
    etag: str
    md5: str | None = None
    md5_from_etag: bool = False


class S3ToBrevOperator(_BrevS3TransferBase):
    """Copy an S3 prefix (or explicit keys) into a directory on a Brev instance, verified file by file.

    The worker lists and presigns; the instance downloads with ``curl`` (``--retry``), checks each file's size
    and md5 and moves it into place atomically. Failed files get fresh URLs and another round, up to
    ``max_attempts`` rounds; then the task fails naming them. Nothing AWS-related but short-lived presigned URLs
    reaches the instance, and those only through a 0600 file deleted before the first download starts.

    Returns (XCom) ``{"instance_name", "s3_bucket", "s3_prefix", "s3_uri", "remote_dir", "files", "bytes",
    "md5_verified", "attempts"}``.

    :param instance_name: the instance (templated), e.g. ``create.output``.
    :param s3_bucket: bucket (templated).
    :param s3_prefix: "directory" prefix to copy (templated; a trailing ``/`` is implied; ``""`` = whole
        bucket). Files land at ``remote_dir/<key relative to the prefix>``.
    :param s3_keys: instead of a prefix, explicit keys (templated); each lands at ``remote_dir/<basename>``.
    :param remote_dir: destination directory (templated; ``~/x`` or relative = under the remote ``$HOME``);
        created if needed. Existing files with the same names are replaced.
    :param include: glob(s) a path relative to the prefix must match (templated); ``*`` also matches ``/``.
    :param exclude: glob(s) that drop a path (templated).
    :param aws_conn_id: the Amazon connection used to list and presign (its keys never leave the worker).
    :param max_attempts: rounds; each retries only the files still missing, with fresh URLs.
    :param concurrency: files downloaded in parallel on the instance.
    :param curl_retries: ``curl --retry`` count inside a round.
    :param url_expires_in: lifetime of each presigned URL in seconds (a file must *start* within it).
    :param transfer_timeout: time budget of one round, in seconds.
    :param fail_on_empty: fail when nothing matches (a wrong prefix usually means a broken pipeline).
    """

    template_fields = brev_template_fields(*_BrevS3TransferBase.template_fields, "s3_keys")

    def __init__(
        self,
        *,
        instance_name: str,
        s3_bucket: str,
        remote_dir: str,
        s3_prefix: str | None = None,
        s3_keys: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            instance_name=instance_name, remote_dir=remote_dir, s3_bucket=s3_bucket, s3_prefix=s3_prefix, **kwargs
        )
        self.s3_keys = s3_keys

    def _keys(self) -> list[str] | None:
        if self.s3_keys is None or self.s3_keys == "" or self.s3_keys == []:
            return None
        keys = [self.s3_keys] if isinstance(self.s3_keys, str) else list(self.s3_keys)
        if not all(isinstance(k, str) and k.strip() and not k.endswith("/") for k in keys):
            raise BrevInvalidInputError(f"s3_keys must be object keys (not ending in '/'), got {keys!r}.")
        return keys

    def _list(self, client: Any, keys: list[str] | None, path_filter: PathFilter) -> list[_Download]:
        found: list[_Download] = []
        if keys is None:
            paginator = client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.s3_bucket, Prefix=self.s3_prefix):
                for obj in page.get("Contents", []):
                    key = obj["Key"]
                    if key.endswith("/"):
                        continue  # "directory" marker
                    found.append(
                        _Download(key, key[len(str(self.s3_prefix)) :], int(obj["Size"]), str(obj.get("ETag", "")))
                    )
        else:
            from botocore.exceptions import ClientError

            missing = []
            for key in keys:
                try:
                    head = client.head_object(Bucket=self.s3_bucket, Key=key)
                except ClientError as err:
                    missing.append(f"{key} ({err.response.get('Error', {}).get('Code', 'error')})")
                    continue
                found.append(_Download(key, key.rsplit("/", 1)[-1], int(head["ContentLength"]), str(head["ETag"])))
            if missing:
                raise BrevTransferError(f"S3 object(s) not found in bucket {self.s3_bucket}: {', '.join(missing)}.")
        bad = []
        for item in found:
            try:
                validate_relpath(item.relpath)
            except ValueError as err:
                bad.append(f"{item.key}: {err}")
        if bad:
            raise BrevInvalidInputError(
                "Cannot map these S3 keys to safe paths on the instance: " + "; ".join(bad[:MAX_NAMED_FAILURES])
            )
        selected = [item for item in found if path_filter.matches(item.relpath)]
        duplicates = sorted(rel for rel, count in Counter(i.relpath for i in selected).items() if count > 1)
        if duplicates:
            raise BrevInvalidInputError(f"Several keys map to the same file: {', '.join(duplicates)}.")
        conflicts = find_path_conflicts(i.relpath for i in selected)
        if conflicts:
            raise BrevInvalidInputError(
                "These keys are both a file and a directory prefix of other keys: " + ", ".join(conflicts)
            )
        return sorted(selected, key=lambda i: i.relpath)

    def _expected_md5(self, client: Any, item: _Download) -> None:
        etag = item.etag.strip('"').lower()
        if is_md5(etag):
            item.md5, item.md5_from_etag = etag, True
        elif "-" in etag:  # multipart: only our own metadata knows the md5
            head = client.head_object(Bucket=self.s3_bucket, Key=item.key)
            value = str((head.get("Metadata") or {}).get(MD5_METADATA_KEY, "")).lower()
            item.md5 = value if is_md5(value) else None

    def execute(self, context: Context) -> dict[str, Any]:
        keys = self._keys()
        if (keys is None) == (self.s3_prefix is None):
            raise BrevInvalidInputError(
                "Pass either s3_prefix (a 'directory' prefix; '' for the whole bucket) or s3_keys, not both."
            )
        path_filter = self._validate_common()
        client = self._s3_client()
        items = self._list(client, keys, path_filter)
        source = _s3_uri(self.s3_bucket, str(self.s3_prefix)) if keys is None else f"{len(keys)} key(s)"
        if not items:
            message = (
                f"Nothing to download from {source} (include={path_filter.include}, exclude={path_filter.exclude})."
            )
            if self.fail_on_empty:
                raise BrevTransferError(message + " Set fail_on_empty=False to allow it.")
            self.log.warning(message)
        for item in items:
            self._expected_md5(client, item)
        self.log.info(
            "Downloading %d file(s), %d bytes, from %s to %s:%s.",
            len(items),
            sum(i.size for i in items),
            source,
            self.instance_name,
            self.remote_dir,
        )
        by_key = {str(n): item for n, item in enumerate(items)}
        pending = set(by_key) if items else set()
        failures: dict[str, tuple[str, str]] = {}
        attempt = 0
        while pending and attempt < self.max_attempts:
            attempt += 1
            tasks = [
                TransferTask(
                    key=key,
                    op=OP_GET,
                    relpath=by_key[key].relpath,
                    file_size=by_key[key].size,
                    md5=by_key[key].md5,
                    url=self._presign(client, "get_object", {"Bucket": self.s3_bucket, "Key": by_key[key].key}),
                )
                for key in sorted(pending, key=_key_order)
            ]
            report = self._run_round(tasks, attempt)
            failures = {}
            for key in sorted(pending, key=_key_order):
                item = by_key[key]
                outcome = report.outcome(key)
                result = report.ok.get(key)
                if outcome is None and result is not None:
                    if result.size != item.size or (item.md5 is not None and result.md5 != item.md5):
                        outcome = ("verify", "the reported size or md5 does not match S3")
                    else:
                        pending.discard(key)
                        self.log.info(
                            "Downloaded s3://%s/%s -> %s (%d bytes, %s).",
                            self.s3_bucket,
                            item.key,
                            item.relpath,
                            item.size,
                            "md5 verified" if item.md5 else "size verified",
                        )
                        continue
                failures[item.relpath] = outcome or ("unreported", "")
                if outcome and outcome[0] == "md5" and item.md5_from_etag:
                    self._recheck_md5_source(client, item)
            self._log_round_failures(attempt, failures)
        if pending:
            raise BrevTransferError(
                f"{len(pending)} of {len(items)} file(s) from {source} were not downloaded to "
                f"{self.instance_name}:{self.remote_dir} after {attempt} attempt(s): {_describe(failures)}"
            )
        summary = {
            "instance_name": self.instance_name,
            "s3_bucket": self.s3_bucket,
            "s3_prefix": self.s3_prefix if keys is None else None,
            "s3_uri": _s3_uri(self.s3_bucket, str(self.s3_prefix)) if keys is None else None,
            "remote_dir": self.remote_dir,
            "files": len(items),
            "bytes": sum(i.size for i in items),
            "md5_verified": sum(1 for i in items if i.md5),
            "attempts": attempt,
        }
        self.log.info(
            "Downloaded %d file(s), %d bytes, to %s:%s in %d round(s).",
            summary["files"],
            summary["bytes"],
            self.instance_name,
            self.remote_dir,
            attempt,
        )
        return summary

    def _recheck_md5_source(self, client: Any, item: _Download) -> None:
        """An md5 mismatch against an ETag: SSE-KMS/SSE-C ETags are not md5s; then verify by size (and our
        metadata, if any) instead of failing forever."""
        with contextlib.suppress(Exception):
            head = client.head_object(Bucket=self.s3_bucket, Key=item.key)
            if _is_kms(head):
                value = str((head.get("Metadata") or {}).get(MD5_METADATA_KEY, "")).lower()
                item.md5, item.md5_from_etag = (value if is_md5(value) else None), False
                self.log.info("s3://%s/%s is KMS-encrypted: its ETag is not an md5.", self.s3_bucket, item.key)


# -------------------------------------------------------------------------------------------- upload


@dataclass
class _Upload:
    relpath: str
    key: str
    size: int
    md5: str
    multipart: bool
    part_size: int = 0
    upload_id: str | None = None
    parts: dict[int, tuple[str, str]] = field(default_factory=dict)  # part number -> (etag, md5)

    @property
    def part_count(self) -> int:
        return len(split_parts(self.size, self.part_size)) if self.multipart else 1


class BrevToS3Operator(_BrevS3TransferBase):
    """Copy a directory on a Brev instance to an S3 prefix, verified object by object.

    The instance lists the files (relative path, size, md5) honouring include/exclude; the worker presigns a
    ``PUT`` per small file, or creates a multipart upload and presigns one URL per part for files above
    ``multipart_threshold`` (so multi-GB checkpoints work); the instance uploads with ``curl`` and reports each
    ETag; the worker completes multipart uploads (aborting them on failure) and verifies every object with
    ``head_object`` (size; md5 against the single-part ETag or each part's md5; multipart objects also get an
    ``airflow-brev-md5`` metadata entry so downloads can verify them). Failed files get fresh URLs (multipart
    uploads keep their finished parts) for up to ``max_attempts`` rounds; then the task fails naming them.

    With ``overwrite=False`` (default) existing keys under the prefix are never replaced: the task fails before
    uploading anything if any differs, so write each run to its own prefix (e.g. ``.../{{ ds_nodash }}/``).
    Keys that already hold identical content (same size and md5) are skipped, so a retried task succeeds.

    Returns (XCom) ``{"instance_name", "remote_dir", "s3_bucket", "s3_prefix", "s3_uri", "files", "bytes",
    "uploaded", "skipped_existing", "multipart_files", "attempts"}``.

    :param instance_name: the instance (templated).
    :param remote_dir: directory to upload (templated; ``~/x`` or relative = under the remote ``$HOME``).
        Regular files only; symlinks are not followed.
    :param s3_bucket: bucket (templated).
    :param s3_prefix: destination "directory" prefix (templated; a trailing ``/`` is implied).
    :param include: glob(s) a path relative to ``remote_dir`` must match (templated); ``*`` also matches ``/``.
    :param exclude: glob(s) that drop a path (templated).
    :param overwrite: replace existing keys with different content (templated; default: refuse).
    :param multipart_threshold: files larger than this go up in parts (files above 5 GiB always do).
    :param part_size: bytes per part (5 MiB to 5 GiB; grown automatically past 10,000 parts).
    :param aws_conn_id: the Amazon connection used to presign (its keys never leave the worker).
    :param max_attempts: rounds; each retries only the files (or parts) still missing, with fresh URLs.
    :param concurrency: files/parts uploaded in parallel on the instance (each part is staged in a temp file).
    :param curl_retries: ``curl --retry`` count inside a round.
    :param url_expires_in: lifetime of each presigned URL in seconds (an upload must *start* within it).
    :param transfer_timeout: time budget of one round (and of the listing), in seconds.
    :param fail_on_empty: fail when no file matches.
    """

    template_fields = brev_template_fields(*_BrevS3TransferBase.template_fields, "overwrite")

    def __init__(
        self,
        *,
        instance_name: str,
        remote_dir: str,
        s3_bucket: str,
        s3_prefix: str,
        overwrite: bool = False,
        multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
        part_size: int = DEFAULT_PART_SIZE,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            instance_name=instance_name, remote_dir=remote_dir, s3_bucket=s3_bucket, s3_prefix=s3_prefix, **kwargs
        )
        self.overwrite = overwrite
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self._client: Any = None
        self._open_uploads: dict[str, str] = {}

    # -- steps -----------------------------------------------------------------------------------
    def _list_remote(self, path_filter: PathFilter) -> list[_Upload]:
        script = build_list_script(self.remote_dir, path_filter)
        where = f"{self.instance_name}:{self.remote_dir}"
        for attempt in range(1, self.max_attempts + 1):  # read-only: safe to run again
            try:
                result = self.hook.exec_script(self.instance_name, script, timeout=float(self.transfer_timeout))
                break
            except _ROUND_ERRORS as err:
                if attempt >= self.max_attempts:
                    raise
                self.log.warning("Listing %s failed (attempt %d), retrying: %s", where, attempt, err)
                time.sleep(min(2.0**attempt, 30.0))
        report = parse_list_output(result.stdout_lines)
        if report.missing_dir:
            raise BrevTransferError(f"The directory {where} does not exist.")
        if not report.complete:
            raise BrevTransferError(f"Listing {where} did not complete (connection lost?).")
        if report.unreadable:
            raise BrevTransferError(f"Cannot read these files in {where}: {', '.join(report.unreadable[:20])}")
        if report.skipped_names:
            self.log.warning(
                "Skipped %d file(s) in %s whose names contain a tab or newline.", report.skipped_names, where
            )
        uploads = []
        bad = []
        for entry in report.files:
            try:
                validate_relpath(entry.relpath)
            except ValueError as err:
                bad.append(str(err))
                continue
            if entry.md5 is None:
                bad.append(f"{entry.relpath}: no md5")
                continue
            multipart = entry.size > self.multipart_threshold or entry.size > S3_MAX_SINGLE_PUT
            uploads.append(
                _Upload(
                    relpath=entry.relpath,
                    key=f"{self.s3_prefix}{entry.relpath}",
                    size=entry.size,
                    md5=entry.md5,
                    multipart=multipart,
                    part_size=choose_part_size(entry.size, self.part_size) if multipart else 0,
                )
            )
        if bad:
            raise BrevTransferError(f"Cannot upload these files from {where}: {'; '.join(bad[:20])}")
        return uploads

    def _existing(self, client: Any) -> dict[str, tuple[int, str]]:
        existing: dict[str, tuple[int, str]] = {}
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.s3_bucket, Prefix=self.s3_prefix):
            for obj in page.get("Contents", []):
                existing[obj["Key"]] = (int(obj["Size"]), str(obj.get("ETag", "")).strip('"').lower())
        return existing

    def _identical(self, client: Any, upload: _Upload, size: int, etag: str) -> bool:
        if size != upload.size:
            return False
        if etag == upload.md5:
            return True
        if "-" in etag:
            head = client.head_object(Bucket=self.s3_bucket, Key=upload.key)
            return str((head.get("Metadata") or {}).get(MD5_METADATA_KEY, "")).lower() == upload.md5
        return False

    def _verify(self, client: Any, upload: _Upload) -> str | None:
        """``None`` when the object is what we sent, else why not."""
        from botocore.exceptions import ClientError

        try:
            head = client.head_object(Bucket=self.s3_bucket, Key=upload.key)
        except ClientError as err:
            return f"head_object failed ({err.response.get('Error', {}).get('Code', 'error')})"
        if int(head.get("ContentLength", -1)) != upload.size:
            return f"S3 holds {head.get('ContentLength')} bytes, expected {upload.size}"
        if _is_kms(head):
            return None  # ETags of KMS objects are not md5s: size (and, for parts, Content-MD5) only
        etag = str(head.get("ETag", "")).strip('"').lower()
        if upload.multipart:
            expected = multipart_etag([upload.parts[n][1] for n in sorted(upload.parts)])
        else:
            expected = upload.md5
        if etag != expected:
            return f"ETag {etag} does not match the md5 of what was sent ({expected})"
        return None

    def _abort(self, client: Any, upload: _Upload) -> None:
        if upload.upload_id:
            with contextlib.suppress(Exception):
                client.abort_multipart_upload(Bucket=self.s3_bucket, Key=upload.key, UploadId=upload.upload_id)
            self._open_uploads.pop(upload.key, None)
        upload.upload_id = None
        upload.parts.clear()

    def _tasks(self, client: Any, pending: dict[str, _Upload]) -> list[TransferTask]:
        tasks: list[TransferTask] = []
        for key in sorted(pending, key=_key_order):
            upload = pending[key]
            if not upload.multipart:
                url = self._presign(
                    client,
                    "put_object",
                    {"Bucket": self.s3_bucket, "Key": upload.key, "ContentMD5": md5_hex_to_base64(upload.md5)},
                )
                tasks.append(
                    TransferTask(
                        key=key, op=OP_PUT, relpath=upload.relpath, file_size=upload.size, md5=upload.md5, url=url
                    )
                )
                continue
            if upload.upload_id is None:
                created = client.create_multipart_upload(
                    Bucket=self.s3_bucket, Key=upload.key, Metadata={MD5_METADATA_KEY: upload.md5}
                )
                upload.upload_id = str(created["UploadId"])
                self._open_uploads[upload.key] = upload.upload_id
            for number, offset, length in split_parts(upload.size, upload.part_size):
                if number in upload.parts:
                    continue  # finished in an earlier round
                url = self._presign(
                    client,
                    "upload_part",
                    {"Bucket": self.s3_bucket, "Key": upload.key, "UploadId": upload.upload_id, "PartNumber": number},
                )
                tasks.append(
                    TransferTask(
                        key=f"{key}.{number}",
                        op=OP_PART,
                        relpath=upload.relpath,
                        file_size=upload.size,
                        offset=offset,
                        length=length,
                        url=url,
                        content_md5="X-Amz-Signature=" in url,
                    )
                )
        return tasks

    def _complete(self, client: Any, upload: _Upload) -> str | None:
        from botocore.exceptions import ClientError

        parts = [{"PartNumber": n, "ETag": f'"{upload.parts[n][0]}"'} for n in sorted(upload.parts)]
        try:
            client.complete_multipart_upload(
                Bucket=self.s3_bucket, Key=upload.key, UploadId=upload.upload_id, MultipartUpload={"Parts": parts}
            )
        except ClientError as err:
            return f"completing the multipart upload failed ({err.response.get('Error', {}).get('Code', 'error')})"
        self._open_uploads.pop(upload.key, None)
        return None

    def execute(self, context: Context) -> dict[str, Any]:
        path_filter = self._validate_common()
        self.overwrite = _as_bool(self.overwrite)
        self.multipart_threshold = _positive_int("multipart_threshold", self.multipart_threshold, 0)
        self.part_size = _positive_int("part_size", self.part_size)
        if not S3_MIN_PART_SIZE <= self.part_size <= S3_MAX_PART_SIZE:
            raise BrevInvalidInputError("part_size must be between 5 MiB and 5 GiB (S3's limits).")
        target = _s3_uri(self.s3_bucket, str(self.s3_prefix))
        uploads = self._list_remote(path_filter)
        if not uploads:
            message = (
                f"No files to upload in {self.instance_name}:{self.remote_dir} "
                f"(include={path_filter.include}, exclude={path_filter.exclude})."
            )
            if self.fail_on_empty:
                raise BrevTransferError(message + " Set fail_on_empty=False to allow it.")
            self.log.warning(message)
        client = self._client = self._s3_client()
        existing = self._existing(client)
        skipped = []
        conflicts = []
        for upload in uploads:
            if upload.key in existing:
                if self._identical(client, upload, *existing[upload.key]):
                    skipped.append(upload)
                elif not self.overwrite:
                    conflicts.append(upload.key)
        if conflicts:
            raise BrevTransferConflictError(
                f"{len(conflicts)} key(s) under {target} already exist with different content and overwrite is "
                f"off (write each run to its own prefix, or set overwrite=True): "
                + ", ".join(conflicts[:MAX_NAMED_FAILURES])
                + (f" and {len(conflicts) - MAX_NAMED_FAILURES} more" if len(conflicts) > MAX_NAMED_FAILURES else "")
            )
        for upload in skipped:
            self.log.info(
                "Already in S3 with the same content: s3://%s/%s (%d bytes).", self.s3_bucket, upload.key, upload.size
            )
        skipped_ids = {id(u) for u in skipped}
        to_send = [u for u in uploads if id(u) not in skipped_ids]
        self.log.info(
            "Uploading %d file(s), %d bytes (%d multipart), from %s:%s to %s.",
            len(to_send),
            sum(u.size for u in to_send),
            sum(1 for u in to_send if u.multipart),
            self.instance_name,
            self.remote_dir,
            target,
        )
        by_key = {str(n): upload for n, upload in enumerate(to_send)}
        pending = dict(by_key)
        failures: dict[str, tuple[str, str]] = {}
        attempt = 0
        try:
            while pending and attempt < self.max_attempts:
                attempt += 1
                report = self._run_round(self._tasks(client, pending), attempt)
                failures = {}
                for key in sorted(pending, key=_key_order):
                    problem = self._settle(client, key, pending[key], report)
                    if problem is None:
                        upload = pending.pop(key)
                        self.log.info(
                            "Uploaded %s -> s3://%s/%s (%d bytes%s).",
                            upload.relpath,
                            self.s3_bucket,
                            upload.key,
                            upload.size,
                            f", {upload.part_count} parts" if upload.multipart else "",
                        )
                    else:
                        failures[pending[key].relpath] = problem
                self._log_round_failures(attempt, failures)
        finally:
            for upload in pending.values():
                self._abort(client, upload)
        if pending:
            raise BrevTransferError(
                f"{len(pending)} of {len(to_send)} file(s) from {self.instance_name}:{self.remote_dir} were not "
                f"uploaded to {target} after {attempt} attempt(s): {_describe(failures)}"
            )
        summary = {
            "instance_name": self.instance_name,
            "remote_dir": self.remote_dir,
            "s3_bucket": self.s3_bucket,
            "s3_prefix": self.s3_prefix,
            "s3_uri": target,
            "files": len(uploads),
            "bytes": sum(u.size for u in uploads),
            "uploaded": len(to_send),
            "skipped_existing": len(skipped),
            "multipart_files": sum(1 for u in to_send if u.multipart),
            "attempts": attempt,
        }
        self.log.info(
            "Uploaded %d file(s), %d bytes, to %s in %d round(s) (%d already there).",
            summary["uploaded"],
            sum(u.size for u in to_send),
            target,
            attempt,
            summary["skipped_existing"],
        )
        return summary

    def _settle(self, client: Any, key: str, upload: _Upload, report: TransferReport) -> tuple[str, str] | None:
        """Record this round's results for one file; ``None`` once it is complete and verified in S3."""
        if not upload.multipart:
            outcome = report.outcome(key)
            if outcome is not None:
                return outcome
            problem = self._verify(client, upload)
            if problem is not None:
                with contextlib.suppress(Exception):
                    client.delete_object(Bucket=self.s3_bucket, Key=upload.key)
                return ("verify", problem)
            return None
        first_problem: tuple[str, str] | None = None
        for number, _offset, length in split_parts(upload.size, upload.part_size):
            if number in upload.parts:
                continue
            outcome = report.outcome(f"{key}.{number}")
            result = report.ok.get(f"{key}.{number}")
            if outcome is None and result is not None and result.etag and result.md5 and result.size == length:
                upload.parts[number] = (result.etag, result.md5)
            elif first_problem is None:
                code, detail = outcome or ("verify", "incomplete part report")
                first_problem = (code, f"part {number}: {detail}")
        if first_problem is not None:
            return first_problem  # finished parts are kept for the next round
        problem = self._complete(client, upload)
        if problem is None:
            problem = self._verify(client, upload)
            if problem is not None:
                with contextlib.suppress(Exception):
                    client.delete_object(Bucket=self.s3_bucket, Key=upload.key)
        if problem is not None:
            self._abort(client, upload)  # start this file over with a new upload
            return ("verify", problem)
        upload.upload_id = None
        return None

    def on_kill(self) -> None:
        """Abort multipart uploads this task started (S3 would otherwise keep, and bill, their parts)."""
        client = self._client
        if client is None:
            return
        for key, upload_id in list(self._open_uploads.items()):
            with contextlib.suppress(Exception):
                client.abort_multipart_upload(Bucket=self.s3_bucket, Key=key, UploadId=upload_id)
        self._open_uploads.clear()
