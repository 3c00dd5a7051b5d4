"""The janitor's sweep, carried out: list, decide (:func:`~airflow_provider_brev.cli.instances.sweep.plan_sweep`),
log every decision on one line, delete by id, forget stale reuse records.

The janitor operator (:class:`~airflow_provider_brev.operators.janitor.BrevSweepInstancesOperator`) and
``airflow brev sweep`` (:mod:`airflow_provider_brev.commands`) both run :func:`sweep`, so they decide and delete
alike; only where the reuse records are read from differs (a task reads Variables through the Execution API, the
CLI from the metadata database: :class:`~airflow_provider_brev.utils.warm_reuse.ReuseRegistry`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.instances.sweep import ALREADY_DELETING, IGNORE, KEEP, SweepPlan, plan_sweep
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.utils.release import delete_expired

if TYPE_CHECKING:
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.utils.warm_reuse import ReuseRegistry


def empty_report(dry_run: bool) -> dict[str, Any]:
    """The sweep report before anything is decided (its keys: the janitor operator's docstring)."""
    return {
        "deleted": [],
        "would_delete": [],
        "kept": [],
        "ignored": 0,
        "failed": [],
        "already_deleting": [],
        "already_gone": [],
        "dry_run": bool(dry_run),
    }


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

    A delete that fails is reported and the sweep goes on with the others. A reuse record is forgotten once its
    instance is deleted, or when it is stale (not in a dry run).

    :param hook: the Brev hook (its ``brev ls`` and ``brev delete``).
    :param log: where every decision is logged.
    :param registry: the warm-reuse records.
    :param prefix: the owner prefix of the managed names to sweep.
    :param grace_period: extra time after an expiry before deleting.
    :param dry_run: decide and report (``would_delete``), delete nothing.
    """
    now = now or datetime.now(UTC)
    cutoff = now - grace_period
    report = empty_report(dry_run)
    instances = hook.list_instances()
    log.info(
        "Sweeping %d instance(s) for managed names with prefix %r expired before %s (grace period %s)%s.",
        len(instances),
        prefix,
        cutoff.isoformat(timespec="minutes"),
        grace_period,
        " [dry run]" if dry_run else "",
    )
    plan = plan_sweep(instances, prefix=prefix, cutoff=cutoff, records=registry.load(), now=now)
    for key, entry in plan.forget:
        log.info("Forgetting reuse record %s (id %s, key %r): not listed with that id.", entry.name, entry.id, key)
        if not dry_run:
            registry.drop(entry.id)
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
    for verdict in plan.deletions():
        instance = verdict.instance
        if dry_run:
            report["would_delete"].append(instance.name)
            log.info("Dry run: would delete %s (%s): %s.", instance.name, instance.status, verdict.reason)
            continue
        log.info("Deleting %s (%s): %s.", instance.name, instance.status, verdict.reason)
        try:
            requested = delete_expired(hook, instance)  # by the id it listed
        except Exception as err:
            report["failed"].append({"name": instance.name, "error": str(err)})
            log.error("Could not delete %s; continuing with the others: %s", instance.name, err)
            continue
        if verdict.reuse_key is not None:
            registry.drop(instance.id)
        report["deleted" if requested else "already_gone"].append(instance.name)
    return report, plan


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
        f"(dry run), {len(report['kept'])} kept, {len(report['already_deleting'])} already deleting, "
        f"{len(report['already_gone'])} already gone, {report['ignored']} ignored, {len(report['failed'])} failed."
    )
