"""One invocation of the fake ``brev``: output, stdin, credentials, the auth path every command takes, 5xx
faults and instance lookup."""

from __future__ import annotations

import contextlib
import os
import time

from airflow_provider_brev.testing.fake_brev.catalog import DEFAULT_ACCOUNTS, DOCUMENTED_VERSION, RELEASED_VERSION
from airflow_provider_brev.testing.fake_brev.flags import CliError, http_error_text, is_chr, unauthorized_text, write_fd
from airflow_provider_brev.testing.fake_brev.store import (
    KNOWN_ISSUERS,
    StateStore,
    derive,
    jwt_payload,
    load_config,
    session_key,
    take_fault,
)
from airflow_provider_brev.testing.fake_common import read_json, write_json_atomic

TYPE_CHECKING = False


class Ctx:
    """One invocation: config, state store, the caller's HOME (credentials), terminal detection and output.

    :param root: the simulator root.
    :param record: the call record (``calls.jsonl``) that commands annotate.
    """

    def __init__(self, root: str, record: dict) -> None:
        self.root = root
        self.cfg = load_config(root)
        self.store = StateStore(root)
        self.record = record
        home = os.environ.get("HOME") or os.path.expanduser("~")
        self.home = os.path.abspath(home)
        self.profile = self.cfg.get("profile", "released")
        self.stdout_piped = not is_chr(1)
        self.stdin_chr = is_chr(0)
        self._stdin_eof = False
        self.stdout_broken = False

    def now(self) -> float:
        return time.time() + float(self.cfg.get("now_offset") or 0.0)

    def t(self, key: str) -> float:
        return float(self.cfg["timings"][key])

    @property
    def documented(self) -> bool:
        return self.profile == "documented"

    @property
    def version(self) -> str:
        return self.cfg.get("version") or (DOCUMENTED_VERSION if self.documented else RELEASED_VERSION)

    @property
    def accounts(self) -> dict:
        acc = dict(DEFAULT_ACCOUNTS)
        acc.update(self.cfg.get("accounts") or {})
        return acc

    @property
    def org(self) -> dict:
        return self.accounts["org"]

    def out(self, s: str) -> None:
        if self.stdout_broken:
            return
        try:
            write_fd(1, s.encode("utf-8", "replace"))
        except OSError:
            self.stdout_broken = True

    def err(self, s: str) -> None:
        with contextlib.suppress(OSError):
            write_fd(2, s.encode("utf-8", "replace"))

    def log(self, s: str) -> None:
        """Progress logs: stderr when stdout is piped, stdout on a terminal (gpucreate's logf)."""
        if self.stdout_piped:
            self.err(s)
        else:
            self.out(s)

    def read_stdin_all(self) -> str:
        """Read a non-terminal stdin to EOF (pipes block until the writer closes them)."""
        if self.stdin_chr or self._stdin_eof:
            return ""
        self.record["stdin_read"] = True
        chunks = []
        while True:
            try:
                b = os.read(0, 65536)
            except InterruptedError:
                continue
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        self._stdin_eof = True
        return b"".join(chunks).decode("utf-8", "replace")

    def read_stdin_line(self) -> str | None:
        if self._stdin_eof:
            return None
        if not self.stdin_chr:
            self.record["stdin_read"] = True
        buf = b""
        while True:
            try:
                b = os.read(0, 1)
            except InterruptedError:
                continue
            except OSError:
                b = b""
            if not b:
                self._stdin_eof = True
                return None
            buf += b
            if b == b"\n":
                return buf.decode("utf-8", "replace")

    def names_from_stdin(self) -> list[str]:
        text = self.read_stdin_all()
        return [ln.strip() for ln in text.splitlines() if ln.strip()]

    @property
    def brev_dir(self) -> str:
        return os.path.join(self.home, ".brev")

    def load_creds(self) -> dict | None:
        creds = read_json(os.path.join(self.brev_dir, "credentials.json"), None)
        return creds if isinstance(creds, dict) else None

    def save_creds(self, creds: dict) -> None:
        os.makedirs(self.brev_dir, mode=0o770, exist_ok=True)
        write_json_atomic(os.path.join(self.brev_dir, "credentials.json"), creds, indent=1)

    def save_active_org(self, org: dict) -> None:
        os.makedirs(self.brev_dir, mode=0o770, exist_ok=True)
        data = {"id": org["id"], "name": org["name"], "userNetworkId": ""}
        write_json_atomic(os.path.join(self.brev_dir, "active_org.json"), data, indent=1)


def token_valid_locally(token: str, now: float) -> bool:
    p = jwt_payload(token)
    if p is None:
        return False
    try:
        if "exp" in p and float(p["exp"]) <= now:
            return False
        if "nbf" in p and float(p["nbf"]) > now + 1:
            return False
    except (TypeError, ValueError):
        return False
    return True


def startup_auth_noise(ctx: Ctx) -> None:
    """`auth.StandardLogin` at start-up prints this when the stored access token is not a JWT from a known issuer."""
    creds = ctx.load_creds()
    if not creds or (creds.get("api_key") or "").strip():
        return
    access = creds.get("access_token") or ""
    payload = jwt_payload(access) if access else {}
    if access and (payload is None or payload.get("iss") not in KNOWN_ISSUERS):
        ctx.out("no oauth found for token\n")


def logged_out(ctx: Ctx, creds: dict | None) -> dict:
    if ctx.cfg.get("auth_error_style") == "401":
        raise CliError(unauthorized_text(ctx.version))
    refresh = (creds or {}).get("refresh_token") or ""
    if creds is not None and refresh and len(refresh.split(":")) != 2:
        with contextlib.suppress(OSError):
            os.makedirs(ctx.brev_dir, mode=0o770, exist_ok=True)
            with open(os.path.join(ctx.brev_dir, ".invalid-refresh-token"), "w") as fh:
                fh.write(refresh)
        ctx.out("WARN: malformed refresh token, logging out\n")
    ctx.out("You are currently logged out, would you like to log in? [Y/n]: ")
    line = ctx.read_stdin_line()
    if line is None:
        raise CliError("EOF")
    if line.strip().lower() not in ("", "y"):
        raise CliError("declined to login")
    raise CliError("timed out waiting for login")


def authenticate(ctx: Ctx) -> dict:
    """Return the current user, or go down the CLI's logged-out path (prompt on stdout, EOF)."""
    creds = ctx.load_creds()
    if creds is None:
        return logged_out(ctx, None)
    revoked = set(ctx.cfg.get("revoked_tokens") or [])
    api_key = (creds.get("api_key") or "").strip()
    if api_key:
        if api_key in revoked:
            raise CliError(unauthorized_text(ctx.version))
        return {
            "id": ctx.accounts["user"]["id"],
            "api_key": True,
            "org_id": creds.get("api_key_org_id") or ctx.org["id"],
        }
    access = creds.get("access_token") or ""
    now = ctx.now()
    if not token_valid_locally(access, now):
        return logged_out(ctx, creds)
    st = ctx.store.read()
    gen = st.get("sessions", {}).get(session_key(access), 0)
    if gen < st.get("auth_generation", 0):
        return logged_out(ctx, creds)
    if access in revoked:
        raise CliError(unauthorized_text(ctx.version))
    sub = (jwt_payload(access) or {}).get("sub") or ctx.accounts["user"]["id"]
    return {"id": sub, "api_key": False, "org_id": ctx.org["id"]}


def maybe_5xx(ctx: Ctx, command: str) -> dict | None:
    """Consume an armed ``http_5xx`` fault for this command (None if none)."""
    with ctx.store.txn() as st:
        return take_fault(st, "http_5xx", command=command)


def raise_5xx(ctx: Ctx, command: str, path: str) -> None:
    f = maybe_5xx(ctx, command)
    if f is not None:
        raise CliError(http_error_text(int(f.get("status", 502)), path, f.get("body"), version=ctx.version))


def visible_instances(ctx: Ctx, st: dict, user: dict, all_users: bool = False) -> list[dict]:
    now = ctx.now()
    res = []
    for inst in st["instances"]:
        if derive(inst, now)["gone"]:
            continue
        if not (all_users or user.get("api_key")) and inst.get("created_by") != user["id"]:
            continue
        res.append(inst)
    res.sort(key=lambda i: i.get("created_at") or 0)
    return res


def find_instance(ctx: Ctx, st: dict, user: dict, name_or_id: str) -> dict:
    """util.GetUserWorkspaceByNameOrIDErr."""
    now = ctx.now()
    matches = [i for i in visible_instances(ctx, st, user) if name_or_id in (i["name"], i["id"])]
    if not matches:
        raise CliError(f"instance with id/name {name_or_id} not found")
    if len(matches) > 1:
        matches = [m for m in matches if derive(m, now)["status"] != "FAILURE"]
        if not matches:
            raise CliError(f"instance with id/name {name_or_id} is a failed workspace")
        if len(matches) > 1:
            raise CliError(f"multiple instances found with id/name {name_or_id}")
    return matches[0]


def get_instance_by_id(ctx: Ctx, ident: str) -> dict | None:
    st = ctx.store.read()
    now = ctx.now()
    for inst in st["instances"]:
        if inst["id"] == ident and not derive(inst, now)["gone"]:
            return inst
    return None
