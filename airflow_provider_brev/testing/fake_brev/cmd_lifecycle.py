"""``brev delete``, and the start of a STOPPED instance that ``exec`` and ``copy`` do on their own."""

from __future__ import annotations

import time

from airflow_provider_brev.testing.fake_brev.context import (
    Ctx,
    authenticate,
    find_instance,
    get_instance_by_id,
    raise_5xx,
)
from airflow_provider_brev.testing.fake_brev.flags import CliError, multierror, traced
from airflow_provider_brev.testing.fake_brev.store import derive, kill_sandbox_processes, take_fault


def names_or_error(ctx: Ctx, pos: list[str]) -> list[str]:
    """Instance names from the arguments and from a non-terminal stdin (read to EOF)."""
    names = list(pos) + ctx.names_from_stdin()
    if not names:
        raise CliError("instance name required: provide as argument or pipe from another command")
    return names


def cmd_delete(ctx: Ctx, _v: dict, pos: list[str]) -> int:
    errors: list[str] = []
    deleted: list[str] = []
    for name in names_or_error(ctx, pos):
        try:
            user = authenticate(ctx)
            raise_5xx(ctx, "delete", f"api/organizations/{ctx.org['id']}/workspaces")
            now = ctx.now()
            with ctx.store.txn(now=now) as st:
                inst = find_instance(ctx, st, user, name)
                if inst.get("phase") != "delete":
                    inst.update(last_build=derive(inst, now)["build_status"], phase="delete", t_deleting=now)
                    inst["t_gone"] = now + ctx.t("delete_seconds")
        except CliError as exc:
            errors.append(traced(exc.message, "cmd/delete.deleteWorkspace", "cmd/delete/delete.go", 79))
            continue
        kill_sandbox_processes("BREV_SIM_INSTANCE", inst["id"])
        deleted.append(name)
        if not ctx.stdout_piped:
            ctx.out(f"Deleting instance {inst['name']}. This can take a few minutes. Run 'brev ls' to check status\n")
    if errors:
        raise CliError(multierror(errors))
    if ctx.stdout_piped:
        ctx.out("".join(f"{n}\n" for n in deleted))
    return 0


def start_instance(ctx: Ctx, user: dict, name: str) -> dict:
    """PUT api/workspaces/{id}/start for a STOPPED instance (CliError otherwise)."""
    now = ctx.now()
    with ctx.store.txn(now=now) as st:
        inst = find_instance(ctx, st, user, name)
        status = derive(inst, now)["status"]
        if status != "STOPPED":
            raise CliError(f"Instance is not stopped status={status}")
        refused = take_fault(st, "ssh_refused", instance=inst["name"])
        t_running = now + ctx.t("start_seconds")
        extra = float(refused.get("seconds", 0)) if refused else 0.0
        inst.update(phase="start", t_starting=now, t_running=t_running, t_build_done=t_running, failure=None)
        inst["t_ssh_up"] = t_running + ctx.t("ssh_seconds") + extra
    ctx.out(f"Instance {inst['name']} is starting. \n\n")
    return inst


def poll_until_running(ctx: Ctx, ident: str) -> bool:
    deadline = time.monotonic() + min(600.0, float(ctx.cfg.get("start_wait_max_seconds") or 30.0))
    while time.monotonic() < deadline:
        cur = get_instance_by_id(ctx, ident)
        if cur is not None and derive(cur, ctx.now())["status"] == "RUNNING":
            return True
        time.sleep(ctx.t("poll_seconds"))
    return False
