"""S3 <-> instance transfers in rounds: the machinery shared by the transfer operators and by step staging.

:class:`TransferRunner` runs a transfer in *rounds* for one instance directory and one S3 prefix: each round presigns
URLs for what is still pending (:class:`~airflow_provider_brev.hooks.s3_staging.S3StagingHook`), writes them to a
0600 plan file on the instance (``BrevHook.write_file_to_instance``; never a command line), runs one transfer script
(:mod:`airflow_provider_brev.core.staging.scripts`: downloads in one ``curl --parallel`` batch, uploads one ``curl``
per file or part) and settles every file from its report; what failed or went unreported goes into the next round
with fresh URLs, up to ``max_attempts`` rounds. :meth:`~TransferRunner.download`, :meth:`~TransferRunner.list_uploads`
and :meth:`~TransferRunner.upload` serve ``S3ToBrevOperator`` and ``BrevToS3Operator``
(:mod:`airflow_provider_brev.transfers.s3`) and a step's incremental syncs (:mod:`airflow_provider_brev.staging.sync`).

No AWS credential reaches the instance; presigned URLs appear in no log, exception, XCom or command line.
``boto3`` and the Amazon provider are imported only when a transfer runs.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_provider_brev.core.staging.listing import build_list_script
from airflow_provider_brev.core.staging.paths import printable
from airflow_provider_brev.core.staging.reports import TransferReport, parse_list_output, parse_transfer_output, redact
from airflow_provider_brev.core.staging.rounds import (
    Failure,
    StagedDownload,
    StagedUpload,
    TransferSettings,
    describe_failures,
    name_some,
    plan_uploads,
    task_order,
)
from airflow_provider_brev.core.staging.scripts import (
    CHANGED,
    build_cleanup_script,
    build_plan,
    build_transfer_script,
    plan_path,
)
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevTaskKilledError,
    BrevTimeoutError,
    BrevTransferError,
    BrevTransientError,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.core.staging.listing import Md5Cache
    from airflow_provider_brev.core.staging.reports import ListReport
    from airflow_provider_brev.core.staging.scripts import TransferTask
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.hooks.s3_staging import S3StagingHook

__all__ = [
    "ROUND_ERRORS",
    "Log",
    "StagingHooks",
    "TransferOutcome",
    "TransferRunner",
    "staging_hooks",
]

DEFAULT_TRANSFER_TIMEOUT = 3600.0
#: Parallel transfers on the instance for step staging (one ``curl --parallel`` process for downloads).
DEFAULT_SYNC_CONCURRENCY = 16
DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
DEFAULT_PART_SIZE = 64 * 1024 * 1024

#: Exec failures after which another round may succeed (anything else is raised at once).
ROUND_ERRORS = (BrevTransientError, BrevTimeoutError, BrevCLIError)

_Item = TypeVar("_Item", StagedDownload, StagedUpload)


class Log(Protocol):
    """The logger methods used here (a :class:`logging.Logger`, or an operator's ``self.log``)."""

    def debug(self, msg: Any, /, *args: Any) -> Any: ...

    def info(self, msg: Any, /, *args: Any) -> Any: ...

    def warning(self, msg: Any, /, *args: Any) -> Any: ...


class StagingHooks:
    """The S3 side of one step (or one task): a staging hook per bucket, all on one ``S3Hook``, so the Amazon
    connection is read once (one "credentials retrieved" line) whatever the number of syncs and buckets. Build one
    per step and pass it to :func:`check_locations`, :func:`sync_inputs` and :func:`sync_outputs`; nothing is built
    before the first bucket is asked for.

    :param aws_conn_id: the Amazon connection that lists and presigns (its keys never leave the worker).
    :param url_expires_in: lifetime of the presigned URLs, in seconds (default: the staging hook's).
    """

    def __init__(self, aws_conn_id: str | None, *, url_expires_in: int | None = None) -> None:
        self.aws_conn_id = aws_conn_id
        self.url_expires_in = url_expires_in
        self._hooks: dict[str, S3StagingHook] = {}

    def __call__(self, bucket: str) -> S3StagingHook:
        """The staging hook of ``bucket`` (the same one on every call)."""
        if bucket not in self._hooks:
            from airflow_provider_brev.hooks.s3_staging import S3StagingHook  # boto3 and S3Hook: only when run

            extra = {} if self.url_expires_in is None else {"url_expires_in": self.url_expires_in}
            first = next(iter(self._hooks.values()), None)
            self._hooks[bucket] = S3StagingHook(bucket=bucket, aws_conn_id=self.aws_conn_id, shares=first, **extra)
        return self._hooks[bucket]


def staging_hooks(aws_conn_id: str | None, s3: StagingHooks | None) -> StagingHooks:
    return s3 if s3 is not None else StagingHooks(aws_conn_id)


@dataclass
class TransferOutcome:
    """What a transfer did: ``done`` items, ``failures`` (relpath -> failure) of those still missing after the
    last round, and how many rounds ran."""

    done: list[Any] = field(default_factory=list)
    failures: dict[str, Failure] = field(default_factory=dict)
    attempts: int = 0


class TransferRunner:
    """The rounds of transfers between one instance directory and one S3 prefix (see the module doc).

    :param hook: the Brev hook (plan files and scripts go through it).
    :param settings: validated transfer parameters (instance, bucket, prefix, directory, rounds, concurrency...).
    :param staging: the S3 side (listing, presigning, multipart, verification).
    :param log: where progress goes (never a URL).
    :param killed: returns ``True`` once the task was killed: no further round starts after that.
    """

    def __init__(
        self,
        hook: BrevHook,
        settings: TransferSettings,
        staging: S3StagingHook,
        log: Log,
        killed: Callable[[], bool] | None = None,
    ) -> None:
        self.hook = hook
        self.settings = settings
        self.staging = staging
        self.log = log
        self.killed = killed or _never

    # -- rounds ----------------------------------------------------------------------------------
    def run_round(self, tasks: list[TransferTask], attempt: int) -> TransferReport:
        """Ship one plan and run one transfer script; an exec that failed part-way reports nothing."""
        s = self.settings
        xfer_id = f"{int(time.time())}-{secrets.token_hex(6)}"
        script = build_transfer_script(
            xfer_id=xfer_id, remote_dir=s.remote_dir, concurrency=s.concurrency, curl_retries=s.curl_retries
        )
        # the first round is plumbing (DEBUG); a further round means files failed and are being retried
        (self.log.info if attempt > 1 else self.log.debug)(
            "Transfer round %d/%d on %s: %d task(s) (round id %s).",
            *(attempt, s.max_attempts, s.instance_name, len(tasks), xfer_id),
        )
        try:
            self.hook.write_file_to_instance(s.instance_name, build_plan(tasks), plan_path(xfer_id), mode=0o600)
            result = self.hook.exec_script(s.instance_name, script, timeout=s.transfer_timeout)
        except ROUND_ERRORS as err:
            self.log.warning("Transfer round %s did not complete: %s", xfer_id, redact(str(err)))
            with contextlib.suppress(Exception):
                self.hook.exec_script(s.instance_name, build_cleanup_script(xfer_id), timeout=60)
            return TransferReport(error=f"the round did not complete ({type(err).__name__})")
        report = parse_transfer_output(result.stdout_lines)
        if report.error:
            self.log.warning("Transfer round %s failed on the instance: %s", xfer_id, report.error)
        elif not report.complete:
            self.log.warning("Transfer round %s ended without its final report (connection lost?).", xfer_id)
        return report

    def rounds(
        self,
        items: list[_Item],
        tasks: Callable[[dict[str, _Item]], list[TransferTask]],
        settle: Callable[[str, _Item, TransferReport], Failure | None],
        done: Callable[[_Item], None],
        outcome: TransferOutcome | None = None,
    ) -> TransferOutcome:
        """Run rounds until every item settled or ``max_attempts`` rounds ran, filling ``outcome`` (a new one
        by default) as they go, so a caller still knows what finished when a round raises."""
        s = self.settings
        pending = {str(n): item for n, item in enumerate(items)}
        outcome = outcome if outcome is not None else TransferOutcome()
        still_written: dict[str, Failure] = {}  # changed while read: a retry with the same listing cannot succeed
        while pending and outcome.attempts < s.max_attempts:
            if outcome.attempts and self.killed():  # on_kill released the instance: a retry cannot succeed
                raise BrevTaskKilledError(
                    f"The task was killed during a transfer on {s.instance_name}: not retrying its "
                    f"{len(pending)} unfinished file(s)."
                )
            outcome.attempts += 1
            report = self.run_round(tasks(pending), outcome.attempts)
            outcome.failures = {}
            for key in sorted(pending, key=task_order):
                problem = settle(key, pending[key], report)
                if problem is None:
                    item = pending.pop(key)
                    outcome.done.append(item)
                    done(item)
                elif problem[0] == CHANGED:
                    still_written[pending.pop(key).relpath] = problem
                else:
                    outcome.failures[pending[key].relpath] = problem
            if outcome.failures:
                self.log.warning(
                    "Round %d/%d: %d file(s) failed%s: %s",
                    *(outcome.attempts, s.max_attempts, len(outcome.failures)),
                    ", retrying them with fresh URLs" if outcome.attempts < s.max_attempts else "",
                    describe_failures(outcome.failures),
                )
        outcome.failures.update(still_written)
        return outcome

    # -- downloads -------------------------------------------------------------------------------
    def download(self, items: list[StagedDownload], *, log_each: bool = True) -> TransferOutcome:
        """Download ``items`` (md5 sources set) into the directory, verified file by file."""
        s, staging = self.settings, self.staging

        def settle(key: str, item: StagedDownload, report: TransferReport) -> Failure | None:
            problem = item.settle(key, report)
            if problem is not None and item.suspects_etag(problem) and staging.recheck_md5_source(item):
                self.log.info("s3://%s/%s is KMS-encrypted: its ETag is not an md5.", s.bucket, printable(item.key))
            return problem

        def done(item: StagedDownload) -> None:
            if log_each:
                verified = "md5 verified" if item.md5 else "size verified"
                self.log.info(
                    "Downloaded s3://%s/%s -> %s (%d bytes, %s).",
                    *(s.bucket, printable(item.key), printable(item.relpath), item.size, verified),
                )

        return self.rounds(items, staging.download_tasks, settle, done)

    # -- uploads ---------------------------------------------------------------------------------
    def list_remote(self, *, checksums: bool = True, manifest: bool = False, md5_cache: Md5Cache = "off") -> ListReport:
        """List the directory (a failed exec is retried); raises when it cannot be read.

        :param md5_cache: see :data:`~airflow_provider_brev.core.staging.listing.Md5Cache`.
        """
        s = self.settings
        script = build_list_script(
            s.remote_dir, s.path_filter, checksums=checksums, manifest=manifest, md5_cache=md5_cache
        )
        for attempt in range(1, s.max_attempts + 1):
            try:
                result = self.hook.exec_script(s.instance_name, script, timeout=s.transfer_timeout)
                break
            except ROUND_ERRORS as err:
                if attempt >= s.max_attempts:
                    raise
                self.log.warning("Listing %s failed (attempt %d), retrying: %s", s.remote, attempt, err)
                time.sleep(min(2.0**attempt, 30.0))
        report = parse_list_output(result.stdout_lines)
        if not report.complete:
            raise BrevTransferError(f"Listing {s.remote} did not complete (connection lost?).")
        if report.unreadable:
            raise BrevTransferError(f"Cannot read these files in {s.remote}: {name_some(report.unreadable)}")
        if report.skipped_names:
            self.log.warning(
                "Skipped %d file(s) in %s whose names contain a tab or newline or are not valid UTF-8.",
                report.skipped_names,
                s.remote,
            )
        return report

    def list_uploads(self, report: ListReport, *, threshold: int, part_size: int) -> list[StagedUpload]:
        """The uploads of a (checksummed) listing; raises naming the files that cannot be uploaded."""
        s = self.settings
        uploads, bad = plan_uploads(report.files, s.prefix, multipart_threshold=threshold, part_size=part_size)
        if bad:
            raise BrevTransferError(f"Cannot upload these files from {s.remote}: {name_some(bad, separator='; ')}")
        return uploads

    def upload(self, uploads: list[StagedUpload], *, log_each: bool = True) -> TransferOutcome:
        """Upload ``uploads`` (multipart ones in parts, finished parts kept across rounds), each verified with
        ``head_object``; multipart uploads still open at the end are aborted. ``log_each=False``: one line per
        file at DEBUG only (the caller logs a summary)."""
        s, staging = self.settings, self.staging

        def settle(key: str, upload: StagedUpload, report: TransferReport) -> Failure | None:
            problem = upload.settle_parts(key, report) if upload.multipart else report.outcome(key)
            if problem is not None:
                return problem  # finished parts are kept for the next round
            why = staging.finish_upload(upload)
            return None if why is None else ("verify", why)

        def done(upload: StagedUpload) -> None:
            parts = f", {upload.part_count} parts" if upload.multipart else ""
            (self.log.info if log_each else self.log.debug)(
                "Uploaded %s -> s3://%s/%s (%d bytes%s).",
                *(printable(upload.relpath), s.bucket, printable(upload.key), upload.size, parts),
            )

        outcome = TransferOutcome()
        try:
            self.rounds(uploads, staging.upload_tasks, settle, done, outcome)
        finally:
            finished = {id(u) for u in outcome.done}
            for upload in uploads:
                if id(upload) not in finished:
                    staging.abort_multipart(upload)
        return outcome


def _never() -> bool:
    return False
