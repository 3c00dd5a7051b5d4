"""``brev delete``, ``brev stop`` and ``brev start`` (also the start of a STOPPED instance that ``exec`` and ``copy``
do on their own)."""

from __future__ import annotations

import os
import time

from airflow_provider_brev.testing.fake_brev.context import (
    Ctx,
    authenticate,
    find_instance,
    get_instance_by_id,
    raise_5xx,
    visible_instances,
)
from airflow_provider_brev.testing.fake_brev.flags import CliError, multierror, traced
from airflow_provider_brev.testing.fake_brev.ssh import run_refresh, wait_for_ssh
from airflow_provider_brev.testing.fake_brev.store import derive, kill_marked, record_phase, take_fault

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def names_or_error(ctx: Ctx, pos: list[str]) -> list[str]:
    """Instance names from the arguments and from a non-terminal stdin (read to EOF)."""
    names = list(pos) + ctx.names_from_stdin()
    if not names:
        raise CliError("instance name required: provide as argument or pipe from another command")
    return names


def _change_each(
    ctx: Ctx,
    names: list[str],
    change: Callable[[dict, str, float], None],
    *,
    api: tuple[str, str],
    trace: tuple[str, str, int],
    tty_line: str,
    user: dict | None = None,
) -> int:
    """The per-instance loop of ``delete`` and ``stop``: for each name (authenticated per name unless ``user`` is
    given), a possible 5xx on ``api`` (command, path), ``change(instance, name, now)`` in one store transaction, the
    instance's processes ended; errors collected into one multierror (traced at ``trace``); the names printed when
    piped, ``tty_line`` (formatted with ``name``) otherwise."""
    errors: list[str] = []
    done: list[str] = []
    for name in names:
        try:
            who = user if user is not None else authenticate(ctx)
            raise_5xx(ctx, *api)
            now = ctx.now()
            with ctx.store.txn(now=now) as st:
                inst = find_instance(ctx, st, who, name)
                change(inst, name, now)
        except CliError as exc:
            errors.append(traced(exc.message, *trace))
            continue
        kill_marked(("BREV_SIM_INSTANCE", inst["id"]))
        done.append(name)
        if not ctx.stdout_piped:
            ctx.out(tty_line.format(name=inst["name"]))
    if errors:
        raise CliError(multierror(errors))
    if ctx.stdout_piped:
        ctx.out("".join(f"{n}\n" for n in done))
    return 0


def cmd_delete(ctx: Ctx, _v: dict, pos: list[str]) -> int:
    def delete(inst: dict, _name: str, now: float) -> None:
        if inst.get("phase") != "delete":
            inst.update(last_build=derive(inst, now)["build_status"], phase="delete", t_deleting=now)
            inst["t_gone"] = now + ctx.t("delete_seconds")
            record_phase(inst, "delete", now, inst["t_gone"])

    return _change_each(
        ctx,
        names_or_error(ctx, pos),
        delete,
        api=("delete", f"api/organizations/{ctx.org['id']}/workspaces"),
        trace=("cmd/delete.deleteWorkspace", "cmd/delete/delete.go", 79),
        tty_line="Deleting instance {name}. This can take a few minutes. Run 'brev ls' to check status\n",
    )


def start_instance(ctx: Ctx, user: dict, name: str) -> dict:
    """PUT api/workspaces/{id}/start for a STOPPED instance (CliError otherwise), after a ``slow_start`` fault's
    wait."""
    with ctx.store.txn() as st:
        slow = take_fault(st, "slow_start", instance=name)
    if slow is not None:  # a slow CLI or API: another start may reach the instance first
        deadline, gate = time.monotonic() + float(slow.get("seconds") or 0.0), slow.get("until_file")
        while time.monotonic() < deadline and not (gate and os.path.exists(gate)):
            time.sleep(0.02)
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
        record_phase(inst, "start", now)
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


def reach_instance(
    ctx: Ctx, user: dict, name: str, inst: dict, host: bool, not_running: str
) -> tuple[dict, str, str | None]:
    """The CLI's way to an instance before the ``ssh`` of ``copy`` (and of ``exec`` before v0.6.320): start it when
    STOPPED, poll until RUNNING (else ``CliError(not_running)``), ``refresh``, then ``WaitForSSHToBeAvailable``.
    Returns the instance, its ssh alias and ssh's error line (``None``: sshd answers)."""
    if derive(inst, ctx.now())["status"] == "STOPPED":
        inst = start_instance(ctx, user, name)
    if not poll_until_running(ctx, inst["id"]):
        raise CliError(not_running)
    run_refresh(ctx, user)
    alias = inst["name"] + "-host" if host else inst["name"]
    return inst, alias, wait_for_ssh(ctx, alias)


def cmd_stop(ctx: Ctx, v: dict, pos: list[str]) -> int:
    """``brev stop NAME...`` / ``--all`` (pkg/cmd/stop/stop.go): PUT api/workspaces/{id}/stop for each stoppable
    instance; STOPPING, then STOPPED after ``stop_seconds``. Its processes end (the VM powers off); ``$HOME`` stays."""
    user = authenticate(ctx)
    if v.get("all"):
        now = ctx.now()
        st = ctx.store.read()
        names = [
            i["name"]
            for i in visible_instances(ctx, st, user)
            if derive(i, now)["status"] == "RUNNING" and i.get("stoppable")
        ]
    else:
        names = [n for n in names_or_error(ctx, pos) if n != "self"]

    def stop(inst: dict, name: str, now: float) -> None:
        if not inst.get("stoppable"):
            raise CliError(f'instance "{name}" does not support stop.')
        if inst.get("phase") not in ("stop", "delete"):
            inst.update(phase="stop", t_stopping=now, t_stopped=now + ctx.t("stop_seconds"))
            record_phase(inst, "stop", now, inst["t_stopped"])

    return _change_each(
        ctx,
        names,
        stop,
        api=("stop", "api/workspaces/stop"),
        trace=("cmd/stop.stopWorkspace", "cmd/stop/stop.go", 98),
        tty_line="Stopping instance {name}.\nNote: this can take a few seconds. Run 'brev ls' to check status\n",
        user=user,
    )


def cmd_start(ctx: Ctx, v: dict, pos: list[str]) -> int:
    """``brev start NAME`` (pkg/cmd/start/start.go) for an existing STOPPED instance; without ``-d`` it waits for
    RUNNING (the real CLI forever; here ``start_wait_max_seconds``). An unknown name is taken for a local path that
    does not exist: a message and exit 0, as the released CLI does."""
    names = list(pos) + ctx.names_from_stdin()
    if not names:
        raise CliError("instance name required: provide as argument or pipe from another command")
    user = authenticate(ctx)
    detached = bool(v.get("detached")) or len(names) > 1
    for name in names:
        raise_5xx(ctx, "start", "api/workspaces/start")
        try:
            inst = start_instance(ctx, user, name)
        except CliError as exc:
            if exc.message.startswith("instance with id/name"):
                ctx.out("tried to start with local path but path not found\n")
                continue
            raise
        ctx.out("Note: this can take about a minute. Run 'brev ls' to check status\n")
        if not detached and not poll_until_running(ctx, inst["id"]):
            raise CliError("simulator: the start did not reach RUNNING within start_wait_max_seconds")
    return 0
