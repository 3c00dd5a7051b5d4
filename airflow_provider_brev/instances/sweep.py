"""The janitor's sweep, carried out: list, decide (:func:`~airflow_provider_brev.core.instances.sweep.plan_sweep`),
log every decision on one line, delete (or stop) by id, forget stale reuse records.

The janitor operator (:class:`~airflow_provider_brev.operators.janitor.BrevSweepInstancesOperator`) and
``airflow brev sweep`` (:mod:`airflow_provider_brev.cli`) both run :func:`sweep`, so they decide and delete
alike; only where the reuse records are read from differs (a task reads Variables through the Execution API, the
CLI from the metadata database: :class:`~airflow_provider_brev.instances.warm_pool.ReuseRegistry`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.sweep import ALREADY_DELETING, IGNORE, KEEP, STOP, SweepPlan, plan_sweep
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.instances.release import delete_expired, stop_awake
from airflow_provider_brev.utils.task_memory import MemoryAccessor

if TYPE_CHECKING:
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.instances.warm_pool import ReuseRegistry

#: XCom key of the janitor's report.
XCOM_REPORT = "report"


def empty_report(dry_run: bool) -> dict[str, Any]:
    """The sweep report before anything is decided (its keys: the janitor operator's docstring)."""
    return {
        "deleted": [],
        "would_delete": [],
        "stopped": [],
        "would_stop": [],
        "kept": [],
        "ignored": 0,
        "failed": [],
        "already_deleting": [],
        "already_gone": [],
        "dry_run": bool(dry_run),
    }


class SweepReport(MemoryAccessor):
    """The janitor's report in its task's memory (XCom ``report``, before the task succeeds or fails)."""

    def tell(self, report: dict[str, Any]) -> None:
        self.memory.tell(XCOM_REPORT, report)


def sweep(
    hook: BrevHook,
    log: Any,
    registry: ReuseRegistry,
    *,
    prefix: str,
    grace_period: timedelta,
    dry_run: bool,
    now: datetime | None = None,
) -> tuple[dict[str, Any], SweepPlan]:
    """List the instances, decide, and delete (unless ``dry_run``) what the plan says; returns the report and plan.

    A delete (or stop) that fails is reported and the sweep goes on with the others. A reuse record is forgotten once
    its instance is deleted, or when it is stale; the sightings of stopped-recorded instances found running are kept
    for the next sweep; the records this connection wrote of instances no longer listed are removed where Variables
    can be listed (not in a dry run).

    :param hook: the Brev hook (its ``brev ls``, ``brev delete`` and ``brev stop``).
    :param log: where every decision is logged.
    :param registry: the warm-reuse records.
    :param prefix: the owner prefix of the managed names to sweep.
    :param grace_period: extra time after an expiry before deleting.
    :param dry_run: decide and report (``would_delete``, ``would_stop``), change nothing.
    """
    now = now or datetime.now(UTC)
    cutoff = now - grace_period
    report = empty_report(dry_run)
    stored_keys = registry.stored_keys()  # before `brev ls`: any record written later is of a listed instance
    instances = hook.list_instances()
    log.info(
        "Sweeping %d instance(s) for managed names with prefix %r expired before %s (grace period %s)%s.",
        len(instances),
        prefix,
        cutoff.isoformat(timespec="minutes"),
        grace_period,
        " [dry run]" if dry_run else "",
    )
    records, unproven = registry.recorded(instances, prefix)
    sightings = registry.sightings(records.values())
    plan = plan_sweep(
        instances, prefix=prefix, cutoff=cutoff, records=records, now=now, sightings=sightings, unproven=unproven
    )
    if not dry_run:
        registry.keep_sightings(plan.sightings, sightings)
        for key in registry.forget_orphans(stored_keys, instances, hook.brev_conn_id or ""):
            log.info("Removed Variable %s: the instance it recorded is no longer listed.", key)
    for entry in plan.forget:
        log.info(
            "Forgetting reuse record %s (id %s, key %r): not listed with that id.", entry.name, entry.id, entry.key
        )
        if not dry_run:
            registry.drop(entry.id)
    _report_unchanged(log, report, plan)
    for verdict in plan.deletions():
        _end(hook, log, registry, report, verdict, dry_run)
    for verdict in plan.of(STOP):
        _end(hook, log, registry, report, verdict, dry_run)
    return report, plan


def _report_unchanged(log: Any, report: dict[str, Any], plan: SweepPlan) -> None:
    """Log and report what the sweep leaves as it is."""
    for verdict in plan.verdicts:
        name = verdict.instance.name
        if verdict.action == IGNORE:
            report["ignored"] += 1
            log.info("Ignoring %s: %s.", name, verdict.reason)
        elif verdict.action == ALREADY_DELETING:
            report["already_deleting"].append(name)
            log.info("Skipping %s: %s.", name, verdict.reason)
        elif verdict.action == KEEP:
            kept = {"name": name, "expires_at": verdict.expires}
            report["kept"].append(kept if verdict.reuse_key is None else {**kept, "reuse_key": verdict.reuse_key})
            log.info("Keeping %s (%s): %s.", name, verdict.instance.status, verdict.reason)


def _end(
    hook: BrevHook, log: Any, registry: ReuseRegistry, report: dict[str, Any], verdict: Any, dry_run: bool
) -> None:
    """Delete or stop one instance (by the id it listed) as ``verdict`` says, or report that it would be."""
    instance, stop = verdict.instance, verdict.action == STOP
    what = "stop" if stop else "delete"
    if dry_run:
        report[f"would_{what}"].append(instance.name)
        log.info("Dry run: would %s %s (%s): %s.", what, instance.name, instance.status, verdict.reason)
        return
    log.info("%s %s (%s): %s.", "Stopping" if stop else "Deleting", instance.name, instance.status, verdict.reason)
    try:
        requested = True
        if stop:
            stop_awake(hook, instance)
        else:
            requested = delete_expired(hook, instance)  # by the id it listed
    except Exception as err:
        report["failed"].append({"name": instance.name, "error": str(err)})
        log.error("Could not %s %s; continuing with the others: %s", what, instance.name, err)
        return
    if verdict.reuse_key is not None and not stop:
        registry.drop(instance.id)
    report["stopped" if stop else "deleted" if requested else "already_gone"].append(instance.name)


def wait_until_gone(hook: BrevHook, log: Any, report: dict[str, Any], *, timeout: float, poll_interval: float) -> None:
    """Wait (bounded) until no deleted instance is listed; the ones still there move to ``failed``."""
    pending = set(report["deleted"])
    deadline = time.monotonic() + timeout
    log.info("Waiting up to %.0f s for %d deletion(s) to finish.", timeout, len(pending))
    while True:
        try:
            listed = {instance.name: instance.status for instance in hook.list_instances()}
        except BrevError as err:
            log.warning("Listing instances failed while waiting for the deletions: %s", err)
            listed = {name: "unknown" for name in pending}
        for name in sorted(pending - set(listed)):
            log.info("%s is gone.", name)
        pending &= set(listed)
        if not pending:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(max(0.0, min(poll_interval, deadline - time.monotonic())))
    for name in sorted(pending):
        report["deleted"].remove(name)
        error = f"still {listed.get(name, 'listed')} after {timeout:.0f} s"
        report["failed"].append({"name": name, "error": error})
        log.error("%s was not deleted in time: %s.", name, error)


def summary_line(report: dict[str, Any]) -> str:
    """One line with every count of the report."""
    return (
        f"Janitor summary: {len(report['deleted'])} deleted, {len(report['would_delete'])} would be deleted "
        f"(dry run), {len(report['stopped'])} stopped, {len(report['would_stop'])} would be stopped (dry run), "
        f"{len(report['kept'])} kept, {len(report['already_deleting'])} already deleting, "
        f"{len(report['already_gone'])} already gone, {report['ignored']} ignored, {len(report['failed'])} failed."
    )
