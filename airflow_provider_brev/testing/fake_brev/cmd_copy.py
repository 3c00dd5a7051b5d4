"""``brev copy`` in both directions."""

from __future__ import annotations

import os
import time

from airflow_provider_brev.testing.fake_brev.cmd_lifecycle import reach_instance
from airflow_provider_brev.testing.fake_brev.context import Ctx, authenticate, find_instance, raise_5xx
from airflow_provider_brev.testing.fake_brev.flags import CliError
from airflow_provider_brev.testing.fake_brev.store import sandbox_dir

TYPE_CHECKING = False


def _split_remote(arg: str) -> tuple[str, str]:
    if ":" not in arg:
        return "", arg
    parts = arg.split(":")
    if len(parts) != 2:
        raise CliError("invalid instance path format, use instance_name:/path")
    return parts[0], parts[1]


def _remote_path(home: str, p: str) -> str:
    return home if p in ("", "~") else os.path.join(home, p.removeprefix("~/"))


def _scp(src: str, dst: str, src_label: str) -> str | None:
    import shutil

    if not os.path.exists(src):
        return f"scp: {src_label}: No such file or directory\n"
    target = dst
    if os.path.isdir(dst):
        target = os.path.join(dst, os.path.basename(src.rstrip("/")) or "root")
    parent = os.path.dirname(target.rstrip("/")) or "/"
    if not os.path.isdir(parent):
        return f"scp: {dst}: No such file or directory\n"
    try:
        if os.path.isdir(src):
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)
    except OSError as exc:
        return f"scp: {target}: {exc.strerror}\n"
    return None


def cmd_copy(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if len(pos) != 2:
        raise CliError(f"accepts 2 arg(s), received {len(pos)}")
    user = authenticate(ctx)
    src_ws, src_path = _split_remote(pos[0])
    dst_ws, dst_path = _split_remote(pos[1])
    if bool(src_ws) == bool(dst_ws):
        raise CliError("exactly one of source or destination must be an instance path (format: instance_name:/path)")
    upload = bool(dst_ws)
    ws, remote, local = (dst_ws, dst_path, pos[0]) if upload else (src_ws, src_path, pos[1])
    if upload and not os.path.exists(local):
        raise CliError(f"local file or directory does not exist: {local}")
    raise_5xx(ctx, "copy", f"api/organizations/{ctx.org['id']}/workspaces")
    inst = find_instance(ctx, ctx.store.read(), user, ws)
    inst, alias, line = reach_instance(ctx, user, ws, inst, v["host"], "Workspace is not running")
    if line is not None:
        raise CliError("\n" + line)
    home = os.path.join(sandbox_dir(ctx.root, inst["id"]), "home")
    rpath = _remote_path(home, remote)
    started = time.monotonic()
    if upload:
        failure = _scp(os.path.abspath(local), rpath, local)
        label_src, label_dst = local, f"{alias}:{remote}"
    else:
        failure = _scp(rpath, os.path.abspath(local), remote)
        label_src, label_dst = f"{alias}:{remote}", local
    if failure is not None:
        raise CliError(f"scp failed: exit status 1\nOutput: {failure}")
    ms = int((time.monotonic() - started) * 1000)
    ctx.out(f"\n\u2713 Successfully copied {label_src} \u2192 {label_dst} ({ms}ms)\n\n")
    return 0
