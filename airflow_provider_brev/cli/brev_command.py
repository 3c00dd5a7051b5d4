"""What ``airflow brev instances`` and ``airflow brev sweep`` do (loaded only when one of them runs).

Both decide with the janitor's own code: :func:`~airflow_provider_brev.core.instances.sweep.plan_sweep` says which
instance is owned by this provider and when it expires, and ``sweep`` runs
:func:`~airflow_provider_brev.instances.sweep.sweep`, the janitor operator's sweep, so the command deletes exactly what
the janitor would (owned and expired, by id). The warm-reuse records, and the XCom that proves one may act, are read
from the metadata database (a task reads them through the Execution API):
:class:`~airflow_provider_brev.instances.warm_pool_stores.MetadataVariables` and
:class:`~airflow_provider_brev.instances.warm_pool_stores.MetadataXComs`.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.utils import cli as cli_utils
from airflow.utils.providers_configuration_loader import providers_configuration_loaded

from airflow_provider_brev.core.instances.sweep import ALREADY_DELETING, DELETE, IGNORE, KEEP, STOP, plan_sweep
from airflow_provider_brev.core.validation import owner_prefix
from airflow_provider_brev.core.values import duration_seconds, optional
from airflow_provider_brev.exceptions import BrevError

if TYPE_CHECKING:
    import argparse

    from airflow_provider_brev.core.protocol.output import InstanceTypeOffer
    from airflow_provider_brev.hooks.brev import BrevHook

#: What ``sweep`` prints for each kind of decision.
_DECISIONS = {KEEP: "keep", IGNORE: "ignore", ALREADY_DELETING: "already deleting"}


def _logger() -> logging.Logger:
    """The commands' log: silenced unless ``--verbose`` (stdout carries the table or the JSON, and Airflow's log
    goes to stdout too), as Airflow's own listing commands do (``suppress_logs_and_warning``)."""
    return logging.getLogger("airflow_provider_brev.cli")


def _hook(args: argparse.Namespace) -> tuple[BrevHook, str]:
    """The hook of ``--conn-id`` and the owner prefix (``--prefix``, else the connection's); bad input fails here,
    before any ``brev`` call."""
    # Read connections from the metadata database too, as Airflow's own `airflow connections` commands do: the Task
    # SDK's lookup outside a task reads only environment variables and secrets backends otherwise.
    os.environ["_AIRFLOW_PROCESS_CONTEXT"] = "server"
    from airflow_provider_brev.hooks.brev import BrevHook

    hook = BrevHook(brev_conn_id=args.conn_id, log_cli_output=False)
    prefix = optional(owner_prefix, "--prefix", args.prefix)
    if prefix is None:  # the connection's (reading it runs no `brev`)
        prefix = owner_prefix("the connection extra name_prefix", hook.config.name_prefix)
    return hook, prefix


def _registry(log: logging.Logger) -> Any:
    from airflow_provider_brev.instances.warm_pool import ReuseRegistry
    from airflow_provider_brev.instances.warm_pool_stores import MetadataVariables, MetadataXComs

    return ReuseRegistry(log, store=MetadataVariables(), xcoms=MetadataXComs())


def _print(rows: list[dict[str, Any]], output: str) -> None:
    from airflow.cli.simple_table import AirflowConsole

    AirflowConsole().print_as(data=rows, output=output)


def _price(dollars: float | None) -> str:
    """Dollars per hour as ``brev search`` prints them; ``""`` when not known."""
    return "" if dollars is None else f"{dollars:g}"


def _offers(hook: BrevHook, log: logging.Logger, types: set[str]) -> dict[str, InstanceTypeOffer]:
    """The ``brev search`` row of each of ``types``: one search of the GPU types, and one of every type only when a
    listed type is not among them; ``{}`` when the search fails (the table then shows no prices)."""
    found: dict[str, InstanceTypeOffer] = {}
    for include_cpu in (False, True):
        if types <= set(found):
            break
        try:
            found.update({o.type: o for o in hook.search_instance_types(include_cpu=include_cpu) if o.type in types})
        except BrevError as err:
            log.warning("Could not read the prices from `brev search` (%s).", err)
            break
    return found


def _billed(status: str | None, offer: InstanceTypeOffer | None) -> dict[str, str]:
    """The price columns of one instance: what it bills per hour in its status, and what for (a STOPPED
    instance's disk alone)."""
    from airflow_provider_brev.core.instances.warm_pool import billed_per_hour

    dollars, what = billed_per_hour(status, offer)
    return {"price_per_hour": _price(dollars), "billed": what}


def _fail(err: BrevError) -> None:
    raise SystemExit(f"airflow brev: {type(err).__name__}: {err}")


@cli_utils.action_cli(check_db=False)
@cli_utils.suppress_logs_and_warning
@providers_configuration_loaded
def instances(args: argparse.Namespace) -> None:
    """``airflow brev instances``: every listed instance, owned or not, its expiry and what it bills per hour (a
    STOPPED instance its disk alone)."""
    log = _logger()
    try:
        hook, prefix = _hook(args)
        listed = hook.list_instances()
    except BrevError as err:
        return _fail(err)
    try:
        records, unproven = _registry(log).recorded(listed, prefix)
    except Exception as err:  # a listing without the reuse records is still worth showing
        log.warning("Could not read the warm-reuse records (%s): instances kept for reuse show by name only.", err)
        records, unproven = {}, {}
    now = datetime.now(UTC)
    plan = plan_sweep(listed, prefix=prefix, cutoff=now, records=records, now=now, unproven=unproven)
    offers = {} if args.no_prices else _offers(hook, log, {i.instance_type for i in listed if i.instance_type})
    rows = [
        {
            "name": v.instance.name,
            "id": v.instance.id,
            "status": v.instance.status,
            "type": v.instance.instance_type,
            "gpu": v.instance.gpu,
            "owned": "yes" if v.managed else "no",
            "expires_at": v.expires,
            "reuse_key": v.reuse_key or "",
            **_billed(v.instance.status, offers.get(v.instance.instance_type)),
        }
        for v in sorted(plan.verdicts, key=lambda v: v.instance.name)
    ]
    _print(rows, args.output)
    return None


@cli_utils.action_cli(check_db=False)
@cli_utils.suppress_logs_and_warning
@providers_configuration_loaded
def sweep(args: argparse.Namespace) -> None:
    """``airflow brev sweep [--dry-run]``: the janitor's sweep, each decision printed with its reason."""
    from airflow_provider_brev.instances.sweep import summary_line, wait_until_gone
    from airflow_provider_brev.instances.sweep import sweep as run_sweep

    log = _logger()
    try:
        grace = duration_seconds("--grace-period", args.grace_period, allow_zero=True)
        timeout = duration_seconds("--timeout", args.timeout)
        hook, prefix = _hook(args)
        report, plan = run_sweep(
            hook,
            log,
            _registry(log),
            prefix=prefix,
            grace_period=timedelta(seconds=grace),
            dry_run=args.dry_run,
        )
        if args.wait and report["deleted"]:
            wait_until_gone(hook, log, report, timeout=timeout, poll_interval=2.0)
    except BrevError as err:
        return _fail(err)
    outcome = {name: "deleted" for name in report["deleted"]}
    outcome.update({name: "would delete" for name in report["would_delete"]})
    outcome.update({name: "stopped" for name in report["stopped"]})
    outcome.update({name: "would stop" for name in report["would_stop"]})
    outcome.update({name: "already gone" for name in report["already_gone"]})
    outcome.update({failure["name"]: "failed: " + failure["error"] for failure in report["failed"]})
    rows = [
        {
            "name": v.instance.name,
            "id": v.instance.id,
            "status": v.instance.status,
            "decision": outcome.get(v.instance.name, "") if v.action in (DELETE, STOP) else _DECISIONS[v.action],
            "reason": v.reason,
            "expires_at": v.expires,
        }
        for v in sorted(plan.verdicts, key=lambda v: v.instance.name)
    ]
    _print(rows, args.output)
    if args.output in ("table", "plain"):
        print(summary_line(report))
    if report["failed"]:
        raise SystemExit(
            f"airflow brev sweep: {len(report['failed'])} delete(s) or stop(s) failed (the others went ahead)."
        )
    return None
