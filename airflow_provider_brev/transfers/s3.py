"""Copy between S3 and a directory on a Brev instance, without any AWS credential on the instance.

The worker lists and presigns (:class:`~airflow_provider_brev.hooks.s3_staging.S3StagingHook`, on the Amazon
provider's ``S3Hook``); the instance only runs ``curl`` with the presigned URLs. URLs are short-lived credentials
themselves: they travel to the instance in one 0600 *plan file* per round (``brev copy`` of a private temp
file), which the transfer script reads into memory and deletes before the first download or upload starts;
they are on no command line, in no log and in no file left behind
(:mod:`airflow_provider_brev.core.staging.scripts`).

Every file is verified: downloads by size and md5 on the instance (the md5 comes from the ETag when it is a
plain md5, or from the ``airflow-brev-md5`` metadata this operator writes on multipart uploads), uploads by
``head_object`` on the worker (size, and the ETag against the md5 of the file or of each part). A round that
leaves files failed or unreported is followed by another round for just those files, with fresh URLs, up to
``max_attempts`` rounds; then the task fails naming them. A partial transfer is never reported as success.

``boto3`` and the S3 hooks are imported inside ``execute`` only (DAG parsing stays cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.checksums import MIB, S3_MAX_PART_SIZE, S3_MIN_PART_SIZE
from airflow_provider_brev.core.staging.lineage import bucket_uris
from airflow_provider_brev.core.staging.paths import printable
from airflow_provider_brev.core.staging.rounds import describe_failures, name_some, parse_keys
from airflow_provider_brev.core.values import bool_value, integer
from airflow_provider_brev.exceptions import (  # re-exported
    BrevInvalidInputError,
    BrevTransferConflictError,
    BrevTransferError,
)
from airflow_provider_brev.transfers.base import BrevS3TransferBaseOperator
from airflow_provider_brev.utils.mixins import brev_template_fields

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_brev.core.staging.rounds import TransferSettings


__all__ = ["BrevToS3Operator", "BrevTransferConflictError", "BrevTransferError", "S3ToBrevOperator"]

DEFAULT_MULTIPART_THRESHOLD = 64 * MIB
DEFAULT_PART_SIZE = 64 * MIB


class S3ToBrevOperator(BrevS3TransferBaseOperator):
    """Copy an S3 prefix (or explicit keys) into a directory on a Brev instance, verified file by file.

    The worker lists and presigns; the instance downloads with ``curl`` (``--retry``), checks each file's size
    and md5 and moves it into place atomically. Failed files get fresh URLs and another round, up to
    ``max_attempts`` rounds; then the task fails naming them. Nothing AWS-related but short-lived presigned URLs
    reaches the instance, and those only through a 0600 file deleted before the first download starts.

    Returns (XCom) ``{"instance_name", "s3_bucket", "s3_prefix", "s3_uri", "remote_dir", "files", "bytes",
    "md5_verified", "attempts"}``.

    Besides its own parameters below, it takes those of both directions
    (:class:`~airflow_provider_brev.transfers.base.BrevS3TransferBaseOperator`: ``instance_name``, ``s3_bucket``,
    ``include``, ``exclude``, ``aws_conn_id``, the round settings ...).

    :param remote_dir: destination directory (templated; ``~/x`` or relative = under the remote ``$HOME``);
        created if needed. Existing files with the same names are replaced.
    :param s3_prefix: "directory" prefix to copy (templated; a trailing ``/`` is implied; ``""`` = whole
        bucket). Files land at ``remote_dir/<key relative to the prefix>``.
    :param s3_keys: instead of a prefix, explicit keys (templated); each lands at ``remote_dir/<basename>``.
    """

    template_fields = brev_template_fields(
        *BrevS3TransferBaseOperator.template_fields, "remote_dir", "s3_prefix", "s3_keys"
    )

    def __init__(
        self,
        *,
        remote_dir: str,
        s3_prefix: str | None = None,
        s3_keys: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.remote_dir = remote_dir
        self.s3_prefix = s3_prefix
        self.s3_keys = s3_keys

    def lineage_uris(self) -> tuple[list[Any], list[Any]]:
        """Reads the prefix (or the explicit keys); writes nothing in S3."""
        return bucket_uris(self.s3_bucket, self.s3_prefix, self.s3_keys), []

    def _settings(self) -> TransferSettings:
        if (parse_keys(self.s3_keys) is None) == (self.s3_prefix is None):
            raise BrevInvalidInputError(
                "Pass either s3_prefix (a 'directory' prefix; '' for the whole bucket) or s3_keys, not both."
            )
        return super()._settings()

    def transfer(self, settings: TransferSettings) -> dict[str, Any]:
        s, keys = settings, parse_keys(self.s3_keys)
        staging = self._staging_hook(s)
        if keys is None:  # explicit keys: each is looked up first (a missing bucket is named then)
            staging.check_location(s.prefix, what="s3_bucket/s3_prefix")
        items = staging.list_downloads(prefix=s.prefix, keys=keys, path_filter=s.path_filter, log=self.log)
        source = s.s3_uri if keys is None else f"{len(keys)} key(s)"
        if not items:
            self._nothing_to_do(s, f"Nothing to download from {source}")
        self.log.info(
            "Downloading %d file(s), %d bytes, from %s to %s.", len(items), sum(i.size for i in items), source, s.remote
        )

        outcome = self._runner(s, staging).download(items)
        if outcome.failures:
            raise BrevTransferError(
                f"{len(outcome.failures)} of {len(items)} file(s) from {source} were not downloaded to {s.remote} "
                f"after {outcome.attempts} attempt(s): {describe_failures(outcome.failures)}"
            )
        attempt = outcome.attempts
        summary = {
            "instance_name": s.instance_name,
            "s3_bucket": s.bucket,
            "s3_prefix": s.prefix if keys is None else None,
            "s3_uri": s.s3_uri if keys is None else None,
            "remote_dir": s.remote_dir,
            "files": len(items),
            "bytes": sum(i.size for i in items),
            "md5_verified": sum(1 for i in items if i.md5),
            "attempts": attempt,
        }
        self.log.info(
            "Downloaded %d file(s), %d bytes, to %s in %d round(s).", len(items), summary["bytes"], s.remote, attempt
        )
        return summary


class BrevToS3Operator(BrevS3TransferBaseOperator):
    """Copy a directory on a Brev instance to an S3 prefix, verified object by object.

    The instance lists the files (relative path, size, md5) honouring include/exclude; the worker presigns a
    ``PUT`` per small file, or creates a multipart upload and presigns one URL per part for files above
    ``multipart_threshold`` (so multi-GB checkpoints work); the instance uploads with ``curl`` and reports each
    ETag; the worker completes multipart uploads (aborting them on failure) and verifies every object with
    ``head_object`` (size; md5 against the single-part ETag or each part's md5; multipart objects also get an
    ``airflow-brev-md5`` metadata entry so downloads can verify them). Failed files get fresh URLs (multipart
    uploads keep their finished parts) for up to ``max_attempts`` rounds; then the task fails naming them.

    With ``overwrite=False`` (default) existing keys under the prefix are never replaced: the task fails before
    uploading anything if any differs, so write each run to its own prefix (e.g. ``.../{{ run_id | run_slug }}/``).
    Keys that already hold identical content (same size and md5) are skipped, so a retried task succeeds.

    Returns (XCom) ``{"instance_name", "remote_dir", "s3_bucket", "s3_prefix", "s3_uri", "files", "bytes",
    "uploaded", "skipped_existing", "multipart_files", "attempts"}``.

    Besides its own parameters below, it takes those of both directions
    (:class:`~airflow_provider_brev.transfers.base.BrevS3TransferBaseOperator`: ``instance_name``, ``s3_bucket``,
    ``include``, ``exclude``, ``aws_conn_id``, the round settings ...).

    :param remote_dir: directory to upload (templated; ``~/x`` or relative = under the remote ``$HOME``).
        Regular files only; symlinks are not followed; a step-staging input manifest (``.brev-manifest.jsonl``
        at the top, see :mod:`airflow_provider_brev.staging.runner`) is never uploaded.
    :param s3_prefix: destination "directory" prefix (templated; a trailing ``/`` is implied).
    :param overwrite: replace existing keys with different content (templated; default: refuse).
    :param multipart_threshold: files larger than this go up in parts (files above 5 GiB always do).
    :param part_size: bytes per part (5 MiB to 5 GiB; grown automatically past 10,000 parts).
    """

    template_fields = brev_template_fields(
        *BrevS3TransferBaseOperator.template_fields,
        "remote_dir",
        "s3_prefix",
        "overwrite",
        "multipart_threshold",
        "part_size",
    )

    def __init__(
        self,
        *,
        remote_dir: str,
        s3_prefix: str,
        overwrite: bool = False,
        multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
        part_size: int = DEFAULT_PART_SIZE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.remote_dir = remote_dir
        self.s3_prefix = s3_prefix
        self.overwrite = overwrite
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size

    def lineage_uris(self) -> tuple[list[Any], list[Any]]:
        """Writes the prefix; reads nothing in S3."""
        return [], bucket_uris(self.s3_bucket, self.s3_prefix)

    cost_phase = "upload"

    def transfer(self, settings: TransferSettings) -> dict[str, Any]:
        s = settings
        overwrite = bool_value("overwrite", self.overwrite, default=False)
        threshold = integer("multipart_threshold", self.multipart_threshold, minimum=0)
        part_size = integer("part_size", self.part_size, minimum=S3_MIN_PART_SIZE, maximum=S3_MAX_PART_SIZE)
        staging = self._staging_hook(s)
        staging.check_location(s.prefix, what="s3_bucket/s3_prefix")  # before the first brev call
        runner = self._runner(s, staging)
        listed = runner.list_remote()
        if listed.missing_dir:
            raise BrevTransferError(f"The directory {s.remote} does not exist.")
        uploads = runner.list_uploads(listed, threshold=threshold, part_size=part_size)
        if not uploads:
            self._nothing_to_do(s, f"No files to upload in {s.remote}")
        skipped, different = staging.compare_existing(uploads, s.prefix)
        if different and not overwrite:
            raise BrevTransferConflictError(
                f"{len(different)} key(s) under {s.s3_uri} already exist with different content and overwrite is "
                f"off (write each run to its own prefix, or set overwrite=True): "
                + name_some([u.key for u in different])
            )
        for upload in skipped:
            self.log.info(
                "Already in S3 with the same content: s3://%s/%s (%d bytes).",
                s.bucket,
                printable(upload.key),
                upload.size,
            )
        skipped_keys = {upload.key for upload in skipped}
        to_send = [u for u in uploads if u.key not in skipped_keys]
        self.log.info(
            "Uploading %d file(s), %d bytes (%d multipart), from %s to %s.",
            *(len(to_send), sum(u.size for u in to_send), sum(1 for u in to_send if u.multipart), s.remote, s.s3_uri),
        )

        outcome = runner.upload(to_send)
        if outcome.failures:
            raise BrevTransferError(
                f"{len(outcome.failures)} of {len(to_send)} file(s) from {s.remote} were not uploaded to {s.s3_uri} "
                f"after {outcome.attempts} attempt(s): {describe_failures(outcome.failures)}"
            )
        attempt = outcome.attempts
        summary = {
            "instance_name": s.instance_name,
            "remote_dir": s.remote_dir,
            "s3_bucket": s.bucket,
            "s3_prefix": s.prefix,
            "s3_uri": s.s3_uri,
            "files": len(uploads),
            "bytes": sum(u.size for u in uploads),
            "uploaded": len(to_send),
            "skipped_existing": len(skipped),
            "multipart_files": sum(1 for u in to_send if u.multipart),
            "attempts": attempt,
        }
        self.log.info(
            "Uploaded %d file(s), %d bytes, to %s in %d round(s) (%d already there).",
            *(len(to_send), sum(u.size for u in to_send), s.s3_uri, attempt, len(skipped)),
        )
        return summary

    def _cleanup_on_kill(self) -> None:
        """Abort multipart uploads this task started (S3 would otherwise keep, and bill, their parts)."""
        if self.staging is not None:
            self.staging.abort_open_uploads()
