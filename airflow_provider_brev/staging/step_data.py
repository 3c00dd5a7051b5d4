"""A step's own data: its ``inputs`` come from S3 before the command starts, its ``outputs`` go to S3 while it
runs and when it ends (success or failure), so losing the instance loses minutes, not the step.

:class:`StepData` serves :class:`~airflow_provider_brev.operators.exec.BrevExecOperator` (hence the TAO
operators) on the worker; the transfers themselves are the staging service
(:func:`~airflow_provider_brev.staging.sync.sync_inputs` / :func:`~airflow_provider_brev.staging.sync.sync_outputs`,
incremental and idempotent). What each sync did is told to the task's memory (XCom key ``brev_step_data``,
:class:`SyncReports`) so that a deferred step still reports it after it resumes on another worker:
``{"inputs": [report...], "outputs": [report...], "output_syncs": n}`` (reports are
:meth:`~airflow_provider_brev.staging.sync.SyncReport.to_dict`; no secret).

:func:`restore_newest` brings the newest matching file of an S3 prefix onto the instance (the TAO ``train``
resume: the newest checkpoint of the same run).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.manifest import validate_inputs, validate_outputs
from airflow_provider_brev.core.staging.paths import PathFilter, printable
from airflow_provider_brev.core.staging.rounds import DEFAULT_URL_EXPIRES_IN, transfer_settings
from airflow_provider_brev.exceptions import BrevError, BrevInvalidInputError, BrevTransferError
from airflow_provider_brev.staging.runner import DEFAULT_TRANSFER_TIMEOUT, StagingHooks, TransferRunner
from airflow_provider_brev.staging.sync import check_locations, sync_inputs, sync_outputs
from airflow_provider_brev.utils.task_memory import MemoryAccessor

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.staging.runner import Log
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: XCom key of what a step's syncs did.
XCOM_STEP_DATA = "brev_step_data"


class SyncReports(MemoryAccessor):
    """What this try's syncs did, in the task's memory (XCom: it lasts the try and its deferrals)."""

    def read(self) -> dict[str, Any]:
        """``{"inputs": [...], "outputs": [...], "output_syncs": n}`` so far (empty before the first sync)."""
        base: dict[str, Any] = {"inputs": [], "outputs": [], "output_syncs": 0}
        value = self.memory.read(XCOM_STEP_DATA, dict)
        if value is not None:
            base.update({k: value[k] for k in base if k in value})
        return base

    def tell(self, reports: dict[str, Any]) -> None:
        self.memory.tell(XCOM_STEP_DATA, reports)


def sync_seconds(value: float | timedelta) -> float:
    """``output_sync_interval`` in seconds (raises :class:`BrevInvalidInputError` unless positive)."""
    try:
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    except (TypeError, ValueError):
        seconds = 0.0
    if seconds <= 0:
        raise BrevInvalidInputError(f"output_sync_interval must be a positive number of seconds, got {value!r}.")
    return seconds


def render_keys(task: Any, context: Any, jinja_env: Any, *fields: str) -> None:
    """Render the keys of the dict attributes ``fields`` of ``task`` (Airflow renders dict values, not keys)."""
    for name in fields:
        value = getattr(task, name, None)
        if isinstance(value, dict):
            rendered = {task.render_template(key, context, jinja_env): item for key, item in value.items()}
            setattr(task, name, rendered)


class StepData:
    """Sync one step's ``inputs`` and ``outputs`` (see the module doc).

    :param hook: the step's Brev hook.
    :param log: the task's logger (counts and names, never a URL).
    :param inputs: S3 URI prefix -> directory on the instance (relative = under the remote home), or ``None``.
    :param outputs: directory on the instance -> S3 URI prefix, or ``None``.
    :param aws_conn_id: the Amazon connection that lists and presigns (its keys never leave the worker).
    :param memory: the task's memory (where the sync reports are kept), or ``None``.
    :param killed: returns ``True`` once the task was killed (a sync then starts no further transfer round).
    """

    def __init__(
        self,
        hook: BrevHook,
        log: Log,
        *,
        inputs: Mapping[str, str] | None,
        outputs: Mapping[str, str] | None,
        aws_conn_id: str | None,
        memory: TaskMemory | None = None,
        killed: Callable[[], bool] | None = None,
    ) -> None:
        self.hook = hook
        self.killed = killed
        self.log = log
        self.inputs = dict(inputs or {})
        self.outputs = dict(outputs or {})
        self.memory = memory
        #: The step's S3 hooks: one Amazon connection for its checks, syncs and restores (built at first use).
        self.s3 = StagingHooks(aws_conn_id)

    def output_map(self) -> dict[str, str]:
        """``{directory: uri}`` of the outputs, normalised (for the step's XCom result)."""
        return {pair.directory: pair.uri for pair in validate_outputs(self.outputs)}

    # -- reports -------------------------------------------------------------------------------------
    def recorded(self) -> dict[str, Any]:
        """What this try's syncs did so far (survives deferrals: kept in the task's memory)."""
        if self.memory is None:
            return {"inputs": [], "outputs": [], "output_syncs": 0}
        return SyncReports(self.memory).read()

    def _record(self, **changes: Any) -> dict[str, Any]:
        data = {**self.recorded(), **changes}
        if self.memory is not None:
            SyncReports(self.memory).tell(data)
        return data

    def check_locations(self) -> None:
        """Before anything is created: every ``inputs``/``outputs`` location can be listed with ``aws_conn_id``
        (:func:`~airflow_provider_brev.staging.sync.check_locations`); raises
        :class:`~airflow_provider_brev.exceptions.BrevS3LocationError` (no bucket, access denied) otherwise."""
        locations = [(p.bucket, p.prefix, "inputs") for p in validate_inputs(self.inputs)]
        locations += [(p.bucket, p.prefix, "outputs") for p in validate_outputs(self.outputs)]
        if locations:
            check_locations(locations, s3=self.s3)

    # -- syncs ---------------------------------------------------------------------------------------
    def sync_inputs(self, instance: str) -> list[dict[str, Any]]:
        """Bring the inputs up to date on ``instance`` (incremental); raises ``BrevTransferError``."""
        if not self.inputs:
            return []
        reports = [r.to_dict() for r in sync_inputs(self.hook, instance, self.inputs, **self._kw())]
        self._record(inputs=reports)
        return reports

    def sync_outputs(self, instance: str, *, final: bool = True) -> list[dict[str, Any]]:
        """Upload what is new or changed in the outputs (idempotent, never deletes); raises on failure."""
        if not self.outputs:
            return []
        outputs = sync_outputs(self.hook, instance, self.outputs, final=final, **self._kw())
        reports = [r.to_dict() for r in outputs]
        self._record(outputs=reports, output_syncs=int(self.recorded()["output_syncs"]) + 1)
        return reports

    def periodic_sync(self, instance: str) -> None:
        """The sync while the command runs: a failure is logged (the next sync, or the final one, catches up;
        a lost instance shows at the next poll), never raised."""
        if not self.outputs:
            return
        self.log.info("Syncing the outputs of the running command on %s.", instance)
        try:
            self.sync_outputs(instance, final=False)
        except Exception as err:
            self.log.warning("Output sync while the command runs failed (%s); the next sync retries.", err)

    def final_sync(self, instance: str, *, command_failed: bool) -> None:
        """The sync when the command ended: a failure raises, unless the command itself failed (then the
        command's error is the task's error, and the upload failure is logged)."""
        if not self.outputs:
            return
        try:
            self.sync_outputs(instance)
        except BrevError as err:
            if not command_failed:
                raise
            self.log.warning("Uploading the outputs of the failed command failed too: %s", err)

    def _kw(self) -> dict[str, Any]:
        return {"s3": self.s3, "log": self.log, "killed": self.killed}


def restore_newest(
    hook: BrevHook,
    instance: str,
    *,
    uri: str,
    directory: str,
    pick: Callable[[Iterable[str]], str | None],
    s3: StagingHooks,
    log: Log,
    present: Iterable[str] = (),
) -> str | None:
    """Download the file ``pick`` chooses among the objects directly under the S3 prefix ``uri`` into
    ``directory`` on ``instance``, unless a file of that name is ``present`` there already.

    :param s3: the step's S3 hooks (:attr:`StepData.s3`).
    :return: the chosen file name, or ``None`` when ``pick`` chose nothing (nothing to restore).
    """
    (pair,) = validate_inputs({uri: directory})
    staging = s3(pair.bucket)
    names = {obj.key[len(pair.prefix) :]: obj.key for obj in staging.list_prefix(pair.prefix)}
    chosen = pick(name for name in names if "/" not in name)
    if chosen is None or chosen in set(present):
        return chosen
    items = staging.list_downloads(prefix=pair.prefix, keys=[names[chosen]], path_filter=PathFilter())
    settings = transfer_settings(
        instance_name=instance,
        s3_bucket=pair.bucket,
        s3_prefix=pair.prefix,
        remote_dir=pair.directory,
        include=None,
        exclude=None,
        max_attempts=3,
        concurrency=1,
        curl_retries=3,
        url_expires_in=DEFAULT_URL_EXPIRES_IN,
        transfer_timeout=DEFAULT_TRANSFER_TIMEOUT,
        fail_on_empty=False,
    )
    outcome = TransferRunner(hook, settings, staging, log).download(items)
    if outcome.failures:
        raise BrevTransferError(f"Could not restore {pair.uri}{printable(chosen)} to {instance}:{pair.directory}.")
    log.info("Restored %s%s -> %s:%s.", pair.uri, printable(chosen), instance, pair.directory)
    return chosen
