"""The base of the S3 <-> Brev transfer operators (:mod:`airflow_provider_brev.transfers.s3`): parameters and
their validation.

Transfers run in *rounds* (:class:`~airflow_provider_brev.staging.runner.TransferRunner`, the same machinery
step staging uses): each round ships one plan file of presigned URLs to the instance (``brev copy`` of a private
0600 temp file), runs one transfer script there (:mod:`airflow_provider_brev.core.staging.scripts`) and parses
its report; the files a round leaves failed or unreported go into the next round with fresh URLs, up to
``max_attempts`` rounds. The S3 side is :class:`~airflow_provider_brev.hooks.s3_staging.S3StagingHook`,
imported when a task runs only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.paths import normalize_patterns
from airflow_provider_brev.core.staging.rounds import DEFAULT_URL_EXPIRES_IN, TransferSettings, transfer_settings
from airflow_provider_brev.core.validation import instance_name, s3_bucket
from airflow_provider_brev.core.values import conn_id, duration_seconds, named, optional, safe_text
from airflow_provider_brev.exceptions import BrevTransferError
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.staging.runner import DEFAULT_TRANSFER_TIMEOUT, ROUND_ERRORS, TransferRunner
from airflow_provider_brev.steps.metering import metered
from airflow_provider_brev.utils.lineage import BrevLineageMixin
from airflow_provider_brev.utils.mixins import brev_template_fields

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import Context

    from airflow_provider_brev.hooks.s3_staging import S3StagingHook

__all__ = ["DEFAULT_TRANSFER_TIMEOUT", "ROUND_ERRORS", "BrevS3TransferBaseOperator"]


class BrevS3TransferBaseOperator(BrevLineageMixin, BrevBaseOperator):
    """Arguments, validation and the round machinery shared by both transfer directions; each direction declares its
    ``remote_dir`` and ``s3_prefix`` (a source or a destination).

    :param instance_name: the instance (templated), e.g. ``create.output``.
    :param s3_bucket: bucket (templated).
    :param include: glob(s) a path relative to the prefix (download) or to ``remote_dir`` (upload) must match
        (templated); ``*`` also matches ``/``.
    :param exclude: glob(s) that drop a path (templated).
    :param aws_conn_id: the Amazon connection used to list and presign (its keys never leave the worker).
    :param max_attempts: rounds; each retries only the files (or parts) still missing, with fresh URLs.
    :param concurrency: files (an upload: files or parts, each part staged in a temp file) transferred in parallel on
        the instance.
    :param curl_retries: ``curl --retry`` count inside a round.
    :param url_expires_in: lifetime of each presigned URL in seconds (a transfer must *start* within it).
    :param transfer_timeout: time budget of one round (and of an upload's listing), in seconds.
    :param fail_on_empty: fail when nothing matches (a wrong prefix usually means a broken pipeline).

    Every parameter is templated (numbers and booleans may be rendered text) and checked before any ``brev`` or S3
    call: a bad value fails the task at once, without a retry, naming the parameter.

    With the OpenLineage provider installed, the S3 side is the task's input (download) or output (upload) dataset
    (:mod:`airflow_provider_brev.utils.lineage`).

    Its time on the instance is billed as its :attr:`cost_phase` (XCom ``brev_cost``, priced from the DAG run's record
    of the instance), so the run's bill gives it its share.
    """

    template_fields = brev_template_fields(
        "instance_name",
        "s3_bucket",
        "include",
        "exclude",
        "aws_conn_id",
        "max_attempts",
        "concurrency",
        "curl_retries",
        "url_expires_in",
        "transfer_timeout",
        "fail_on_empty",
    )
    ui_color = "#76b900"
    #: the directory on the instance and the S3 prefix, declared by each direction
    remote_dir: str
    s3_prefix: str | None
    #: what the transfer's time on the instance is billed as (a phase of the bill)
    cost_phase = "stage"

    def __init__(
        self,
        *,
        instance_name: str,
        s3_bucket: str,
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
        self.s3_bucket = s3_bucket
        self.include = include
        self.exclude = exclude
        self.aws_conn_id = aws_conn_id
        self.max_attempts = max_attempts
        self.concurrency = concurrency
        self.curl_retries = curl_retries
        self.url_expires_in = url_expires_in
        self.transfer_timeout = transfer_timeout
        self.fail_on_empty = fail_on_empty
        self.staging: S3StagingHook | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            settings = self._settings()  # bad input costs nothing: checked before anything is billed or called
            with metered(context, self.log, self, settings.instance_name, self.cost_phase):
                return self.transfer(settings)
        finally:
            self.wait_for_kill_cleanup()

    def transfer(self, settings: TransferSettings) -> dict[str, Any]:
        """The transfer (each direction), with its checked ``settings``; returns its summary (the XCom)."""
        raise NotImplementedError

    def _settings(self) -> TransferSettings:
        """Check every rendered parameter before any ``brev`` or S3 call (bad input costs nothing) and normalise
        them. Parameters whose shared checks in :func:`~airflow_provider_brev.core.staging.rounds.transfer_settings`
        do not name them are checked here first, so every message names its parameter."""
        optional(conn_id, "brev_conn_id", self.brev_conn_id)
        optional(conn_id, "aws_conn_id", self.aws_conn_id)
        instance_name("instance_name", self.instance_name)
        safe_text("remote_dir", self.remote_dir)
        s3_bucket("s3_bucket", self.s3_bucket)
        if self.s3_prefix is not None:
            safe_text("s3_prefix", self.s3_prefix, allow_empty=True)
        named("include", lambda value: normalize_patterns(value, "include"), self.include)
        named("exclude", lambda value: normalize_patterns(value, "exclude"), self.exclude)
        duration_seconds("transfer_timeout", self.transfer_timeout)  # also refuses NaN and infinities
        return transfer_settings(
            instance_name=self.instance_name,
            s3_bucket=self.s3_bucket,
            s3_prefix=self.s3_prefix,
            remote_dir=self.remote_dir,
            include=self.include,
            exclude=self.exclude,
            max_attempts=self.max_attempts,
            concurrency=self.concurrency,
            curl_retries=self.curl_retries,
            url_expires_in=self.url_expires_in,
            transfer_timeout=self.transfer_timeout,
            fail_on_empty=self.fail_on_empty,
        )

    def _staging_hook(self, settings: TransferSettings) -> S3StagingHook:
        from airflow_provider_brev.hooks.s3_staging import S3StagingHook  # boto3 and S3Hook: only when run

        self.staging = S3StagingHook(
            bucket=settings.bucket, aws_conn_id=self.aws_conn_id, url_expires_in=settings.url_expires_in
        )
        return self.staging

    def _nothing_to_do(self, settings: TransferSettings, message: str) -> None:
        message = f"{message} (include={settings.path_filter.include}, exclude={settings.path_filter.exclude})."
        if settings.fail_on_empty:
            raise BrevTransferError(message + " Set fail_on_empty=False to allow it.")
        self.log.warning(message)

    def _runner(self, settings: TransferSettings, staging: S3StagingHook) -> TransferRunner:
        """The round machinery (:class:`~airflow_provider_brev.staging.runner.TransferRunner`), shared with step
        staging."""
        return TransferRunner(self.hook, settings, staging, self.log)
