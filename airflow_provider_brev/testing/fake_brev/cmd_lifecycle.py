"""``brev delete``, ``stop`` and ``start``."""

from __future__ import annotations

import time

from airflow_provider_brev.testing.fake_brev.cmd_create import _names_or_error
from airflow_provider_brev.testing.fake_brev.context import (
    Ctx,
    authenticate,
    find_instance,
    get_instance_by_id,
    raise_5xx,
    visible_instances,
)
from airflow_provider_brev.testing.fake_brev.flags import CliError, http_error_text, multierror, traced
from airflow_provider_brev.testing.fake_brev.store import derive, kill_sandbox_processes, take_fault

TYPE_CHECKING = False


def cmd_delete(ctx: Ctx, _v: dict, pos: list[str]) -> int:
    names = _names_or_error(ctx, pos)
    errors: list[str] = []
    deleted: list[str] = []
    for n in names:
        try:
            user = authenticate(ctx)
            inst = _delete_one(ctx, user, n)
        except CliError as exc:
            errors.append(traced(exc.message, "cmd/delete.deleteWorkspace", "cmd/delete/delete.go", 79))
            continue
        deleted.append(n)
        if not ctx.stdout_piped:
            ctx.out(f"Deleting instance {inst['name']}. This can take a few minutes. Run 'brev ls' to check status\n")
    if errors:
        raise CliError(multierror(errors))
    if ctx.stdout_piped:
        for n in deleted:
            ctx.out(n + "\n")
    return 0


def _delete_one(ctx: Ctx, user: dict, name: str) -> dict:
    raise_5xx(ctx, "delete", f"api/organizations/{ctx.org['id']}/workspaces")
    now = ctx.now()
    with ctx.store.txn(now=now) as st:
        inst = find_instance(ctx, st, user, name)
        d = derive(inst, now)
        if inst.get("phase") != "delete":
            inst["last_build"] = d["build_status"]
            inst["phase"] = "delete"
            inst["t_deleting"] = now
            inst["t_gone"] = now + ctx.t("delete_seconds")
    kill_sandbox_processes("BREV_SIM_INSTANCE", inst["id"])
    return inst


def cmd_stop(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if v["all"]:
        user = authenticate(ctx)
        stopped = []
        with ctx.store.txn(now=ctx.now()) as st:
            now = ctx.now()
            for inst in visible_instances(ctx, st, user):
                if derive(inst, now)["status"] != "RUNNING":
                    continue
                if not inst.get("stoppable"):
                    if not ctx.stdout_piped:
                        ctx.out(f"\n{inst['name']} skipped (does not support stop)")
                    continue
                _mark_stopping(ctx, inst, now)
                stopped.append(inst)
        for inst in stopped:
            kill_sandbox_processes("BREV_SIM_INSTANCE", inst["id"])
            if ctx.stdout_piped:
                ctx.out(inst["name"] + "\n")
            else:
                ctx.out(f"\n{inst['name']} stopped \u2713")
        return 0
    names = _names_or_error(ctx, pos)
    errors: list[str] = []
    done: list[str] = []
    for n in names:
        try:
            user = authenticate(ctx)
            raise_5xx(ctx, "stop", f"api/organizations/{ctx.org['id']}/workspaces")
            now = ctx.now()
            with ctx.store.txn(now=now) as st:
                inst = find_instance(ctx, st, user, n)
                if not inst.get("stoppable"):
                    errors.append(f'instance "{inst["name"]}" does not support stop.')
                    continue
                status = derive(inst, now)["status"]
                if status != "RUNNING":
                    raise CliError(
                        http_error_text(
                            400,
                            f"api/workspaces/{inst['id']}/stop",
                            '{"message":"workspace is not running (status=' + status + ')"}',
                        )
                    )
                _mark_stopping(ctx, inst, now)
        except CliError as exc:
            errors.append(traced(exc.message, "cmd/stop.stopWorkspace", "cmd/stop/stop.go", 172))
            continue
        kill_sandbox_processes("BREV_SIM_INSTANCE", inst["id"])
        done.append(n)
        if not ctx.stdout_piped:
            ctx.out(f"Stopping instance {n}.\nNote: this can take a few seconds. Run 'brev ls' to check status\n")
    if errors:
        raise CliError(multierror(errors))
    if ctx.stdout_piped:
        for n in done:
            ctx.out(n + "\n")
    return 0


def _mark_stopping(ctx: Ctx, inst: dict, now: float) -> None:
    inst["phase"] = "stop"
    inst["t_stopping"] = now
    inst["t_stopped"] = now + ctx.t("stop_seconds")


def _start_instance(ctx: Ctx, user: dict, name: str) -> dict:
    """PUT api/workspaces/{id}/start for a STOPPED instance (raises CliError otherwise)."""
    now = ctx.now()
    with ctx.store.txn(now=now) as st:
        inst = find_instance(ctx, st, user, name)
        status = derive(inst, now)["status"]
        if status != "STOPPED":
            raise CliError(f"Instance is not stopped status={status}")
        refused = take_fault(st, "ssh_refused", instance=inst["name"])
        inst["phase"] = "start"
        inst["t_starting"] = now
        inst["t_running"] = now + ctx.t("start_seconds")
        inst["t_build_done"] = inst["t_running"]
        inst["t_ssh_up"] = (
            inst["t_running"] + ctx.t("ssh_seconds") + (float(refused.get("seconds", 0)) if refused else 0.0)
        )
        inst["failure"] = None
    return inst


def _poll_until_running(ctx: Ctx, ident: str, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(ctx.t("poll_seconds"))
        cur = get_instance_by_id(ctx, ident)
        if cur is not None and derive(cur, ctx.now())["status"] == "RUNNING":
            return True
    return False


def cmd_start(ctx: Ctx, v: dict, pos: list[str]) -> int:
    stdin_names = ctx.names_from_stdin()
    names = list(pos) + stdin_names
    if stdin_names and names:
        errors, started = [], []
        for n in names:
            try:
                user = authenticate(ctx)
                inst = _start_instance(ctx, user, n)
            except CliError as exc:
                if "not found" in exc.message:
                    ctx.out("tried to start with local path but path not found\n")
                    started.append(n)
                    continue
                msg = traced(exc.message, "cmd/start.runStartWorkspace", "cmd/start/start.go", 164)
                ctx.err(f"Error starting {n}: {msg}\n")
                errors.append(msg)
                continue
            if not ctx.stdout_piped:
                ctx.out(
                    f"Instance {inst['name']} is starting. \nNote: this can take about a minute. "
                    f"Run 'brev ls' to check status\n\n"
                )
            started.append(n)
        if errors:
            raise CliError(multierror(errors))
        if ctx.stdout_piped:
            for n in started:
                ctx.out(n + "\n")
        return 0
    if not names:
        raise CliError("simulator: `brev start` without an instance name (empty/git workspaces) is not simulated")
    target = names[0]
    user = authenticate(ctx)
    raise_5xx(ctx, "start", f"api/organizations/{ctx.org['id']}/workspaces")
    try:
        inst = _start_instance(ctx, user, target)
    except CliError as exc:
        if "not found" in exc.message:
            ctx.out("tried to start with local path but path not found\n")
            return 0
        raise
    ctx.out(
        f"Instance {inst['name']} is starting. \nNote: this can take about a minute. Run 'brev ls' to check status\n\n"
    )
    if not v["detached"]:
        ctx.out("You can safely ctrl+c to exit\n")
        limit = float(ctx.cfg.get("start_wait_max_seconds") or 30.0)
        if not _poll_until_running(ctx, inst["id"], limit):
            raise CliError(
                f"simulator: instance {inst['name']} did not reach RUNNING within "
                f"start_wait_max_seconds={limit:g} (the real CLI polls forever)"
            )
        ctx.out("\nYour instance is ready!\n")
        ctx.out(f"  Connect:\n    brev open {inst['name']}\n    brev shell {inst['name']}\n")
    if ctx.stdout_piped:
        ctx.out(target + "\n")
    return 0


# --------------------------------------------------------------------------------------------------
# refresh and the ssh model
# --------------------------------------------------------------------------------------------------
