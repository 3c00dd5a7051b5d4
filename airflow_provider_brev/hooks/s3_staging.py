"""S3 side of the S3 <-> Brev transfers: everything the worker asks S3, on the Amazon provider's ``S3Hook``.

:class:`S3StagingHook` wraps an :class:`~airflow.providers.amazon.aws.hooks.s3.S3Hook` (connection, region,
endpoint and credentials all come from it) and adds what the transfer operators of
:mod:`airflow_provider_brev.transfers.s3` need: listing a prefix or explicit keys into
:class:`~airflow_provider_brev.core.staging.rounds.StagedDownload` items, presigning ``GET``/``PUT``/
``UploadPart`` URLs into :class:`~airflow_provider_brev.core.staging.scripts.TransferTask` lists, multipart
create/complete/abort, and verifying what arrived (size, and the ETag against the md5 of the file or of each
part; SSE-KMS/SSE-C ETags are not md5s, so those objects are verified by size).

The Amazon provider (and boto3) is imported when the hook first talks to S3, not when this module is imported,
so modules that import it stay cheap to parse. Presigned URLs are credentials: they only ever leave this hook
inside ``TransferTask`` objects, which go into a plan file, never into a log.
"""

from __future__ import annotations

import contextlib
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import BaseHook
from airflow_provider_brev.core.staging.checksums import (
    MD5_METADATA_KEY,
    is_md5,
    md5_hex_to_base64,
    normalize_etag,
)
from airflow_provider_brev.core.staging.locations import classify_s3_error, location_error
from airflow_provider_brev.core.staging.paths import printable
from airflow_provider_brev.core.staging.rounds import (
    DEFAULT_URL_EXPIRES_IN,
    StagedDownload,
    name_some,
    select_downloads,
    task_order,
)
from airflow_provider_brev.core.staging.s3_pages import split_contents
from airflow_provider_brev.core.staging.scripts import OP_GET, OP_PART, OP_PUT, TransferTask
from airflow_provider_brev.core.staging.types import S3Object
from airflow_provider_brev.exceptions import BrevTransferError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    from airflow_provider_brev.core.staging.locations import S3Problem
    from airflow_provider_brev.core.staging.paths import PathFilter
    from airflow_provider_brev.core.staging.rounds import StagedUpload


def _error_code(err: Any) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", "error"))


def _is_kms(head: Mapping[str, Any]) -> bool:
    """Objects encrypted with SSE-KMS or SSE-C have ETags that are not the md5 of their content."""
    return str(head.get("ServerSideEncryption") or "").startswith("aws:kms") or bool(head.get("SSECustomerAlgorithm"))


class S3StagingHook(BaseHook):
    """S3 listing, presigning, multipart uploads and verification for transfers to and from Brev instances.

    One hook serves one bucket. It remembers the multipart uploads it opened until they are completed or
    aborted, so :meth:`abort_open_uploads` can stop S3 from keeping (and billing) their parts.

    :param bucket: the bucket.
    :param aws_conn_id: the Amazon connection (its keys never leave the worker).
    :param url_expires_in: lifetime of every presigned URL, in seconds.
    :param shares: another staging hook (of another bucket) whose ``S3Hook`` and client this one uses: one
        connection lookup per step, whatever the number of buckets
        (:class:`~airflow_provider_brev.staging.runner.StagingHooks`).
    """

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    conn_type = "aws"
    hook_name = "Amazon Web Services (S3 staging for Brev)"

    def __init__(
        self,
        *,
        bucket: str,
        aws_conn_id: str | None = default_conn_name,
        url_expires_in: int = DEFAULT_URL_EXPIRES_IN,
        shares: S3StagingHook | None = None,
    ) -> None:
        super().__init__()
        self.bucket = bucket
        self.aws_conn_id = aws_conn_id
        self.url_expires_in = url_expires_in
        self.open_uploads: dict[str, str] = {}
        self._shares = shares

    # -- connection ------------------------------------------------------------------------------
    @cached_property
    def s3_hook(self) -> S3Hook:
        """The Amazon provider's hook (built at the first S3 call; shared with :attr:`shares` when given)."""
        if self._shares is not None:
            return self._shares.s3_hook
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        return S3Hook(aws_conn_id=self.aws_conn_id)

    @cached_property
    def client(self) -> Any:
        """The connection's S3 client, presigning with SigV4 unless the connection chose a signature version
        (botocore's default presigned URLs are SigV2, which newer regions reject)."""
        if self._shares is not None:
            return self._shares.client
        from botocore.config import Config

        hook = self.s3_hook
        config = hook.config
        if not getattr(config, "signature_version", None):
            config = config.merge(Config(signature_version="s3v4"))
        client = hook.get_client_type(region_name=hook.region_name, config=config)
        client.meta.events.register("before-parse.s3.ListObjectsV2", _read_contents_fast, unique_id=_FAST_LIST_ID)
        return client

    def _presign(self, method: str, **params: Any) -> str:
        return str(
            self.client.generate_presigned_url(
                method, Params={"Bucket": self.bucket, **params}, ExpiresIn=self.url_expires_in
            )
        )

    def presign_get(self, key: str) -> str:
        return self._presign("get_object", Key=key)

    def presign_put(self, key: str, md5_hex: str) -> str:
        """A ``PUT`` URL that S3 honours only for a body with this md5 (``Content-MD5``)."""
        return self._presign("put_object", Key=key, ContentMD5=md5_hex_to_base64(md5_hex))

    def presign_part(self, key: str, upload_id: str, part_number: int) -> str:
        return self._presign("upload_part", Key=key, UploadId=upload_id, PartNumber=part_number)

    def head(self, key: str) -> dict[str, Any]:
        return dict(self.client.head_object(Bucket=self.bucket, Key=key))

    def metadata_md5(self, key: str) -> str | None:
        """The whole-file md5 this provider stores on multipart uploads, if the object has a valid one."""
        value = str((self.head(key).get("Metadata") or {}).get(MD5_METADATA_KEY, "")).lower()
        return value if is_md5(value) else None

    def delete(self, key: str) -> None:
        """Delete an object, ignoring errors (it may not exist)."""
        with contextlib.suppress(Exception):
            self.client.delete_object(Bucket=self.bucket, Key=key)

    # -- reachability ----------------------------------------------------------------------------
    def _problem(self, prefix: str) -> tuple[S3Problem, str] | None:
        """``None`` when ``prefix`` can be listed (one key at most is asked for), else what is wrong and S3's
        error code (or botocore's exception name)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        except ClientError as err:
            code = _error_code(err)
            status = getattr(err, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
            return classify_s3_error(code, status if isinstance(status, int) else None), code
        except BotoCoreError as err:
            return classify_s3_error(type(err).__name__), type(err).__name__
        return None

    def check_location(self, prefix: str, *, what: str) -> None:
        """Before anything is created: ``s3://bucket/prefix`` can be listed with this connection, else raise
        :class:`~airflow_provider_brev.exceptions.BrevS3LocationError` (no such bucket, access denied: no retry) or
        :class:`~airflow_provider_brev.exceptions.BrevTransientError`, naming the location, ``what`` declares it
        and the connection (:mod:`airflow_provider_brev.core.staging.locations`)."""
        found = self._problem(prefix)
        if found is not None:
            problem, code = found
            uri = f"s3://{self.bucket}/{prefix}"
            raise location_error(problem, uri=uri, what=what, aws_conn_id=self.aws_conn_id, code=code)

    # -- listing ---------------------------------------------------------------------------------
    def list_prefix(self, prefix: str) -> list[S3Object]:
        """Every object under ``prefix`` but "directory" markers (keys ending in ``/``)."""
        paginator = self.client.get_paginator("list_objects_v2")
        return [
            S3Object(obj["Key"], int(obj["Size"]), normalize_etag(obj.get("ETag")))
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
            if not obj["Key"].endswith("/")
        ]

    def head_keys(self, keys: Iterable[str]) -> list[S3Object]:
        """These objects; raises :class:`BrevTransferError` naming the ones that cannot be read."""
        from botocore.exceptions import ClientError

        found: list[S3Object] = []
        missing: list[str] = []
        for key in keys:
            try:
                head = self.head(key)
            except ClientError as err:
                missing.append(f"{key} ({_error_code(err)})")
                continue
            found.append(S3Object(key, int(head["ContentLength"]), normalize_etag(head.get("ETag"))))
        if missing:
            bucket = self._problem("")
            if bucket is not None and bucket[0] == "missing":  # a HEAD's 404 does not tell the bucket from the key
                self.check_location("", what="s3_bucket")
            raise BrevTransferError(f"S3 object(s) not found in bucket {self.bucket}: {name_some(missing)}.")
        return found

    def select(
        self, objects: Iterable[S3Object], prefix: str | None, path_filter: PathFilter, log: Any = None
    ) -> list[StagedDownload]:
        """:func:`~airflow_provider_brev.core.staging.rounds.select_downloads`, with one warning (to ``log``, or
        this hook's) naming the objects skipped because no safe path on the instance can hold them."""
        items, skipped = select_downloads(objects, prefix, path_filter)
        if skipped:
            (log or self.log).warning(
                "Skipping %d object(s) of s3://%s/%s that no safe path on the instance can hold: %s",
                *(len(skipped), self.bucket, printable(prefix or ""), name_some(skipped, separator="; ")),
            )
        return items

    def list_downloads(
        self, *, prefix: str, keys: list[str] | None, path_filter: PathFilter, log: Any = None
    ) -> list[StagedDownload]:
        """The objects to download (under ``prefix``, or the explicit ``keys``) that pass ``path_filter`` (see
        :meth:`select`), each with the md5 the instance must verify: the ETag when it is a plain md5, else this
        provider's metadata (multipart uploads), else none (size only)."""
        objects = self.list_prefix(prefix) if keys is None else self.head_keys(keys)
        return self.add_md5_sources(self.select(objects, prefix if keys is None else None, path_filter, log))

    def add_md5_sources(self, items: list[StagedDownload]) -> list[StagedDownload]:
        """Set each item's md5 from its ETag, or (multipart objects) from this provider's metadata (one
        ``head_object`` each: call it only for what will be downloaded); returns ``items``."""
        for item in items:
            if is_md5(item.etag):
                item.md5, item.md5_from_etag = item.etag, True
            elif "-" in item.etag:  # multipart: only our own metadata knows the md5
                item.md5 = self.metadata_md5(item.key)
        return items

    def recheck_md5_source(self, item: StagedDownload) -> bool:
        """After an md5 mismatch against an ETag: if the object is SSE-KMS/SSE-C (its ETag is not an md5),
        verify it by this provider's metadata, or by size, from now on. True when that changed ``item``."""
        with contextlib.suppress(Exception):
            head = self.head(item.key)
            if _is_kms(head):
                value = str((head.get("Metadata") or {}).get(MD5_METADATA_KEY, "")).lower()
                item.md5, item.md5_from_etag = (value if is_md5(value) else None), False
                return True
        return False

    def download_tasks(self, pending: Mapping[str, StagedDownload]) -> list[TransferTask]:
        """One ``GET`` task per pending download, with a fresh URL."""
        return [
            TransferTask(
                key=key,
                op=OP_GET,
                relpath=pending[key].relpath,
                file_size=pending[key].size,
                md5=pending[key].md5,
                url=self.presign_get(pending[key].key),
            )
            for key in sorted(pending, key=task_order)
        ]

    # -- uploads ---------------------------------------------------------------------------------
    def is_identical(self, upload: StagedUpload, existing: S3Object) -> bool:
        """The object already holds what ``upload`` would send (same size and md5)."""
        if existing.size != upload.size:
            return False
        if existing.etag == upload.md5:
            return True
        return "-" in existing.etag and self.metadata_md5(upload.key) == upload.md5

    def compare_existing(
        self, uploads: Iterable[StagedUpload], prefix: str
    ) -> tuple[list[StagedUpload], list[StagedUpload]]:
        """``(identical, different)``: the uploads whose key already exists under ``prefix``, split by whether
        the object holds the same content."""
        existing = {obj.key: obj for obj in self.list_prefix(prefix)}
        identical: list[StagedUpload] = []
        different: list[StagedUpload] = []
        for upload in uploads:
            if upload.key in existing:
                (identical if self.is_identical(upload, existing[upload.key]) else different).append(upload)
        return identical, different

    def upload_tasks(self, pending: Mapping[str, StagedUpload]) -> list[TransferTask]:
        """Fresh URLs for every pending upload: one ``PUT`` per small file; for multipart files a multipart
        upload (created on first use) and one ``UploadPart`` per part still missing."""
        tasks: list[TransferTask] = []
        for key in sorted(pending, key=task_order):
            upload = pending[key]
            if not upload.multipart:
                url = self.presign_put(upload.key, upload.md5)
                tasks.append(
                    TransferTask(
                        key=key,
                        op=OP_PUT,
                        relpath=upload.relpath,
                        file_size=upload.size,
                        url=url,
                        md5=upload.md5,
                        signature=upload.signature,
                    )
                )
                continue
            upload_id = upload.upload_id or self.create_multipart(upload)
            for number, offset, length in upload.missing_parts():
                url = self.presign_part(upload.key, upload_id, number)
                tasks.append(
                    TransferTask(
                        key=f"{key}.{number}",
                        op=OP_PART,
                        relpath=upload.relpath,
                        file_size=upload.size,
                        url=url,
                        offset=offset,
                        length=length,
                        # SigV4 URLs sign only ``host``: the instance may add a Content-MD5 header S3 then checks
                        content_md5="X-Amz-Signature=" in url,
                        signature=upload.signature,
                    )
                )
        return tasks

    def create_multipart(self, upload: StagedUpload) -> str:
        """Open a multipart upload carrying the file's md5 as metadata (so downloads can verify it)."""
        created = self.client.create_multipart_upload(
            Bucket=self.bucket, Key=upload.key, Metadata={MD5_METADATA_KEY: upload.md5}
        )
        upload.upload_id = str(created["UploadId"])
        self.open_uploads[upload.key] = upload.upload_id
        return upload.upload_id

    def abort_multipart(self, upload: StagedUpload) -> None:
        """Abort ``upload``'s multipart upload, if any (errors ignored); its next round starts over."""
        if upload.upload_id:
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id)
            self.open_uploads.pop(upload.key, None)
        upload.restart()

    def abort_open_uploads(self) -> None:
        """Abort every multipart upload this hook opened and did not finish (errors ignored)."""
        for key, upload_id in list(self.open_uploads.items()):
            with contextlib.suppress(Exception):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        self.open_uploads.clear()

    def _complete_multipart(self, upload: StagedUpload) -> str | None:
        from botocore.exceptions import ClientError

        parts = [{"PartNumber": n, "ETag": f'"{upload.parts[n][0]}"'} for n in sorted(upload.parts)]
        try:
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id, MultipartUpload={"Parts": parts}
            )
        except ClientError as err:
            return f"completing the multipart upload failed ({_error_code(err)})"
        self.open_uploads.pop(upload.key, None)
        return None

    def verify_upload(self, upload: StagedUpload) -> str | None:
        """``None`` when S3 holds what was sent (size; ETag unless SSE-KMS/SSE-C), else why not."""
        from botocore.exceptions import ClientError

        try:
            head = self.head(upload.key)
        except ClientError as err:
            return f"head_object failed ({_error_code(err)})"
        if int(head.get("ContentLength", -1)) != upload.size:
            return f"S3 holds {head.get('ContentLength')} bytes, expected {upload.size}"
        if _is_kms(head):
            return None  # ETags of KMS objects are not md5s: size (and, for parts, Content-MD5) only
        etag = normalize_etag(head.get("ETag"))
        expected = upload.expected_etag()
        if etag != expected:
            return f"ETag {etag} does not match the md5 of what was sent ({expected})"
        return None

    def finish_upload(self, upload: StagedUpload) -> str | None:
        """Complete (multipart) and verify an upload whose data all arrived: ``None`` when the object is right,
        else why not, after deleting what S3 holds and aborting the multipart upload (the file starts over)."""
        problem = self._complete_multipart(upload) if upload.multipart else None
        if problem is None:
            problem = self.verify_upload(upload)
            if problem is not None:
                self.delete(upload.key)
        if problem is not None:
            self.abort_multipart(upload)
            return problem
        upload.upload_id = None
        return None


_FAST_LIST_ID = "airflow-provider-brev-fast-list"


def _read_contents_fast(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook for ``ListObjectsV2``: read a page's objects with the C XML parser
    (:func:`~airflow_provider_brev.core.staging.s3_pages.split_contents`) and leave botocore only the envelope to
    parse -- its generic parser spends about a second per 10,000 objects. Anything but a 200 page is left alone."""
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes) or b"<Contents>" not in body:
        return
    try:
        contents, envelope = split_contents(body)
    except ValueError:
        return  # botocore's own parser reports it
    response_dict["body"] = envelope
    customized_response_dict["Contents"] = contents
