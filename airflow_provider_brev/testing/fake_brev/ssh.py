"""The fake ``~/.brev/ssh_config``, ``brev refresh`` and the sshd-readiness checks ``exec``/``copy`` make."""

from __future__ import annotations

import os
import time

from airflow_provider_brev.testing.fake_brev.context import Ctx, authenticate, raise_5xx, visible_instances
from airflow_provider_brev.testing.fake_brev.ssh_proxy import PROXY_NAME
from airflow_provider_brev.testing.fake_brev.store import derive, fake_ip, sandbox_dir

TYPE_CHECKING = False


def ssh_config_path(ctx: Ctx) -> str:
    return os.path.join(ctx.brev_dir, "ssh_config")


def read_ssh_aliases(ctx: Ctx, path: str | None = None) -> dict[str, str]:
    """alias -> instance id, from ``~/.brev/ssh_config`` (written only by refresh) or another ssh config ``path``."""
    aliases: dict[str, str] = {}
    try:
        with open(path or ssh_config_path(ctx), encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return aliases
    current = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Host "):
            current = s[5:].strip()
        elif s.startswith("# brev-sim-id ") and current:
            aliases[current] = s[len("# brev-sim-id ") :].strip()
    return aliases


def ssh_block(root: str, brev_dir: str, inst: dict, host: bool = False) -> str:
    """One host entry, as the CLI writes it, plus the ``ProxyCommand`` that lets any ``ssh`` reach the simulator
    (:mod:`.ssh_proxy`) instead of a ``10.x`` address no network answers."""
    alias = inst["name"] + ("-host" if host else "")
    proxy = os.path.join(root, "bin", PROXY_NAME)
    return (
        f"Host {alias}\n"
        f"  Hostname {fake_ip(inst['id'])}\n"
        f'  ProxyCommand "{proxy}" {inst["id"]}\n'
        f'  IdentityFile "{os.path.join(brev_dir, "brev.pem")}"\n'
        f"  User ubuntu\n"
        f"  Port 22\n"
        f"  ServerAliveInterval 30\n"
        f"  UserKnownHostsFile /dev/null\n"
        f"  StrictHostKeyChecking no\n"
        f"  # brev-sim-id {inst['id']}\n"
    )


def write_ssh_config(root: str, brev_dir: str, insts: list[dict], append: bool = False) -> None:
    """Rewrite (or extend) ``~/.brev/ssh_config`` with aliases ``<name>`` and ``<name>-host`` (simulator ``root``)."""
    blocks = [ssh_block(root, brev_dir, i, host) for i in insts for host in (False, True)]
    os.makedirs(brev_dir, mode=0o770, exist_ok=True)
    path = os.path.join(brev_dir, "ssh_config")
    head = "# included in ~/.ssh/config\n"
    if append:
        try:
            with open(path, encoding="utf-8") as fh:
                head = fh.read()
        except OSError:
            pass
    tmp = path + f".tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(head + "\n".join(blocks))
    os.replace(tmp, path)
    pem = os.path.join(brev_dir, "brev.pem")
    if not os.path.exists(pem):
        fd = os.open(pem, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(
            fd,
            b"-----BEGIN OPENSSH PRIVATE KEY-----\nZmFrZS1icmV2LXNpbXVsYXRvci1rZXk=\n"
            b"-----END OPENSSH PRIVATE KEY-----\n",
        )
        os.close(fd)


def run_refresh(ctx: Ctx, user: dict) -> None:
    raise_5xx(ctx, "refresh", "api/me/keys")
    st = ctx.store.read()
    now = ctx.now()
    running = [i for i in visible_instances(ctx, st, user) if derive(i, now)["status"] == "RUNNING"]
    write_ssh_config(ctx.root, ctx.brev_dir, running)


def cmd_refresh(ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    ctx.out("refreshing brev...\n")
    user = authenticate(ctx)
    run_refresh(ctx, user)
    ctx.out("brev has been refreshed\n")
    return 0


def ssh_check(ctx: Ctx, alias: str, aliases: dict[str, str] | None = None) -> tuple[dict | None, str]:
    """Resolve an ssh alias like ssh would: (instance, None) when sshd answers, else (None, ssh's error).

    ``aliases``: the host entries ssh reads (default: the CLI's ``~/.brev/ssh_config``)."""
    ident = (read_ssh_aliases(ctx) if aliases is None else aliases).get(alias)
    if ident is None:
        return None, f"ssh: Could not resolve hostname {alias}: Name or service not known"
    st = ctx.store.read()
    now = ctx.now()
    inst = next((i for i in st["instances"] if i["id"] == ident), None)
    d = derive(inst, now) if inst else {"gone": True, "status": ""}
    if not d["gone"] and d["status"] == "RUNNING" and d["ssh_up"]:
        return inst, ""
    refused = not d["gone"] and d["status"] in ("RUNNING", "DEPLOYING", "STARTING")
    return None, f"ssh: connect to host {fake_ip(ident)} port 22: Connection {'refused' if refused else 'timed out'}"


def wait_for_ssh(ctx: Ctx, alias: str) -> str | None:
    """util.WaitForSSHToBeAvailable: None when reachable, else the offending ssh line."""
    limit = int(ctx.cfg.get("probe_limit", 40))
    counter = 0
    while True:
        inst, line = ssh_check(ctx, alias)
        if inst is not None:
            return None
        if counter >= limit or not any(s in line for s in ("Connection refused", "Connection timed out")):
            return line
        counter += 1
        time.sleep(ctx.t("probe_seconds"))


def sandbox_env(ctx: Ctx, inst: dict, host: bool) -> dict[str, str]:
    base = sandbox_dir(ctx.root, inst["id"])
    env = {
        "PATH": f"{base}/bin:{ctx.root}/tools/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.path.join(base, "home"),
        "USER": "ubuntu",
        "LOGNAME": "ubuntu",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "BREV_SIM_INSTANCE": inst["id"],
        "BREV_SIM_INSTANCE_NAME": inst["name"],
        "BREV_SIM_ROOT": ctx.root,
    }
    if host:
        env["BREV_SIM_HOST"] = "1"
    for k, val in (ctx.cfg.get("sandbox_env") or {}).items():
        env[str(k)] = str(val)
    return env
