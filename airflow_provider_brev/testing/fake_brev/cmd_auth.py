"""``brev login`` (token and API key) and the documented CLI's ``brev orgs``."""

from __future__ import annotations

import json

from airflow_provider_brev.testing.fake_brev.cmd_ls import table
from airflow_provider_brev.testing.fake_brev.context import Ctx, authenticate, raise_5xx, token_valid_locally
from airflow_provider_brev.testing.fake_brev.flags import CliError, unauthorized_text
from airflow_provider_brev.testing.fake_brev.store import derive, jwt_payload, session_key

TYPE_CHECKING = False


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
    now = ctx.now()
    # auth.LoginWithToken stores the token before anything asks the API about it (a wrong token replaces the
    # session of everyone sharing this HOME), then GET api/me tells whether it is any good
    valid = token_valid_locally(token, now)
    ctx.save_creds(
        {"access_token": token, "refresh_token": "auto-login"}
        if valid
        else {"access_token": "auto-login", "refresh_token": token}
    )
    raise_5xx(ctx, "login", "api/me")
    if not valid or token in set(ctx.cfg.get("revoked_tokens") or []):
        raise CliError(unauthorized_text(ctx.version))
    sub = (jwt_payload(token) or {}).get("sub") or ctx.accounts["user"]["id"]
    with ctx.store.txn() as st:
        st["sessions"][session_key(token)] = st.get("auth_generation", 0)
        everything = [i for i in st["instances"] if not derive(i, now)["gone"]]
        mine = [i for i in everything if i.get("created_by") == sub]
    ctx.save_active_org(ctx.org)
    ctx.out(f"current organization: {ctx.org['name']}\n")
    if not everything:
        ctx.out("create an instance:\n")
    if mine:
        ctx.out("list your instances:\n\tbrev ls\n")
    return 0


def cmd_orgs(ctx: Ctx, v: dict, _pos: list[str]) -> int:
    """Documented profile only: ``brev orgs --json`` as the seed describes it."""
    user = authenticate(ctx)
    if user.get("api_key"):
        raise CliError("api key auth cannot list organizations")
    raise_5xx(ctx, "orgs", "api/organizations")
    acc = ctx.accounts
    orgs = acc.get("orgs") or [acc["org"]]
    creds = [{"id": c["id"], "name": c["name"]} for c in acc.get("cloud_credentials") or []]
    groups = [{"id": g["id"], "name": g["name"]} for g in acc.get("workspace_groups") or []]
    data = [{"id": o["id"], "name": o["name"], "cloudCredentials": creds, "workspaceGroups": groups} for o in orgs]
    if v["json"]:
        ctx.out(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return 0
    rows = [[o["name"], o["id"], c["name"], c["id"]] for o in data for c in creds]
    ctx.out(table(["ORG", "ORG ID", "CLOUD CREDENTIAL", "CLOUD CREDENTIAL ID"], rows))
    return 0
