"""The janitor: delete expired, provider-managed Brev instances (the last cleanup layer)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.instances.reuse import DROP, KEEP, STATE_STOPPED, janitor_verdict
from airflow_provider_brev.cli.protocol.names import parse_managed_name
from airflow_provider_brev.cli.protocol.output import STATUS_DELETING
from airflow_provider_brev.cli.validation import owner_prefix
from airflow_provider_brev.cli.values import bool_value, conn_id, duration_seconds, non_negative, optional, positive_int
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevSweepFailedError,  # re-exported
)
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.release import delete_expired
from airflow_provider_brev.utils.task_memory import TaskMemory
from airflow_provider_brev.utils.warm_reuse import ReuseRegistry

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_brev.cli.protocol.names import ManagedName
    from airflow_provider_brev.cli.protocol.output import BrevInstance

#: XCom key of the sweep report (also the task's return value when the sweep succeeds).


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
    instances created outside this provider are ignored. Instances already ``DELETING`` are skipped.

    **Instances kept for warm reuse** (recorded under a ``reuse_key`` in the Airflow Variable
    ``brev_warm_instances``, :mod:`airflow_provider_brev.utils.warm_reuse`) are judged by their record instead of
    their name's expiry (a reused instance outlives the run that named it): a STOPPED one of the recorded id is
    deleted once its ``max_idle`` has passed since it was stopped -- also when the run that stopped it died --, one a
    run uses is kept for its ``max_lifetime`` since it was started; a record whose instance is gone, or whose name
    another id now holds, is forgotten (that other instance is never touched).

    Deletion is idempotent (an instance that is already gone is fine). When one delete fails the sweep goes
    on with the others and fails the task at the end, listing the failures. Every decision is logged on one
    line. The report below is pushed to XCom (key ``report``) before the task succeeds or fails, and is the
    return value of a successful sweep::

        {
            "deleted": ["afbrev-...", ...],  # deletion requested (or waited for)
            "would_delete": [...],  # dry run only: what would have been deleted
            "kept": [{"name": ..., "expires_at": "2026-01-02T03:04:00+00:00"}, ...],  # managed, not expired
            "ignored": 3,  # instances without the prefix or not in the managed format
            "failed": [{"name": ..., "error": ...}, ...],
            "already_deleting": [...],  # managed instances skipped because they were already DELETING
            "already_gone": [...],  # vanished between the listing and the delete
            "dry_run": False,
        }

    :param name_prefix: owner prefix to sweep (templated). Default: the connection extra ``name_prefix``,
        else ``afbrev`` -- the same prefix the create operator uses, so set both the same way.
    :param grace_period: extra time after an instance's expiry before it is deleted (``timedelta`` or
        seconds; default none). Useful when some runs may legitimately outlive their ``max_lifetime``.
    :param dry_run: only log and report what would be deleted (``would_delete``); delete nothing.
    :param wait_for_deletion: after requesting every delete, wait until ``brev ls`` no longer lists them;
        an instance still listed after ``deletion_timeout`` counts as failed.
    :param deletion_timeout: seconds to wait for the deletions (with ``wait_for_deletion``).
    :param poll_interval: seconds between listings while waiting for the deletions.
    :param cli_retry_limit: attempts per ``brev`` call for transient errors (default: the hook's, 4). A sweep
        runs on a schedule, so a lower value keeps one flaky delete from holding up the others. (The task's
        own ``retries``/``retry_delay`` are Airflow's usual task retries.)
    :param cli_retry_delay: initial backoff between those attempts, in seconds (default: the hook's, 1 s).
    :param brev_conn_id: the Airflow connection id of type ``brev``.

    Every parameter but ``dry_run`` is templated; all are checked at the start of ``execute``, before any ``brev``
    call (a bad value fails the task at once, without a retry, naming the parameter).
    """

    template_fields = brev_template_fields(
        "name_prefix",
        "grace_period",
        "wait_for_deletion",
        "deletion_timeout",
        "poll_interval",
        "cli_retry_limit",
        "cli_retry_delay",
    )

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

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        params = super()._hook_parameters
        if self.cli_retry_limit is not None:
            params["retry_limit"] = self.cli_retry_limit
        if self.cli_retry_delay is not None:
            params["retry_delay"] = self.cli_retry_delay
        return params

    def _validate(self) -> tuple[str, timedelta]:
        """Check every rendered parameter before any ``brev`` call and normalise it in place; returns the owner
        prefix (``name_prefix``, else the connection's) and the grace period."""
        optional(conn_id, "brev_conn_id", self.brev_conn_id)
        prefix = optional(owner_prefix, "name_prefix", self.name_prefix)
        grace = optional(duration_seconds, "grace_period", self.grace_period, allow_zero=True) or 0.0
        self.dry_run_only = bool_value("dry_run", self.dry_run_only, default=False)
        self.wait_for_deletion = bool_value("wait_for_deletion", self.wait_for_deletion, default=False)
        self.deletion_timeout = duration_seconds("deletion_timeout", self.deletion_timeout)
        self.poll_interval = duration_seconds("poll_interval", self.poll_interval)
        self.cli_retry_limit = optional(positive_int, "cli_retry_limit", self.cli_retry_limit)
        self.cli_retry_delay = optional(non_negative, "cli_retry_delay", self.cli_retry_delay, unit="seconds")
        if prefix is None:  # the connection's (reading it runs no `brev`)
            prefix = owner_prefix("the connection extra name_prefix", self.hook.config.name_prefix)
        return prefix, timedelta(seconds=grace)

    def execute(self, context: Context) -> dict[str, Any]:
        prefix, grace_period = self._validate()
        now = datetime.now(UTC)
        cutoff = now - grace_period
        report: dict[str, Any] = {
            "deleted": [],
            "would_delete": [],
            "kept": [],
            "ignored": 0,
            "failed": [],
            "already_deleting": [],
            "already_gone": [],
            "dry_run": bool(self.dry_run_only),
        }
        instances = self.hook.list_instances()
        self.log.info(
            "Sweeping %d instance(s) for managed names with prefix %r expired before %s (grace period %s)%s.",
            len(instances),
            prefix,
            cutoff.isoformat(timespec="minutes"),
            grace_period,
            " [dry run]" if self.dry_run_only else "",
        )

        handled = self._sweep_reused(instances, report, now.timestamp())
        expired: list[tuple[ManagedName, BrevInstance]] = []
        for instance in sorted(instances, key=lambda i: i.name):
            if instance.id in handled:
                continue
            managed = parse_managed_name(instance.name)
            if managed is None or managed.prefix != prefix:
                report["ignored"] += 1
                self.log.info("Ignoring %s: not a managed name with prefix %r.", instance.name, prefix)
                continue
            expires = managed.expires_at.isoformat()
            if instance.status == STATUS_DELETING:
                report["already_deleting"].append(instance.name)
                self.log.info("Skipping %s: already DELETING (expires %s).", instance.name, expires)
                continue
            if not managed.is_expired(cutoff):
                report["kept"].append({"name": instance.name, "expires_at": expires})
                self.log.info("Keeping %s (%s): expires %s.", instance.name, instance.status, expires)
                continue
            expired.append((managed, instance))

        # Oldest expiry first, so a sweep cut short removes the longest-leaked instances.
        expired.sort(key=lambda pair: (pair[0].expires_at, pair[1].name))
        for managed, instance in expired:
            name = instance.name
            expires = managed.expires_at.isoformat()
            if self.dry_run_only:
                report["would_delete"].append(name)
                self.log.info("Dry run: would delete %s (%s), expired %s.", name, instance.status, expires)
                continue
            self.log.info("Deleting %s (%s): expired %s.", name, instance.status, expires)
            try:
                requested = delete_expired(self.hook, instance)  # by the id it listed
            except Exception as err:
                report["failed"].append({"name": name, "error": str(err)})
                self.log.error("Could not delete %s; continuing with the others: %s", name, err)
                continue
            report["deleted" if requested else "already_gone"].append(name)

        if self.wait_for_deletion and report["deleted"]:
            self._wait_until_gone(report)

        self._log_summary(report)
        TaskMemory(context, self.log).tell_report(report)
        if report["failed"]:
            details = "; ".join(f"{f['name']}: {f['error']}" for f in report["failed"])
            raise BrevSweepFailedError(
                f"The janitor could not delete {len(report['failed'])} expired instance(s) "
                f"(the other deletions went ahead): {details}"
            )
        return report

    def _sweep_reused(self, instances: list[BrevInstance], report: dict[str, Any], now: float) -> set[str]:
        """Judge every instance recorded for warm reuse by its record
        (:func:`~airflow_provider_brev.cli.instances.reuse.janitor_verdict`); returns the ids it decided on."""
        registry = ReuseRegistry(self.log)
        handled: set[str] = set()
        for key, entries in sorted(registry.load().items()):
            for entry in entries:
                live = next((i for i in instances if i.name == entry.name), None)
                verdict = janitor_verdict(entry, live, now)
                if verdict == DROP:
                    self.log.info(
                        "Forgetting reuse record %s (id %s, key %r): not listed with that id.",
                        *(entry.name, entry.id, key),
                    )
                    if not self.dry_run_only:
                        registry.drop(entry.id)
                    continue
                assert live is not None
                handled.add(live.id)
                expires = datetime.fromtimestamp(entry.expires_at(), UTC).isoformat(timespec="minutes")
                if verdict == KEEP:
                    report["kept"].append({"name": live.name, "expires_at": expires, "reuse_key": key})
                    self.log.info(
                        "Keeping %s (%s, reuse key %r, %s): until %s.",
                        live.name,
                        live.status,
                        key,
                        entry.state,
                        expires,
                    )
                    continue
                why = "stopped longer than its max_idle" if entry.state == STATE_STOPPED else "in use past max_lifetime"
                if self.dry_run_only:
                    report["would_delete"].append(live.name)
                    self.log.info("Dry run: would delete %s (reuse key %r): %s (%s).", live.name, key, why, expires)
                    continue
                self.log.info("Deleting %s (%s, reuse key %r): %s (%s).", live.name, live.status, key, why, expires)
                try:
                    requested = delete_expired(self.hook, live)  # by the id it listed
                except Exception as err:
                    report["failed"].append({"name": live.name, "error": str(err)})
                    self.log.error("Could not delete %s; continuing with the others: %s", live.name, err)
                    continue
                registry.drop(entry.id)
                report["deleted" if requested else "already_gone"].append(live.name)
        return handled

    def _wait_until_gone(self, report: dict[str, Any]) -> None:
        """Wait (bounded) until no deleted instance is listed; the ones still there become failures."""
        pending = set(report["deleted"])
        deadline = time.monotonic() + self.deletion_timeout
        self.log.info("Waiting up to %.0f s for %d deletion(s) to finish.", self.deletion_timeout, len(pending))
        while True:
            try:
                listed = {instance.name: instance.status for instance in self.hook.list_instances()}
            except BrevError as err:
                self.log.warning("Listing instances failed while waiting for the deletions: %s", err)
                listed = {name: "unknown" for name in pending}
            for name in sorted(pending - set(listed)):
                self.log.info("%s is gone.", name)
            pending &= set(listed)
            if not pending:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(max(0.0, min(self.poll_interval, deadline - time.monotonic())))
        for name in sorted(pending):
            report["deleted"].remove(name)
            error = f"still {listed.get(name, 'listed')} after {self.deletion_timeout:.0f} s"
            report["failed"].append({"name": name, "error": error})
            self.log.error("%s was not deleted in time: %s.", name, error)

    def _log_summary(self, report: dict[str, Any]) -> None:
        self.log.info(
            "Janitor summary: %d deleted, %d would be deleted (dry run), %d kept, %d already deleting, "
            "%d already gone, %d ignored, %d failed.",
            len(report["deleted"]),
            len(report["would_delete"]),
            len(report["kept"]),
            len(report["already_deleting"]),
            len(report["already_gone"]),
            report["ignored"],
            len(report["failed"]),
        )
