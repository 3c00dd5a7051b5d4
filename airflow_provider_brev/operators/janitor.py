"""The janitor: delete expired, provider-managed Brev instances (the last cleanup layer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.validation import owner_prefix, sweep_spec
from airflow_provider_brev.exceptions import BrevSweepFailedError  # re-exported
from airflow_provider_brev.instances.sweep import SweepReport, summary_line, sweep, wait_until_gone
from airflow_provider_brev.instances.warm_pool import ReuseRegistry
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from datetime import timedelta

    from airflow.sdk import Context

    from airflow_provider_brev.core.instances.sweep import SweepSpec

#: The janitor's parameters besides ``brev_conn_id`` (``dry_run`` is kept as ``dry_run_only``: ``dry_run`` is
#: ``BaseOperator``'s "render templates only" method); every one but ``dry_run`` is templated.
SWEEP_PARAMETERS = (
    "name_prefix",
    "grace_period",
    "dry_run_only",
    "wait_for_deletion",
    "deletion_timeout",
    "poll_interval",
    "cli_retry_limit",
    "cli_retry_delay",
)


class BrevSweepInstancesOperator(BrevBaseOperator):
    """Delete every expired Brev instance this provider created: the janitor, the last cleanup layer.

    Teardown tasks, the create operator's own cleanup and ``on_kill`` cover almost every failure, but not a
    SIGKILLed or OOM-killed worker, a lost worker node, a crashed triggerer, or a DAG run deleted before its
    teardown ran. For those, every name :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator`
    derives carries an owner prefix and a UTC expiry (``<prefix>-<slug>-<hash8>-x<YYYYMMDDHHMM>``, the expiry
    being the run's start plus the create operator's ``max_lifetime``, default 24 h). Run this operator on a
    schedule (the ``brev_janitor`` example DAG runs it hourly) and such leaks are bounded by that lifetime.

    It lists the instances and deletes exactly those whose name parses as a managed name with the owner prefix
    **and** whose expiry (plus ``grace_period``) has passed. It never touches any other instance: names
    without the prefix, names that merely start with it (``afbrev-hand-made``), other owners' prefixes and
    instances created outside this provider are ignored. Instances already ``DELETING`` are skipped. The decisions
    are :func:`~airflow_provider_brev.core.instances.sweep.plan_sweep`'s, the same as ``airflow brev sweep``'s
    (docs/howto/cli-commands.md).

    **Instances kept for warm reuse** (each recorded in the Airflow Variable ``brev_warm_instance.<instance id>``,
    :mod:`airflow_provider_brev.instances.warm_pool`) are judged by their record instead of their name's expiry (a
    reused instance outlives the run that named it), when the record proves the provider created the instance (a
    managed name of the owner prefix whose creating task, or the run that last held it, recorded its id in XCom);
    any other record is ignored with a warning and the instance judged by its name. A STOPPED one is deleted once
    its ``max_idle`` has passed since it was stopped -- also when the run that stopped it died --, one a run uses is
    kept for its ``max_lifetime`` since it was started; one recorded stopped but found running (someone started it
    by hand, or its run died before recording it) is stopped by the first sweep at least 10 minutes after one saw it
    running (deleted if it is not RUNNING then), and deleted past its ``max_idle``. A record whose instance is gone
    is forgotten.

    Deletion is idempotent (an instance that is already gone is fine). When one delete or stop fails the sweep goes
    on with the others and fails the task at the end, listing the failures. Every decision is logged on one
    line. The report below is pushed to XCom (key ``report``) before the task succeeds or fails, and is the
    return value of a successful sweep:

    ```python
    {
        "deleted": ["afbrev-...", ...],  # deletion requested (or waited for)
        "would_delete": [...],  # dry run only: what would have been deleted
        "stopped": [...],  # recorded stopped but found running: stopped again (its disk kept)
        "would_stop": [...],  # dry run only: what would have been stopped
        "kept": [{"name": ..., "expires_at": "2026-01-02T03:04:00+00:00"}, ...],  # managed, not expired
        "ignored": 3,  # instances without the prefix or not in the managed format
        "failed": [{"name": ..., "error": ...}, ...],
        "already_deleting": [...],  # managed instances skipped because they were already DELETING
        "already_gone": [...],  # vanished between the listing and the delete
        "dry_run": False,
    }
    ```

    :param name_prefix: owner prefix to sweep (templated). Default: the connection extra ``name_prefix``,
        else ``afbrev`` -- the same prefix the create operator uses, so set both the same way.
    :param grace_period: extra time after an instance's expiry before it is deleted (``timedelta`` or
        seconds; default none). Useful when some runs may legitimately outlive their ``max_lifetime``.
    :param dry_run: only log and report what would be deleted or stopped (``would_delete``, ``would_stop``);
        change nothing.
    :param wait_for_deletion: after requesting every delete, wait until ``brev ls`` no longer lists them;
        an instance still listed after ``deletion_timeout`` counts as failed.
    :param deletion_timeout: seconds to wait for the deletions (with ``wait_for_deletion``).
    :param poll_interval: seconds between listings while waiting for the deletions.
    :param cli_retry_limit: attempts per ``brev`` call for transient errors (default: the hook's, 4). A sweep
        runs on a schedule, so a lower value keeps one flaky delete from holding up the others. (The task's
        own ``retries``/``retry_delay`` are Airflow's usual task retries.)
    :param cli_retry_delay: initial backoff between those attempts, in seconds (default: the hook's, 1 s).

    Every parameter but ``dry_run`` is templated; all are checked at the start of ``execute``, before any ``brev``
    call (a bad value fails the task at once, without a retry, naming the parameter).
    """

    template_fields = brev_template_fields(*(name for name in SWEEP_PARAMETERS if name != "dry_run_only"))

    def __init__(
        self,
        *,
        name_prefix: str | None = None,
        grace_period: timedelta | float | None = None,
        dry_run: bool = False,
        wait_for_deletion: bool = False,
        deletion_timeout: float = 600.0,
        poll_interval: float = 5.0,
        cli_retry_limit: int | None = None,
        cli_retry_delay: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.name_prefix = name_prefix
        self.grace_period = grace_period
        # Not ``self.dry_run``: that name is BaseOperator's "render templates only" method.
        self.dry_run_only = dry_run
        self.wait_for_deletion = wait_for_deletion
        self.deletion_timeout = deletion_timeout
        self.poll_interval = poll_interval
        self.cli_retry_limit = cli_retry_limit
        self.cli_retry_delay = cli_retry_delay

    def spec(self) -> SweepSpec:
        """The rendered parameters, checked and frozen before any ``brev`` call."""
        return sweep_spec({name: getattr(self, name) for name in ("brev_conn_id", *SWEEP_PARAMETERS)})

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        params = super()._hook_parameters
        spec = self.spec()
        if spec.cli_retry_limit is not None:
            params["retry_limit"] = spec.cli_retry_limit
        if spec.cli_retry_delay is not None:
            params["retry_delay"] = spec.cli_retry_delay
        return params

    def execute(self, context: Context) -> dict[str, Any]:
        spec = self.spec()
        # the connection's prefix by default (reading it runs no `brev`)
        prefix = spec.name_prefix or owner_prefix("the connection extra name_prefix", self.hook.config.name_prefix)
        report, _ = sweep(
            self.hook,
            self.log,
            ReuseRegistry(self.log),
            prefix=prefix,
            grace_period=spec.grace_period,
            dry_run=spec.dry_run,
        )
        if spec.wait_for_deletion and report["deleted"]:
            wait_until_gone(
                self.hook, self.log, report, timeout=spec.deletion_timeout, poll_interval=spec.poll_interval
            )
        self.log.info(summary_line(report))
        SweepReport(TaskMemory(context, self.log)).tell(report)
        if report["failed"]:
            details = "; ".join(f"{f['name']}: {f['error']}" for f in report["failed"])
            raise BrevSweepFailedError(
                f"The janitor could not delete {len(report['failed'])} expired instance(s) "
                f"(the other deletions went ahead): {details}"
            )
        return report
