"""A step's incremental staging: its ``inputs`` (S3 URI prefix -> directory on the instance) before a launch and
its ``outputs`` (directory -> S3 URI prefix) while and after it runs, over :class:`~airflow_provider_brev.staging.
runner.TransferRunner`; shapes are checked by :func:`validate_inputs` / :func:`validate_outputs` (pure rules in
:mod:`airflow_provider_brev.core.staging.manifest`).

- Inputs: one listing of the prefix and, at the same time, one listing of the directory that also reads its
  manifest (``<dir>/.brev-manifest.jsonl``: key, size and ETag of every file a sync placed), then only new or changed
  objects, or files whose local size changed (edited, deleted), are downloaded; the manifest is rewritten
  (``brev copy``) only when it changed. A second sync of an unchanged prefix downloads nothing and writes nothing.
  Local files that are no longer in S3 are left alone.
- Outputs: the directory is listed with md5s, files already in S3 with the same size and md5/ETag are skipped, new
  and changed files are uploaded (changed ones replace the object: the instance is the newer copy). Nothing is ever
  deleted in S3, and the manifest is never uploaded. Safe to call repeatedly while a command runs (periodic
  checkpoint sync) and once more at the end; a file that changes between the listing and the upload of its last
  byte (size, times or inode: a checkpoint saved again in place) fails that file (``changed``) instead of reaching
  S3 with the md5 of its earlier content, and the next call picks it up.
- Handoff: the final output sync records every file it verified in S3 in the directory's input manifest
  (:func:`~airflow_provider_brev.core.staging.manifest.handoff_manifest`), so a later step on the same instance that
  declares the same prefix -> directory as an input finds the files present (evaluate does not download the
  checkpoints train wrote there).

Both return one :class:`SyncReport` per entry (``to_dict()`` for XCom: no secret in it) and raise
:class:`~airflow_provider_brev.exceptions.BrevTransferError` naming each file that still failed after the last round
(inputs: after recording what did arrive in the manifest).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.manifest import (
    MANIFEST_NAME,
    entry_of,
    handoff_manifest,
    manifest_remote_path,
    parse_manifest,
    plan_input_sync,
    render_manifest,
    validate_inputs,
    validate_outputs,
)
from airflow_provider_brev.core.staging.paths import PathFilter
from airflow_provider_brev.core.staging.rounds import (
    DEFAULT_URL_EXPIRES_IN,
    StagedUpload,
    TransferSettings,
    describe_failures,
    name_some,
    transfer_settings,
)
from airflow_provider_brev.core.staging.scripts import (
    CHANGED,
)
from airflow_provider_brev.exceptions import (
    BrevTransferError,
)
from airflow_provider_brev.staging.runner import (
    DEFAULT_MULTIPART_THRESHOLD,
    DEFAULT_PART_SIZE,
    DEFAULT_SYNC_CONCURRENCY,
    DEFAULT_TRANSFER_TIMEOUT,
    Log,
    StagingHooks,
    TransferOutcome,
    TransferRunner,
    staging_hooks,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from airflow_provider_brev.core.staging.types import StagingPair
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.hooks.s3_staging import S3StagingHook

__all__ = ["SyncReport", "check_locations", "sync_inputs", "sync_outputs", "validate_inputs", "validate_outputs"]


@dataclass(frozen=True)
class SyncReport:
    """What one ``inputs``/``outputs`` entry's sync did (no secret in it).

    :param uri: the S3 URI prefix.
    :param directory: the directory on the instance.
    :param transferred: files downloaded (inputs) or uploaded (outputs).
    :param skipped: files left alone because they were already identical.
    :param bytes: bytes transferred.
    :param seconds: wall time of this entry's sync.
    """

    uri: str
    directory: str
    transferred: int
    skipped: int
    bytes: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """For XCom."""
        return asdict(self)


def _settings(instance: str, bucket: str, prefix: str, directory: str, concurrency: int) -> TransferSettings:
    return transfer_settings(
        instance_name=instance,
        s3_bucket=bucket,
        s3_prefix=prefix,
        remote_dir=directory,
        include=None,
        exclude=None,
        max_attempts=3,
        concurrency=concurrency,
        curl_retries=3,
        url_expires_in=DEFAULT_URL_EXPIRES_IN,
        transfer_timeout=DEFAULT_TRANSFER_TIMEOUT,
        fail_on_empty=False,
    )


def _runners(
    hook: BrevHook,
    instance: str,
    pairs: list[StagingPair],
    s3: StagingHooks,
    log: Log,
    concurrency: int,
    killed: Callable[[], bool] | None,
) -> Iterator[tuple[StagingPair, TransferRunner]]:
    """A runner per entry, on the staging hook of its bucket (one boto3 client: presigning stays a local
    computation)."""
    for pair in pairs:
        settings = _settings(instance, pair.bucket, pair.prefix, pair.directory, concurrency)
        yield pair, TransferRunner(hook, settings, s3(pair.bucket), log, killed)


def check_locations(
    locations: Iterable[tuple[str, str, str]], *, aws_conn_id: str | None = None, s3: StagingHooks | None = None
) -> None:
    """Before anything is created: every ``(bucket, prefix, what declares it)`` can be listed with
    ``aws_conn_id`` (:meth:`~airflow_provider_brev.hooks.s3_staging.S3StagingHook.check_location`; one request per
    distinct location); raises naming the first that cannot.

    :param s3: the step's S3 hooks (:class:`StagingHooks`); default: new ones on ``aws_conn_id``.
    """
    s3 = staging_hooks(aws_conn_id, s3)
    for bucket, prefix, what in dict.fromkeys(locations):
        s3(bucket).check_location(prefix, what=what)


def _finish(pair: StagingPair, what: str, outcome: TransferOutcome, skipped: int, started: float) -> SyncReport:
    """The entry's report; raises naming every file still failed after the last round."""
    if outcome.failures:
        total = len(outcome.done) + len(outcome.failures)
        raise BrevTransferError(
            f"{len(outcome.failures)} of {total} file(s) {what} after {outcome.attempts} attempt(s): "
            + describe_failures(outcome.failures)
        )
    done_bytes = sum(item.size for item in outcome.done)
    seconds = round(time.monotonic() - started, 3)
    return SyncReport(pair.uri, pair.directory, len(outcome.done), skipped, done_bytes, seconds)


def sync_inputs(
    hook: BrevHook,
    instance: str,
    inputs: Mapping[str, str],
    *,
    aws_conn_id: str | None = None,
    log: Log,
    concurrency: int = DEFAULT_SYNC_CONCURRENCY,
    s3: StagingHooks | None = None,
    killed: Callable[[], bool] | None = None,
) -> list[SyncReport]:
    """Bring every ``inputs`` directory up to date with its S3 prefix, downloading only new or changed objects
    (see the module doc). Returns one report per entry, in order.

    :param hook: the Brev hook.
    :param instance: the instance name.
    :param inputs: S3 URI prefix -> directory on the instance (relative = under the remote home).
    :param aws_conn_id: the Amazon connection that lists and presigns (its keys never leave the worker).
    :param log: progress (counts, never a URL).
    :param concurrency: parallel downloads on the instance (one ``curl --parallel`` process).
    :param s3: the step's S3 hooks (:class:`StagingHooks`); default: new ones on ``aws_conn_id``.
    :param killed: returns ``True`` once the task was killed (no further transfer round then).
    """
    reports = []
    s3 = staging_hooks(aws_conn_id, s3)
    for pair, runner in _runners(hook, instance, validate_inputs(inputs), s3, log, concurrency, killed):
        started = time.monotonic()
        staging, remote = runner.staging, runner.settings.remote
        with ThreadPoolExecutor(1, thread_name_prefix="brev-s3-list") as pool:  # S3 and the instance at once
            objects = pool.submit(staging.list_prefix, pair.prefix)
            local = runner.list_remote(checksums=False, manifest=True)
            listing = staging.select(objects.result(), pair.prefix, PathFilter(), log)
        if any(item.relpath == MANIFEST_NAME for item in listing):
            log.warning("Ignoring %s%s: that name is the sync manifest.", pair.uri, MANIFEST_NAME)
            listing = [item for item in listing if item.relpath != MANIFEST_NAME]
        manifest = parse_manifest(local.manifest_lines, pair.uri)
        plan = plan_input_sync(listing, manifest, {f.relpath: f.size for f in local.files})
        log.info(
            "Input %s -> %s: %d object(s), %d unchanged, %d to download (%d bytes).",
            *(pair.uri, remote, len(listing), len(plan.unchanged), len(plan.fetch)),
            sum(i.size for i in plan.fetch),
        )
        outcome = runner.download(staging.add_md5_sources(plan.fetch), log_each=False) if plan.fetch else None
        outcome = outcome or TransferOutcome()
        text = render_manifest(pair.uri, [entry_of(i) for i in [*plan.unchanged, *outcome.done]])
        if text.rstrip("\n") != "\n".join(local.manifest_lines) and (outcome.done or not local.missing_dir):
            hook.write_file_to_instance(instance, text, manifest_remote_path(pair.directory), mode=0o644)
        reports.append(
            _finish(pair, f"from {pair.uri} were not downloaded to {remote}", outcome, len(plan.unchanged), started)
        )
        log.info(
            "Input %s -> %s: %d downloaded, %d unchanged.", pair.uri, remote, len(outcome.done), len(plan.unchanged)
        )
    return reports


def _hand_off(
    hook: BrevHook,
    instance: str,
    pair: StagingPair,
    staging: S3StagingHook,
    current: list[str],
    verified: list[StagedUpload],
) -> None:
    """Record the files the final output sync verified in S3 in the directory's input manifest
    (:func:`~airflow_provider_brev.core.staging.manifest.handoff_manifest`): a later step on this instance whose
    ``inputs`` sync the same prefix into the same directory downloads none of them."""
    if not verified:
        return
    stored = staging.list_prefix(pair.prefix)
    text = handoff_manifest(pair.uri, current, [(u.relpath, u.key, u.size) for u in verified], stored)
    if text is not None:
        hook.write_file_to_instance(instance, text, manifest_remote_path(pair.directory), mode=0o644)


def sync_outputs(
    hook: BrevHook,
    instance: str,
    outputs: Mapping[str, str],
    *,
    aws_conn_id: str | None = None,
    log: Log,
    s3: StagingHooks | None = None,
    concurrency: int = DEFAULT_SYNC_CONCURRENCY // 2,
    final: bool = True,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
    part_size: int = DEFAULT_PART_SIZE,
    killed: Callable[[], bool] | None = None,
) -> list[SyncReport]:
    """Upload what is new or changed in every ``outputs`` directory (see the module doc); a directory that does
    not exist (yet) uploads nothing. Returns one report per entry, in order.

    :param hook: the Brev hook.
    :param instance: the instance name.
    :param outputs: directory on the instance (relative = under the remote home) -> S3 URI prefix.
    :param aws_conn_id: the Amazon connection that presigns and verifies (its keys never leave the worker).
    :param log: progress (counts, never a URL).
    :param concurrency: parallel uploads (files or parts) on the instance.
    :param final: the command has ended. A periodic sync (``False``) leaves files that change while being read
        (still being written: a log, ``status.json``, a checkpoint saved again in place) to the next sync instead
        of failing.
    :param multipart_threshold: files larger than this go up in parts.
    :param part_size: bytes per part.
    :param s3: the step's S3 hooks (:class:`StagingHooks`); default: new ones on ``aws_conn_id``.
    :param killed: returns ``True`` once the task was killed (no further transfer round then).
    """
    reports = []
    s3 = staging_hooks(aws_conn_id, s3)
    for pair, runner in _runners(hook, instance, validate_outputs(outputs), s3, log, concurrency, killed):
        started = time.monotonic()
        staging, remote = runner.staging, runner.settings.remote
        # A running step's periodic syncs read only the files that changed since the last sync; the last one
        # removes that md5 cache from the instance.
        listed = runner.list_remote(md5_cache="drop" if final else "keep", manifest=final)
        if listed.missing_dir:
            log.info("Output %s does not exist (yet): nothing to upload to %s.", remote, pair.uri)
            reports.append(_finish(pair, "", TransferOutcome(), 0, started))
            continue
        uploads = runner.list_uploads(listed, threshold=multipart_threshold, part_size=part_size)
        identical, _different = staging.compare_existing(uploads, pair.prefix)
        same = {u.key for u in identical}
        to_send = [u for u in uploads if u.key not in same]
        log.info(
            "Output %s -> %s: %d file(s), %d already in S3, %d to upload (%d bytes).",
            *(remote, pair.uri, len(uploads), len(identical), len(to_send), sum(u.size for u in to_send)),
        )
        outcome = runner.upload(to_send, log_each=False) if to_send else TransferOutcome()
        still_written = {path: why for path, why in outcome.failures.items() if why[0] == CHANGED}
        if not final and still_written and len(still_written) == len(outcome.failures):  # the next sync takes them
            log.info(
                "%d file(s) in %s changed while being uploaded (still being written); the next sync uploads them: %s",
                len(still_written),
                remote,
                name_some(sorted(still_written), limit=5),
            )
            outcome.failures = {}
        reports.append(
            _finish(pair, f"from {remote} were not uploaded to {pair.uri}", outcome, len(identical), started)
        )
        if final:
            _hand_off(hook, instance, pair, staging, listed.manifest_lines, [*identical, *outcome.done])
        if outcome.done:
            log.info(
                "Outputs of %s are in %s: %d file(s) uploaded (%d bytes), %d already there.",
                *(remote, pair.uri, len(outcome.done), sum(u.size for u in outcome.done), len(identical)),
            )
    return reports
