"""``brev ls``: the table and the ``--json`` shapes."""

from __future__ import annotations

import json

from airflow_provider_brev.testing.fake_brev.context import Ctx, authenticate, raise_5xx, visible_instances
from airflow_provider_brev.testing.fake_brev.flags import CliError
from airflow_provider_brev.testing.fake_brev.store import public_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def table(header: list[str], rows: list[list[str]]) -> str:
    """go-pretty without borders or column separators: every cell padded by one space each side."""
    widths = [len(h) for h in header]
    for r in rows:
        for k, cell in enumerate(r):
            widths[k] = max(widths[k], len(cell))
    out = []
    for r in [header, *rows]:
        out.append("".join(f" {cell.ljust(widths[k])} " for k, cell in enumerate(r)).rstrip() + "\n")
    return "".join(out)


_LS_KEYS = ("name", "id", "status", "build_status", "shell_status", "health_status", "instance_type", "instance_kind")


def ls_workspace_json(view: dict, documented: bool) -> dict:
    keys = (*_LS_KEYS, "gpu", "workspaceGroupId") if documented else (*_LS_KEYS, "gpu")
    return {k: view[k] for k in keys}


def cmd_ls(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if len(pos) > 1:
        raise CliError("too many args provided")
    what = pos[0] if pos else ""
    if what.rstrip("s") not in ("", "org", "organization", "workspace", "instance"):
        raise CliError(f'invalid argument "{what}"')
    user = authenticate(ctx)
    path = f"api/organizations/{ctx.org['id']}/workspaces"
    if what.startswith("org"):
        if user.get("api_key"):
            raise CliError("api key auth cannot list organizations")
        raise_5xx(ctx, "ls", "api/organizations")
        orgs = ctx.accounts.get("orgs") or [ctx.org]
        if v["json"]:
            data = [{"name": o["name"], "id": o["id"], "is_active": o["id"] == ctx.org["id"]} for o in orgs]
            ctx.out(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            return 0
        rows = [[("* " if o["id"] == ctx.org["id"] else "") + o["name"], o["id"]] for o in orgs]
        ctx.out("Your organizations:\n" + table(["NAME", "ID"], rows))
        return 0
    if v["org"] and v["org"] != ctx.org["name"]:
        if user.get("api_key"):
            raise CliError("api key auth is scoped to the org saved during login; --org is not supported")
        raise CliError(f"no org found with name {v['org']}")
    raise_5xx(ctx, "ls", path)
    st = ctx.store.read()
    now = ctx.now()
    insts = visible_instances(ctx, st, user, all_users=v["all"])
    views = [public_view(i, now, ctx.cfg) for i in insts]
    if v["json"]:
        recs = [ls_workspace_json(w, ctx.documented) for w in views] or None
        doc: Any = recs if ctx.cfg.get("ls_json_shape") == "list" else {"workspaces": recs}
        ctx.out(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return 0
    org_name = ctx.org["name"]
    if not views:
        ctx.out(f"No instances in org {org_name}\n")
        others = visible_instances(ctx, st, user, all_users=True)
        if not v["all"] and others:
            ctx.out("See teammates' instances:\n\tbrev ls --all\n")
        else:
            ctx.out("Start a new instance:\n")
        return 0
    if v["all"]:
        ctx.out(f"{len(views)} instances in Org {org_name}\n")
    else:
        ctx.out(f"You have {len(views)} instances in Org {org_name}\n")
    rows = [
        [w["name"], w["status"], w["build_status"], w["shell_status"], w["id"], w["instance_type"], w["gpu"]]
        for w in views
    ]
    ctx.out(table(["NAME", "STATUS", "BUILD", "SHELL", "ID", "MACHINE", "GPU"], rows))
    ctx.out("\n")
    return 0
