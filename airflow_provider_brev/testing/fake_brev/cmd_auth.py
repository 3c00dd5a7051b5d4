"""``brev healthcheck``, ``login``, ``logout``, ``org``, ``set``, ``orgs`` and ``status``."""

from __future__ import annotations

import contextlib
import json
import os

from airflow_provider_brev.testing.fake_brev.cmd_ls import _table
from airflow_provider_brev.testing.fake_brev.context import (
    Ctx,
    _token_valid_locally,
    authenticate,
    get_instance_by_id,
    maybe_5xx,
    raise_5xx,
)
from airflow_provider_brev.testing.fake_brev.flags import UNAUTHORIZED_TEXT, CliError, http_error_text
from airflow_provider_brev.testing.fake_brev.store import derive, jwt_payload

TYPE_CHECKING = False


def cmd_healthcheck(ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    if ctx.cfg.get("healthy", True) and maybe_5xx(ctx, "healthcheck") is None:
        ctx.out("Healthy!\n")
        return 0
    ctx.out("Not Healthy!\n")
    raise CliError(http_error_text(503, "api/health"))


# --------------------------------------------------------------------------------------------------
# login / logout
# --------------------------------------------------------------------------------------------------
def cmd_login(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if pos:
        raise CliError(f'unknown command "{pos[0]}" for "brev login"')
    token = (v["token"] or "").strip()
    api_key = (v["api-key"] or "").strip()
    org_id = (v["org-id"] or "").strip()
    if api_key:
        if token or v["skip-browser"] or v["email"] or v["auth"]:
            raise CliError("api-key cannot be used with token, skip-browser, email, or auth flags")
        if not org_id:
            raise CliError("api key auth requires an org id; run brev login --api-key <api-key> --org-id <org-id>")
        if not api_key.startswith("bak-"):
            raise CliError("api key must start with bak-")
        ctx.save_creds({"access_token": "", "refresh_token": "", "api_key": api_key, "api_key_org_id": org_id})
        ctx.save_active_org({"id": org_id, "name": org_id})
        ctx.out(f"API key saved for org {org_id}\n")
        return 0
    if org_id:
        raise CliError("org-id can only be used with api-key")
    if v["auth"] and v["auth"] not in ("nvidia", "legacy"):
        raise CliError("auth provider must be nvidia or legacy")
    if v["email"] and v["auth"] == "legacy":
        raise CliError("email flag can only be used with nvidia auth provider")
    ctx.out("\n   \u25b8     Starting Login\n\n")
    if not token:
        ctx.out("Please visit the following URL to log in: https://brev.nvidia.com/cli-login?device=sim\n")
        raise CliError("timed out waiting for login")
    f = maybe_5xx(ctx, "login")
    if f is not None:
        raise CliError(http_error_text(int(f.get("status", 502)), "api/me", f.get("body")))
    now = ctx.now()
    if not _token_valid_locally(token, now) or token in set(ctx.cfg.get("revoked_tokens") or []):
        raise CliError(UNAUTHORIZED_TEXT)
    ctx.save_creds({"access_token": token, "refresh_token": "auto-login"})
    sub = (jwt_payload(token) or {}).get("sub") or ctx.accounts["user"]["id"]
    with ctx.store.txn() as st:
        st["sessions"][ctx.session_key] = st.get("auth_generation", 0)
        everything = [i for i in st["instances"] if not derive(i, now)["gone"]]
        mine = [i for i in everything if i.get("created_by") == sub]
    ctx.save_active_org(ctx.org)
    ctx.out(f"current organization: {ctx.org['name']}\n")
    if not everything:
        ctx.out("create an instance:\n")
    if mine:
        ctx.out("list your instances:\n\tbrev ls\n")
    return 0


def cmd_logout(ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    for fname in ("credentials.json", "active_org.json"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(ctx.brev_dir, fname))
    with ctx.store.txn() as st:
        st["sessions"].pop(ctx.session_key, None)
    return 0


# --------------------------------------------------------------------------------------------------
# ls / org / orgs
# --------------------------------------------------------------------------------------------------
def cmd_org(ctx: Ctx, v: dict, pos: list[str]) -> int:
    sub = pos[0] if pos else "ls"
    if sub in ("ls", "list"):
        user = authenticate(ctx)
        if user.get("api_key"):
            raise CliError("api key auth cannot list organizations")
        orgs = ctx.accounts.get("orgs") or [ctx.org]
        rows = [[("* " if o["id"] == ctx.org["id"] else "") + o["name"], o["id"]] for o in orgs]
        ctx.out("Your organizations:\n" + _table(["NAME", "ID"], rows))
        return 0
    if sub == "set":
        return cmd_set(ctx, v, pos[1:])
    raise CliError(f'unknown command "{sub}" for "brev org"')


def cmd_set(ctx: Ctx, _v: dict, pos: list[str]) -> int:
    if len(pos) != 1:
        raise CliError(f"accepts 1 arg(s), received {len(pos)}")
    authenticate(ctx)
    orgs = ctx.accounts.get("orgs") or [ctx.org]
    match = [o for o in orgs if o["name"] == pos[0]]
    if not match:
        raise CliError(f"no orgs exist with name {pos[0]}")
    ctx.save_active_org(match[0])
    ctx.out(f"Org {match[0]['name']} is now active \U0001f919\n")
    return 0


def cmd_orgs(ctx: Ctx, v: dict, _pos: list[str]) -> int:
    """Documented profile only: ``brev orgs --json`` as the seed describes it."""
    user = authenticate(ctx)
    if user.get("api_key"):
        raise CliError("api key auth cannot list organizations")
    raise_5xx(ctx, "orgs", "api/organizations")
    acc = ctx.accounts
    orgs = acc.get("orgs") or [acc["org"]]
    data = []
    for o in orgs:
        data.append(
            {
                "id": o["id"],
                "name": o["name"],
                "cloudCredentials": [{"id": c["id"], "name": c["name"]} for c in acc.get("cloud_credentials") or []],
                "workspaceGroups": [{"id": g["id"], "name": g["name"]} for g in acc.get("workspace_groups") or []],
            }
        )
    if v["json"]:
        ctx.out(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return 0
    rows = []
    for o in data:
        for c in o["cloudCredentials"]:
            rows.append([o["name"], o["id"], c["name"], c["id"]])
    ctx.out(_table(["ORG", "ORG ID", "CLOUD CREDENTIAL", "CLOUD CREDENTIAL ID"], rows))
    return 0


# --------------------------------------------------------------------------------------------------
# search
# --------------------------------------------------------------------------------------------------
def cmd_status(ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    ident = os.environ.get("BREV_SIM_INSTANCE")
    if not ident:
        ctx.out("not running on a Brev instance\n")
        return 0
    cur = get_instance_by_id(ctx, ident)
    if cur is not None:
        ctx.out(f"Instance: {cur['name']}\nID: {cur['id']}\nMachine: {cur.get('instance_type', '')}\n")
    return 0
