"""A fake ``brev`` CLI: a stdlib-only, file-backed simulator of NVIDIA Brev CLI v0.6.327.

Run it as a script (``python fake_brev.py ls --json``) or through the wrapper that
:class:`airflow_provider_brev.testing.simulator.BrevSimulator` installs as ``<root>/bin/brev``.
The state root comes from the wrapper (or ``$FAKE_BREV_STATE``) and holds:

* ``config.json``  profile, timings, catalog, accounts and knobs (written by the controller)
* ``state.json``   instances, server-side login sessions, armed faults (guarded by ``state.lock``)
* ``calls.jsonl``  one JSON line per invocation; ``runs.jsonl`` one per command started in a sandbox
* ``instances/<id>/home``  the per-instance sandbox that ``brev exec`` runs commands in

The behaviour follows reference/brev-cli.md (sections 2 and 8) and the brev-cli sources it cites.
This module must stay importable on its own: no third-party imports, no package-relative imports,
and nothing expensive at import time (it is started hundreds of times per test run).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import stat
import sys
import time

TYPE_CHECKING = False  # avoid importing typing at start-up (this script runs hundreds of times)
if TYPE_CHECKING:
    from typing import Any

RELEASED_VERSION = "v0.6.327"
DOCUMENTED_VERSION = "v0.6.400-documented"
API_URL = "https://brevapi.us-west-2-prod.control-plane.brev.dev"
PUBLIC_API_URL = "https://api.brev.dev"
STATE_ENV = "FAKE_BREV_STATE"
PROFILES = ("released", "documented")

DEFAULT_TIMINGS: dict[str, float] = {
    "deploy_seconds": 0.3,
    "build_seconds": 0.2,
    "ssh_seconds": 0.2,
    "delete_seconds": 0.3,
    "stop_seconds": 0.3,
    "start_seconds": 0.3,
    "poll_seconds": 0.05,
    "probe_seconds": 0.05,
}

DEFAULT_ACCOUNTS: dict = {
    "user": {"id": "user", "username": "sim-user", "email": "sim-user@example.com"},
    "org": {"id": "org-2p9sim0001", "name": "sim-org"},
    "cloud_credentials": [{"id": "cc-aws-4f1c2b", "name": "aws-default"}],
    "workspace_groups": [{"id": "wg-aws-us-east-1", "name": "aws-us-east-1"}],
}


def _gpu(
    type_: str,
    cloud: str,
    provider: str,
    gpu: str,
    count: int,
    vram: int,
    cap: float,
    vcpus: int,
    ram: int,
    dmin: int,
    dmax: int,
    boot: int,
    price: float,
    **kw: Any,
) -> dict[str, Any]:
    return {
        "type": type_,
        "cloud": cloud,
        "provider": provider,
        "gpu_name": gpu,
        "gpu_count": count,
        "vram_per_gpu_gb": vram,
        "total_vram_gb": vram * count,
        "capability": cap,
        "vcpus": vcpus,
        "memory": f"{ram}GiB",
        "ram_gb": ram,
        "arch": kw.get("arch", "x86_64"),
        "disk_min_gb": dmin,
        "disk_max_gb": dmax,
        "disk_price_per_gb_mo": kw.get("disk_price", 0.1 if dmin != dmax else 0),
        "boot_time_seconds": boot,
        "stoppable": kw.get("stoppable", True),
        "rebootable": kw.get("rebootable", True),
        "flex_ports": kw.get("flex_ports", True),
        "price_per_hour": price,
    }


DEFAULT_CATALOG: list[dict] = [
    _gpu("g4dn.xlarge", "aws", "aws", "T4", 1, 16, 7.5, 4, 16, 125, 16000, 300, 0.63),
    _gpu("p3.2xlarge", "aws", "aws", "V100", 1, 16, 7.0, 8, 61, 250, 16000, 360, 3.67),
    _gpu("g6.xlarge", "aws", "aws", "L4", 1, 24, 8.9, 4, 16, 250, 16000, 330, 0.96),
    _gpu("g5.xlarge", "aws", "aws", "A10G", 1, 24, 8.6, 4, 16, 250, 16000, 330, 1.21),
    _gpu("g6e.xlarge", "aws", "aws", "L40S", 1, 48, 8.9, 4, 32, 250, 16000, 390, 2.24),
    _gpu(
        "gpu_1x_h100_pcie",
        "lambda",
        "lambda-labs",
        "H100",
        1,
        80,
        9.0,
        26,
        200,
        1024,
        1024,
        300,
        2.99,
        stoppable=False,
        flex_ports=False,
    ),
    _gpu("a2-ultragpu-1g", "gcp", "gcp", "A100", 1, 80, 8.0, 12, 170, 500, 10000, 420, 6.09),
    _gpu("g6e.12xlarge", "aws", "aws", "L40S", 4, 48, 8.9, 48, 384, 250, 16000, 420, 12.52),
    _gpu("a2-ultragpu-8g", "gcp", "gcp", "A100", 8, 80, 8.0, 96, 1360, 500, 10000, 540, 48.73),
    _gpu("p5.48xlarge", "aws", "aws", "H100", 8, 80, 9.0, 192, 2048, 500, 16000, 600, 98.32),
    {
        "type": "n2-standard-8",
        "cloud": "gcp",
        "provider": "gcp",
        "gpu_name": "",
        "gpu_count": 0,
        "vram_per_gpu_gb": 0,
        "total_vram_gb": 0,
        "capability": 0,
        "vcpus": 8,
        "memory": "32GiB",
        "ram_gb": 32,
        "arch": "x86_64",
        "disk_min_gb": 50,
        "disk_max_gb": 10000,
        "disk_price_per_gb_mo": 0.1,
        "boot_time_seconds": 120,
        "stoppable": True,
        "rebootable": True,
        "flex_ports": True,
        "price_per_hour": 0.39,
    },
    {
        "type": "m6i.2xlarge",
        "cloud": "aws",
        "provider": "aws",
        "gpu_name": "",
        "gpu_count": 0,
        "vram_per_gpu_gb": 0,
        "total_vram_gb": 0,
        "capability": 0,
        "vcpus": 8,
        "memory": "32GiB",
        "ram_gb": 32,
        "arch": "x86_64",
        "disk_min_gb": 50,
        "disk_max_gb": 16000,
        "disk_price_per_gb_mo": 0.1,
        "boot_time_seconds": 120,
        "stoppable": True,
        "rebootable": True,
        "flex_ports": True,
        "price_per_hour": 0.46,
    },
]

# nvidia-smi product names for the fake nvidia-smi tool.
SMI_NAMES = {
    "T4": "Tesla T4",
    "V100": "Tesla V100-SXM2-16GB",
    "L4": "NVIDIA L4",
    "A10G": "NVIDIA A10G",
    "L40S": "NVIDIA L40S",
    "A100": "NVIDIA A100-SXM4-80GB",
    "H100": "NVIDIA H100 80GB HBM3",
}

DEFAULT_CONFIG: dict = {
    "profile": "released",
    "version": None,
    "timings": dict(DEFAULT_TIMINGS),
    "now_offset": 0.0,
    "accounts": DEFAULT_ACCOUNTS,
    "catalog": DEFAULT_CATALOG,
    "revoked_tokens": [],
    "ls_json_shape": "object",
    "auth_error_style": "prompt",
    "healthy": True,
    "start_wait_max_seconds": 30.0,
    "probe_limit": 40,
    "sandbox_env": {},
}

_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")
_GO_SRC = "/home/runner/work/brev-cli/brev-cli/pkg/"
_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------
class CliError(Exception):
    """An error the real CLI prints (one message on stderr) before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class _Terminated(BaseException):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def traced(msg: str, func: str, file: str, line: int) -> str:
    """The text of ``breverrors.WrapAndTrace(err)``: a trace prefix followed by the inner message."""
    return f"[error] \ngithub.com/brevdev/brev-cli/pkg/{func}\n{_GO_SRC}{file}:{line}\n: {msg}"


def multierror(msgs: list[str]) -> str:
    """hashicorp/go-multierror's list format."""
    if len(msgs) == 1:
        return f"1 error occurred:\n\t* {msgs[0]}\n\n"
    points = "\n\t".join(f"* {m}" for m in msgs)
    return f"{len(msgs)} errors occurred:\n\t{points}\n\n"


def http_error_text(status: int, path: str, body: str | None = None, base: str = API_URL) -> str:
    reason = _HTTP_REASONS.get(status, "Error")
    if body is None:
        body = f"<html>{reason.lower()}</html>" if status >= 500 else '{"message":"' + reason.lower() + '"}'
    return f"{base}/{path}?utm_source=cli {status} {reason} {body}"


UNAUTHORIZED_TEXT = f'{API_URL}/api/me?utm_source=cli 401 Unauthorized {{"message":"invalid token"}}'


# --------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------
def _gonum(x: Any) -> Any:
    """Format numbers the way Go's encoding/json does (integral floats without ``.0``)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return int(x)
    return x


def _b64url_decode(part: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jwt_payload(token: str) -> dict | None:
    """The payload of an (unsigned-checked) JWT, or None when it does not look like one."""
    if not token or token.count(".") != 2:
        return None
    try:
        payload = json.loads(_b64url_decode(token.split(".")[1]))
    except Exception:
        return None
    return payload if isinstance(payload, dict) else None


def make_token(exp_in_seconds: float = 3600, sub: str = "user", now: float | None = None) -> str:
    """An unsigned JWT the simulator accepts for ``brev login --token`` until it expires."""
    import base64

    def enc(obj: dict) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    t = time.time() if now is None else now
    nonce = os.urandom(6).hex()
    payload = {
        "sub": sub,
        "iss": "https://login.nvidia.com",
        "iat": int(t),
        "exp": int(t + exp_in_seconds),
        "jti": nonce,
    }
    sig = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    return f"{enc({'alg': 'RS256', 'typ': 'JWT'})}.{enc(payload)}.{sig}"


def new_instance_id(existing: set[str] | None = None) -> str:
    while True:
        raw = os.urandom(9)
        ident = "".join(_ID_ALPHABET[b % 36] for b in raw)
        if ident[0].isalpha() and (not existing or ident not in existing):
            return ident


def fake_ip(ident: str) -> str:
    h = 0
    for c in ident:
        h = (h * 131 + ord(c)) & 0xFFFFFF
    return f"10.{(h >> 16) & 255}.{(h >> 8) & 255}.{max(2, h & 255)}"


def _read_json(path: str, default: Any = None) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return default
    except ValueError:
        return default


def write_json_atomic(path: str, data: Any, indent: int | None = 1) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=indent, ensure_ascii=False)
    os.replace(tmp, path)


def load_config(root: str) -> dict:
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(_read_json(os.path.join(root, "config.json"), {}) or {})
    timings = dict(DEFAULT_TIMINGS)
    timings.update(cfg.get("timings") or {})
    cfg["timings"] = timings
    return cfg


# --------------------------------------------------------------------------------------------------
# state: one JSON document guarded by flock on a separate lock file
# --------------------------------------------------------------------------------------------------
def empty_state() -> dict:
    return {"auth_generation": 0, "sessions": {}, "instances": [], "faults": []}


class StateStore:
    """Read-modify-write access to ``state.json``; every writer holds an exclusive flock."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.path = os.path.join(root, "state.json")
        self.lock_path = os.path.join(root, "state.lock")
        self._fd: int | None = None
        self._depth = 0

    def _lock(self, exclusive: bool) -> None:
        if self._fd is None:
            self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self._fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)

    def _unlock(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _load(self) -> dict:
        st = _read_json(self.path, None)
        if not isinstance(st, dict):
            st = empty_state()
        for k, v in empty_state().items():
            st.setdefault(k, v)
        return st

    def read(self) -> dict:
        self._lock(False)
        try:
            return self._load()
        finally:
            self._unlock()

    def txn(self, now: float | None = None) -> _Txn:
        return _Txn(self, now)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Txn:
    def __init__(self, store: StateStore, now: float | None) -> None:
        self.store = store
        self.now = now
        self.state: dict = {}

    def __enter__(self) -> dict:
        self.store._lock(True)
        try:
            self.state = self.store._load()
        except BaseException:
            self.store._unlock()
            raise
        return self.state

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                if self.now is not None:
                    gc_instances(self.state, self.now)
                write_json_atomic(self.store.path, self.state)
        finally:
            self.store._unlock()


def gc_instances(state: dict, now: float) -> None:
    state["instances"] = [i for i in state["instances"] if not derive(i, now)["gone"]]


# --------------------------------------------------------------------------------------------------
# instance lifecycle, derived lazily from timestamps
# --------------------------------------------------------------------------------------------------
def derive(inst: dict, now: float) -> dict:
    """Status fields of an instance at ``now``.

    Phases: deploy (DEPLOYING -> RUNNING or FAILURE), stop (STOPPING -> STOPPED),
    start (STARTING -> RUNNING), delete (DELETING -> gone), fixed (whatever was seeded).
    """
    ph = inst.get("phase", "fixed")
    res = {"status": "", "build_status": "", "health_status": "", "status_message": "", "ssh_up": False, "gone": False}
    if ph == "delete":
        if now >= inst["t_gone"]:
            res["gone"] = True
        res.update(status="DELETING", build_status=inst.get("last_build", "COMPLETED"))
        return res
    if ph == "stop":
        if now >= inst["t_stopped"]:
            res.update(status="STOPPED", build_status="COMPLETED")
        else:
            res.update(status="STOPPING", build_status="COMPLETED")
        return res
    if ph in ("deploy", "start"):
        if now < inst["t_running"]:
            if ph == "deploy":
                res.update(status="DEPLOYING", build_status="PENDING")
            else:
                res.update(status="STARTING", build_status="COMPLETED")
            return res
        if inst.get("failure"):
            res.update(status="FAILURE", build_status="CREATE_FAILED", status_message=inst["failure"])
            return res
        build = "COMPLETED" if now >= inst.get("t_build_done", 0) else "BUILDING"
        health = inst.get("health_override") or "HEALTHY"
        res.update(status="RUNNING", build_status=build, health_status=health, ssh_up=now >= inst.get("t_ssh_up", 0))
        return res
    # fixed
    res.update(
        status=inst.get("fixed_status", "RUNNING"),
        build_status=inst.get("fixed_build", ""),
        health_status=inst.get("fixed_health", ""),
        status_message=inst.get("failure") or "",
        ssh_up=bool(inst.get("fixed_ssh", False)),
    )
    return res


def catalog_index(cfg: dict) -> dict[str, dict]:
    return {c["type"]: c for c in cfg.get("catalog") or []}


def public_view(inst: dict, now: float, cfg: dict) -> dict:
    """The ``ls --json`` record of an instance, plus simulator extras used by the controller."""
    d = derive(inst, now)
    status = d["status"]
    if status == "RUNNING" and d["health_status"] == "UNHEALTHY":
        status = "UNHEALTHY"
    cat = catalog_index(cfg).get(inst.get("instance_type", ""))
    gpu = cat["gpu_name"] if cat and cat.get("gpu_count") else "-"
    kind = ("gpu" if gpu != "-" else "cpu") if inst.get("instance_type") else ""
    return {
        "name": inst["name"],
        "id": inst["id"],
        "status": status,
        "build_status": d["build_status"],
        "shell_status": "READY" if d["status"] == "RUNNING" and d["build_status"] == "COMPLETED" else "NOT READY",
        "health_status": d["health_status"],
        "instance_type": inst.get("instance_type", ""),
        "instance_kind": kind,
        "gpu": gpu,
        "workspaceGroupId": inst.get("workspace_group_id", ""),
        # simulator extras (not printed by `ls --json`)
        "raw_status": d["status"],
        "status_message": d["status_message"],
        "ssh_up": d["ssh_up"],
        "gone": d["gone"],
        "created_by": inst.get("created_by", ""),
        "created_at": inst.get("created_at"),
        "cloud_cred_id": inst.get("cloud_cred_id", ""),
        "stoppable": inst.get("stoppable", False),
        "ip": inst.get("ip", ""),
    }


def sandbox_dir(root: str, ident: str) -> str:
    return os.path.join(root, "instances", ident)


def prepare_sandbox(root: str, inst: dict, cfg: dict) -> None:
    base = sandbox_dir(root, inst["id"])
    os.makedirs(os.path.join(base, "home"), exist_ok=True)
    os.makedirs(os.path.join(base, "bin"), exist_ok=True)
    cat = catalog_index(cfg).get(inst.get("instance_type", "")) or {}
    meta = {
        "id": inst["id"],
        "name": inst["name"],
        "instance_type": inst.get("instance_type", ""),
        "gpu_name": cat.get("gpu_name", "") if cat.get("gpu_count") else "",
        "gpu_count": cat.get("gpu_count", 0),
        "vram_per_gpu_gb": cat.get("vram_per_gpu_gb", 0),
        "smi_name": SMI_NAMES.get(cat.get("gpu_name", ""), f"NVIDIA {cat.get('gpu_name', '')}"),
        "workspace_group_id": inst.get("workspace_group_id", ""),
    }
    write_json_atomic(os.path.join(base, "meta.json"), meta)


def new_instance_record(
    cfg: dict,
    state: dict,
    name: str,
    instance_type: str,
    now: float,
    *,
    created_by: str,
    org_id: str,
    workspace_group_id: str = "",
    cloud_cred_id: str = "",
    failure: str | None = None,
    extra_ssh: float = 0.0,
) -> dict:
    t = cfg["timings"]
    ident = new_instance_id({i["id"] for i in state["instances"]})
    cat = catalog_index(cfg).get(instance_type) or {}
    t_running = now + float(t["deploy_seconds"])
    return {
        "id": ident,
        "name": name,
        "org_id": org_id,
        "created_by": created_by,
        "created_at": now,
        "instance_type": instance_type,
        "workspace_group_id": workspace_group_id,
        "cloud_cred_id": cloud_cred_id,
        "stoppable": bool(cat.get("stoppable", False)),
        "ip": fake_ip(ident),
        "phase": "deploy",
        "t_running": t_running,
        "t_build_done": t_running + float(t["build_seconds"]),
        "t_ssh_up": t_running + float(t["ssh_seconds"]) + float(extra_ssh),
        "failure": failure,
    }


# --------------------------------------------------------------------------------------------------
# faults (stored in state.json so every process shares them; consumed under the lock)
# --------------------------------------------------------------------------------------------------
def _fault_matches(f: dict, kind: str, **attrs: Any) -> bool:
    if f.get("kind") != kind:
        return False
    for key, val in attrs.items():
        want = f.get(key)
        if want is None or val is None:
            continue
        if key == "match":
            if want not in val:
                return False
        elif want != val:
            return False
    return True


def take_fault(state: dict, kind: str, **attrs: Any) -> dict | None:
    """Consume one use of the first matching fault (``times`` None means unlimited)."""
    for f in state.get("faults", []):
        if _fault_matches(f, kind, **attrs):
            times = f.get("times")
            if times is not None:
                if times <= 0:
                    continue
                f["times"] = times - 1
            state["faults"] = [x for x in state["faults"] if x.get("times") is None or x["times"] > 0]
            return dict(f)
    return None


def peek_fault(state: dict, kind: str, **attrs: Any) -> dict | None:
    for f in state.get("faults", []):
        if _fault_matches(f, kind, **attrs) and (f.get("times") is None or f["times"] > 0):
            return dict(f)
    return None


# --------------------------------------------------------------------------------------------------
# processes of a sandbox
# --------------------------------------------------------------------------------------------------
def sandbox_pids(marker_key: str, marker_value: str) -> list[int]:
    """PIDs whose environment contains ``marker_key=marker_value`` (scans /proc/*/environ)."""
    needle = f"{marker_key}={marker_value}".encode()
    me = os.getpid()
    pids: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for ent in entries:
        if not ent.isdigit():
            continue
        pid = int(ent)
        if pid == me:
            continue
        try:
            with open(f"/proc/{ent}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            pids.append(pid)
    return pids


def kill_sandbox_processes(marker_key: str, marker_value: str) -> int:
    """SIGKILL every process of a sandbox; repeats a few rounds to catch forks in flight."""
    killed = 0
    for _ in range(5):
        pids = sandbox_pids(marker_key, marker_value)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
    return killed


# --------------------------------------------------------------------------------------------------
# flag parsing (a cobra/pflag look-alike)
# --------------------------------------------------------------------------------------------------
class Flag:
    __slots__ = ("default", "help", "hidden", "kind", "name", "short")

    def __init__(
        self,
        name: str,
        short: str = "",
        kind: str = "bool",
        default: Any = None,
        help: str = "",
        hidden: bool = False,
    ) -> None:
        self.name = name
        self.short = short
        self.kind = kind
        if default is None:
            default = {"bool": False, "str": "", "int": 0, "float": 0.0}[kind]
        self.default = default
        self.help = help
        self.hidden = hidden


GLOBAL_FLAGS = [
    Flag("help", "h", "bool", False, "Help for Brev"),
    Flag("user", "", "str", "", "Non root user to use for per user configuration of commands run as root"),
    Flag("version", "", "bool", False, "Print version output"),
    Flag("no-check-latest", "", "bool", False, "Do not check for the latest version when printing version"),
]


def _convert(flag: Flag, raw: str, shown: str) -> Any:
    if flag.kind == "str":
        return raw
    if flag.kind == "int":
        try:
            return int(raw, 10)
        except ValueError:
            raise CliError(
                f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseInt: parsing "{raw}": invalid syntax'
            ) from None
    if flag.kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise CliError(
                f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseFloat: parsing "{raw}": invalid syntax'
            ) from None
    low = raw.lower()
    if low in ("1", "t", "true"):
        return True
    if low in ("0", "f", "false"):
        return False
    raise CliError(f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseBool: parsing "{raw}": invalid syntax')


def _shown(flag: Flag) -> str:
    return f"-{flag.short}, --{flag.name}" if flag.short else f"--{flag.name}"


def parse_flags(args: list[str], flags: list[Flag]) -> tuple[dict, list[str], set[str]]:
    by_long = {f.name: f for f in flags}
    by_short = {f.short: f for f in flags if f.short}
    vals = {f.name: f.default for f in flags}
    changed: set[str] = set()
    pos: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos.extend(args[i + 1 :])
            break
        if a.startswith("--"):
            name, eq, raw = a[2:].partition("=")
            f = by_long.get(name)
            if f is None:
                raise CliError(f"unknown flag: --{name}")
            if f.kind == "bool":
                vals[f.name] = _convert(f, raw, _shown(f)) if eq else True
            else:
                if not eq:
                    if i + 1 >= len(args):
                        raise CliError(f"flag needs an argument: --{name}")
                    i += 1
                    raw = args[i]
                vals[f.name] = _convert(f, raw, _shown(f))
            changed.add(f.name)
        elif a.startswith("-") and len(a) > 1:
            shorts = a[1:]
            j = 0
            while j < len(shorts):
                c = shorts[j]
                f = by_short.get(c)
                if f is None:
                    raise CliError(f"unknown shorthand flag: '{c}' in -{shorts}")
                changed.add(f.name)
                if f.kind == "bool":
                    if shorts[j + 1 : j + 2] == "=":
                        vals[f.name] = _convert(f, shorts[j + 2 :], _shown(f))
                        break
                    vals[f.name] = True
                    j += 1
                    continue
                rest = shorts[j + 1 :]
                if rest.startswith("="):
                    rest = rest[1:]
                elif rest == "":
                    if i + 1 >= len(args):
                        raise CliError(f"flag needs an argument: '{c}' in -{shorts}")
                    i += 1
                    rest = args[i]
                vals[f.name] = _convert(f, rest, _shown(f))
                break
        else:
            pos.append(a)
        i += 1
    return vals, pos, changed


def flag_usages(flags: list[Flag]) -> str:
    lines = []
    for f in sorted((f for f in flags if not f.hidden), key=lambda f: f.name):
        left = f"  -{f.short}, --{f.name}" if f.short else f"      --{f.name}"
        typ = {"str": "string", "int": "int", "float": "float", "bool": ""}[f.kind]
        if typ:
            left += " " + typ
        usage = f.help
        if f.kind == "str" and f.default:
            usage += f' (default "{f.default}")'
        elif f.kind in ("int", "float") and f.default:
            usage += f" (default {_gonum(f.default)})"
        elif f.kind == "bool" and f.default:
            usage += " (default true)"
        lines.append((left, usage))
    width = max((len(left) for left, _ in lines), default=0)
    return "".join(f"{left.ljust(width)}   {usage}\n" for left, usage in lines)


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


# --------------------------------------------------------------------------------------------------
# execution context
# --------------------------------------------------------------------------------------------------
def _is_chr(fd: int) -> bool:
    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return False


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


class Ctx:
    def __init__(self, root: str, record: dict) -> None:
        self.root = root
        self.cfg = load_config(root)
        self.store = StateStore(root)
        self.record = record
        home = os.environ.get("HOME") or os.path.expanduser("~")
        self.home = os.path.abspath(home)
        self.session_key = os.path.realpath(self.home)
        self.profile = self.cfg.get("profile", "released")
        self.stdout_piped = not _is_chr(1)
        self.stdin_chr = _is_chr(0)
        self._stdin_eof = False
        self.stdout_broken = False

    # clock and knobs ------------------------------------------------------------------------------
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

    # output ---------------------------------------------------------------------------------------
    def out(self, s: str) -> None:
        if self.stdout_broken:
            return
        try:
            _write_fd(1, s.encode("utf-8", "replace"))
        except BrokenPipeError:
            self.stdout_broken = True
        except OSError:
            self.stdout_broken = True

    def err(self, s: str) -> None:
        with contextlib.suppress(OSError):
            _write_fd(2, s.encode("utf-8", "replace"))

    def log(self, s: str) -> None:
        """Progress logs: stderr when stdout is piped, stdout on a terminal (gpucreate's logf)."""
        if self.stdout_piped:
            self.err(s)
        else:
            self.out(s)

    # stdin ----------------------------------------------------------------------------------------
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

    # credentials ----------------------------------------------------------------------------------
    @property
    def brev_dir(self) -> str:
        return os.path.join(self.home, ".brev")

    def load_creds(self) -> dict | None:
        creds = _read_json(os.path.join(self.brev_dir, "credentials.json"), None)
        return creds if isinstance(creds, dict) else None

    def save_creds(self, creds: dict) -> None:
        os.makedirs(self.brev_dir, mode=0o770, exist_ok=True)
        write_json_atomic(os.path.join(self.brev_dir, "credentials.json"), creds, indent=1)

    def save_active_org(self, org: dict) -> None:
        os.makedirs(self.brev_dir, mode=0o770, exist_ok=True)
        data = {"id": org["id"], "name": org["name"], "userNetworkId": ""}
        write_json_atomic(os.path.join(self.brev_dir, "active_org.json"), data, indent=1)


# --------------------------------------------------------------------------------------------------
# auth
# --------------------------------------------------------------------------------------------------
def _token_valid_locally(token: str, now: float) -> bool:
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
    """`auth.StandardLogin` at start-up prints this when the stored access token is not a JWT."""
    creds = ctx.load_creds()
    if not creds or (creds.get("api_key") or "").strip():
        return
    access = creds.get("access_token") or ""
    if access and jwt_payload(access) is None:
        ctx.out("no oauth found for token\n")


def logged_out(ctx: Ctx, creds: dict | None) -> dict:
    if ctx.cfg.get("auth_error_style") == "401":
        raise CliError(UNAUTHORIZED_TEXT)
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
            raise CliError(UNAUTHORIZED_TEXT)
        return {
            "id": ctx.accounts["user"]["id"],
            "api_key": True,
            "org_id": creds.get("api_key_org_id") or ctx.org["id"],
        }
    access = creds.get("access_token") or ""
    now = ctx.now()
    if not _token_valid_locally(access, now):
        return logged_out(ctx, creds)
    st = ctx.store.read()
    gen = st.get("sessions", {}).get(ctx.session_key, 0)
    if gen < st.get("auth_generation", 0):
        return logged_out(ctx, creds)
    if access in revoked:
        raise CliError(UNAUTHORIZED_TEXT)
    sub = (jwt_payload(access) or {}).get("sub") or ctx.accounts["user"]["id"]
    return {"id": sub, "api_key": False, "org_id": ctx.org["id"]}


def maybe_5xx(ctx: Ctx, command: str, stage: str | None = None) -> dict | None:
    """Consume an armed ``http_5xx`` fault for this command/stage and return it (None if none)."""
    with ctx.store.txn() as st:
        f = None
        for cand in st.get("faults", []):
            if cand.get("kind") != "http_5xx" or cand.get("command") not in (None, command):
                continue
            if (cand.get("stage") or None) != stage:
                continue
            if cand.get("times") is not None and cand["times"] <= 0:
                continue
            f = cand
            break
        if f is None:
            return None
        if f.get("times") is not None:
            f["times"] -= 1
        st["faults"] = [x for x in st["faults"] if x.get("times") is None or x["times"] > 0]
        return dict(f)


def raise_5xx(ctx: Ctx, command: str, path: str) -> None:
    f = maybe_5xx(ctx, command)
    if f is not None:
        raise CliError(http_error_text(int(f.get("status", 502)), path, f.get("body")))


# --------------------------------------------------------------------------------------------------
# workspace lookup helpers
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# commands: meta
# --------------------------------------------------------------------------------------------------
ROOT_LONG = "brev client for managing workspaces\n\nRead the docs at https://docs.nvidia.com/brev/"


def root_help(ctx: Ctx) -> str:
    lines = [ROOT_LONG, "", "Usage:", "  brev [command]", "", "Available Commands:"]
    names = sorted(n for n, spec in COMMANDS.items() if not spec.get("documented_only") or ctx.documented)
    width = max(len(n) for n in names)
    for n in names:
        lines.append(f"  {n.ljust(width)}  {COMMANDS[n]['short']}")
    lines += [
        "",
        "Flags:",
        flag_usages(GLOBAL_FLAGS).rstrip("\n"),
        "",
        'Use "brev [command] --help" for more information about a command.',
        "",
    ]
    return "\n".join(lines)


def command_help(ctx: Ctx, name: str, spec: dict) -> str:
    flags = spec["flags"](ctx)
    parts = [spec.get("long") or spec["short"], "", "Usage:", f"  brev {spec.get('use', name)}"]
    if spec.get("aliases"):
        parts += ["", "Aliases:", "  " + ", ".join([name, *spec["aliases"]])]
    if spec.get("example"):
        parts += ["", "Examples:", spec["example"].rstrip("\n")]
    if flags:
        parts += ["", "Flags:", flag_usages(flags).rstrip("\n")]
    parts += ["", "Global Flags:", flag_usages(GLOBAL_FLAGS).rstrip("\n"), ""]
    return "\n".join(parts)


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
def _table(header: list[str], rows: list[list[str]]) -> str:
    """go-pretty without borders or column separators: every cell padded by one space each side."""
    widths = [len(h) for h in header]
    for r in rows:
        for k, cell in enumerate(r):
            widths[k] = max(widths[k], len(cell))
    out = []
    for r in [header, *rows]:
        out.append("".join(f" {cell.ljust(widths[k])} " for k, cell in enumerate(r)).rstrip() + "\n")
    return "".join(out)


def ls_workspace_json(view: dict, documented: bool) -> dict:
    keys = [
        "name",
        "id",
        "status",
        "build_status",
        "shell_status",
        "health_status",
        "instance_type",
        "instance_kind",
        "gpu",
    ]
    rec = {k: view[k] for k in keys}
    if documented:
        rec["workspaceGroupId"] = view["workspaceGroupId"]
    return rec


def cmd_ls(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if len(pos) > 1:
        raise CliError("too many args provided")
    what = pos[0] if pos else ""
    valid = {
        "",
        "org",
        "orgs",
        "organization",
        "organizations",
        "workspace",
        "workspaces",
        "instance",
        "instances",
        "node",
        "nodes",
        "user",
        "users",
        "host",
        "hosts",
    }
    if what not in valid:
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
        ctx.out("Your organizations:\n" + _table(["NAME", "ID"], rows))
        return 0
    if what.startswith("node"):
        if v["json"]:
            ctx.out("[]\n")
        else:
            ctx.out(f"No external nodes in org {ctx.org['name']}\n")
        return 0
    if v["org"] and v["org"] not in (ctx.org["name"],):
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
    ctx.out(_table(["NAME", "STATUS", "BUILD", "SHELL", "ID", "MACHINE", "GPU"], rows))
    ctx.out("\n")
    return 0


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
SORT_KEYS = {
    "price": "price_per_hour",
    "gpu-count": "gpu_count",
    "vram": "vram_per_gpu_gb",
    "total-vram": "total_vram_gb",
    "vcpu": "vcpus",
    "type": "type",
    "capability": "capability",
    "provider": "provider",
    "disk": "disk_max_gb",
    "boot-time": "boot_time_seconds",
    "ram": "ram_gb",
    "arch": "arch",
}


def filter_catalog(
    cfg: dict,
    *,
    gpu_only: bool = True,
    cpu_only: bool = False,
    gpu_name: str = "",
    provider: str = "",
    arch: str = "",
    min_vram: float = 0,
    min_total_vram: float = 0,
    min_capability: float = 0,
    min_ram: float = 0,
    min_disk: float = 0,
    min_vcpu: int = 0,
    max_boot_time: int = 0,
    stoppable: bool = False,
    rebootable: bool = False,
    flex_ports: bool = False,
    sort_by: str = "price",
    desc: bool = False,
) -> list[dict]:
    res = []
    for c in cfg.get("catalog") or []:
        is_cpu = not c.get("gpu_count")
        if gpu_only and is_cpu:
            continue
        if cpu_only and not is_cpu:
            continue
        if gpu_name and gpu_name.lower() not in (c.get("gpu_name") or "").lower():
            continue
        if provider and provider.lower() not in (c.get("provider") or "").lower():
            continue
        if arch and arch.lower() not in (c.get("arch") or "").lower():
            continue
        if min_vcpu and c.get("vcpus", 0) < min_vcpu:
            continue
        if min_ram and c.get("ram_gb", 0) < min_ram:
            continue
        if min_vram and c.get("vram_per_gpu_gb", 0) < min_vram:
            continue
        if min_total_vram and c.get("total_vram_gb", 0) < min_total_vram:
            continue
        if min_capability and c.get("capability", 0) < min_capability:
            continue
        if min_disk and c.get("disk_max_gb", 0) < min_disk:
            continue
        if max_boot_time and (not c.get("boot_time_seconds") or c["boot_time_seconds"] > max_boot_time * 60):
            continue
        if stoppable and not c.get("stoppable"):
            continue
        if rebootable and not c.get("rebootable"):
            continue
        if flex_ports and not c.get("flex_ports"):
            continue
        res.append(dict(c))
    key = SORT_KEYS.get(sort_by.lower(), "price_per_hour")
    res.sort(key=lambda c: c.get(key) or 0, reverse=desc)
    return res


def search_json_record(c: dict, min_disk: float = 0) -> dict:
    dmin, dmax = c.get("disk_min_gb", 0), c.get("disk_max_gb", 0)
    target = min_disk if (dmin != dmax and min_disk and dmin <= min_disk <= dmax) else dmin
    keys = [
        "type",
        "cloud",
        "provider",
        "gpu_name",
        "gpu_count",
        "vram_per_gpu_gb",
        "total_vram_gb",
        "capability",
        "vcpus",
        "memory",
        "ram_gb",
        "arch",
        "disk_min_gb",
        "disk_max_gb",
    ]
    rec = {
        k: _gonum(c.get(k, 0 if k not in ("type", "cloud", "provider", "gpu_name", "memory", "arch") else ""))
        for k in keys
    }
    if c.get("disk_price_per_gb_mo"):
        rec["disk_price_per_gb_mo"] = _gonum(c["disk_price_per_gb_mo"])
    rec["boot_time_seconds"] = c.get("boot_time_seconds", 0)
    rec["stoppable"] = bool(c.get("stoppable"))
    rec["rebootable"] = bool(c.get("rebootable"))
    rec["flex_ports"] = bool(c.get("flex_ports"))
    if target:
        rec["target_disk_gb"] = _gonum(float(target))
    rec["price_per_hour"] = _gonum(c.get("price_per_hour", 0))
    return rec


def _fmt_size(gb: float) -> str:
    return f"{gb / 1000:.0f}TB" if gb >= 1000 else f"{gb:.0f}GB"


def _fmt_boot(sec: int) -> str:
    if not sec:
        return "-"
    return f"{sec // 60}m" if sec % 60 == 0 else f"{sec // 60}m{sec % 60}s"


def search_table(recs: list[dict], cpu: bool) -> str:
    rows = []
    for r in recs:
        disk = (
            _fmt_size(r["disk_min_gb"])
            if r["disk_min_gb"] == r["disk_max_gb"]
            else (f"{_fmt_size(r['disk_min_gb'])}-{_fmt_size(r['disk_max_gb'])}")
        )
        feats = "".join(k for k, f in (("S", "stoppable"), ("R", "rebootable"), ("P", "flex_ports")) if r[f]) or "-"
        dprice = f"${r['disk_price_per_gb_mo']:.2f}" if r.get("disk_price_per_gb_mo") else "-"
        common = [
            disk,
            dprice,
            _fmt_boot(r["boot_time_seconds"]),
            feats,
            str(r["vcpus"]),
            f"${r['price_per_hour']:.2f}",
        ]
        tdisk = f"{r.get('target_disk_gb', 0):.0f}"
        if cpu:
            rows.append([r["type"], tdisk, r["provider"], r["memory"], *common])
        else:
            rows.append(
                [
                    r["type"],
                    tdisk,
                    r["provider"],
                    r["gpu_name"],
                    str(r["gpu_count"]),
                    f"{r['vram_per_gpu_gb']}GB",
                    f"{r['total_vram_gb']}GB",
                    f"{r['capability']}",
                    *common,
                ]
            )
    if cpu:
        header = ["TYPE", "TARGET_DISK", "PROVIDER", "RAM", "DISK", "$/GB/MO", "BOOT", "FEATURES", "VCPUs", "$/HR"]
    else:
        header = [
            "TYPE",
            "TARGET_DISK",
            "PROVIDER",
            "GPU",
            "COUNT",
            "VRAM/GPU",
            "TOTAL_VRAM",
            "CAPABILITY",
            "DISK",
            "$/GB/MO",
            "BOOT",
            "FEATURES",
            "VCPUs",
            "$/HR",
        ]
    return _table(header, rows)


def cmd_search(ctx: Ctx, v: dict, pos: list[str]) -> int:
    mode = "gpu"
    if pos:
        if pos[0] in ("gpu", "cpu") and len(pos) == 1:
            mode = pos[0]
        else:
            raise CliError(f'unknown command "{pos[0]}" for "brev search"')
    if v["sort"] and v["sort"].lower() not in SORT_KEYS:
        raise CliError(f'invalid sort option "{v["sort"]}". Valid options: {", ".join(sorted(SORT_KEYS))}')
    f = maybe_5xx(ctx, "search")
    if f is not None:
        raise CliError(
            http_error_text(int(f.get("status", 502)), "v1/instance/types", f.get("body"), base=PUBLIC_API_URL)
        )
    kw = {
        "provider": v["provider"],
        "arch": v["arch"],
        "min_ram": v["min-ram"],
        "min_disk": v["min-disk"],
        "min_vcpu": v["min-vcpu"],
        "max_boot_time": v["max-boot-time"],
        "stoppable": v["stoppable"],
        "rebootable": v["rebootable"],
        "flex_ports": v["flex-ports"],
        "sort_by": v["sort"] or "price",
        "desc": v["desc"],
    }
    if mode == "cpu":
        found = filter_catalog(ctx.cfg, gpu_only=False, cpu_only=True, **kw)
    else:
        found = filter_catalog(
            ctx.cfg,
            gpu_name=v.get("gpu-name", ""),
            min_vram=v.get("min-vram", 0),
            min_total_vram=v.get("min-total-vram", 0),
            min_capability=v.get("min-capability", 0),
            **kw,
        )
    recs = [search_json_record(c, v["min-disk"]) for c in found]
    if v["json"]:
        ctx.out((json.dumps(recs, indent=2, ensure_ascii=False) if recs else "[]") + "\n")
        return 0
    if not recs:
        if not ctx.stdout_piped:
            ctx.out(f"No {mode.upper()} instances match the specified filters\n")
        return 0
    ctx.out(search_table(recs, mode == "cpu"))
    if not ctx.stdout_piped:
        ctx.out(f"\nFound {len(recs)} {mode.upper()} instance types\n")
    return 0


# --------------------------------------------------------------------------------------------------
# create
# --------------------------------------------------------------------------------------------------
def _parse_types_input(text: str) -> list[tuple[str, float]]:
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        return [(str(i.get("type", "")), float(i.get("target_disk_gb") or 0)) for i in items if isinstance(i, dict)]
    specs = []
    for idx, line in enumerate(text.split("\n")):
        if idx == 0 and ("TYPE" in line or "GPU" in line):
            continue
        line = line.strip()
        if not line or line.startswith("Found "):
            continue
        fields = line.split()
        t = fields[0]
        if len(t) >= 2 and any(ch.isalpha() for ch in t) and any(ch.isdigit() for ch in t):
            disk = 0.0
            if len(fields) > 1:
                try:
                    disk = max(0.0, float(fields[1]))
                except ValueError:
                    disk = 0.0
            specs.append((t, disk))
    return specs


def _fmt_specs(specs: list[tuple[str, float]]) -> str:
    return ", ".join(f"{t} ({d:.0f}GB disk)" if d > 0 else t for t, d in specs)


def _resolve_gpu_flag(ctx: Ctx, value: str) -> list[tuple[str, float]]:
    name, _, count = value.partition(":")
    name = name.strip()
    try:
        n = int(count) if count else 1
    except ValueError:
        n = -1
    if not name or n < 1:
        raise CliError(f'invalid --gpu value "{value}": expected NAME:COUNT, e.g. L40S:1')
    cands = [
        c
        for c in filter_catalog(ctx.cfg)
        if (c.get("gpu_name") or "").lower() == name.lower() and int(c.get("gpu_count", 0)) == n
    ]
    if not cands:
        raise CliError(f"no instance type offers GPU \"{name}\" x{n}; run 'brev search' to see available options")
    c = cands[0]
    disk = float(c["disk_min_gb"])
    if c["disk_min_gb"] != c["disk_max_gb"] and c["disk_min_gb"] < 500 <= c["disk_max_gb"]:
        disk = 500.0
    return [(c["type"], disk)]


def _check_placement(ctx: Ctx, v: dict) -> tuple[str, str]:
    acc = ctx.accounts
    creds = acc.get("cloud_credentials") or []
    groups = acc.get("workspace_groups") or []
    cc = (v.get("cloud-cred-id") or "").strip()
    wg = (v.get("workspace-group-id") or "").strip()
    if cc and cc not in {c["id"] for c in creds}:
        raise CliError(
            f'placement error: cloud credential "{cc}" not found in organization {ctx.org["name"]} '
            f"(see brev orgs --json)"
        )
    if wg and wg not in {g["id"] for g in groups}:
        raise CliError(
            f'placement error: workspace group "{wg}" not found in organization {ctx.org["name"]} '
            f"(see brev orgs --json)"
        )
    if not cc and len(creds) > 1:
        raise CliError(
            f"placement error: this organization has {len(creds)} cloud credentials; "
            f"pass --cloud-cred-id <id> (see brev orgs --json)"
        )
    if not wg and len(groups) > 1:
        raise CliError(
            f"placement error: this organization has {len(groups)} workspace groups; "
            f"pass --workspace-group-id <id> (see brev orgs --json)"
        )
    return cc or (creds[0]["id"] if creds else ""), wg or (groups[0]["id"] if groups else "")


def cmd_create(ctx: Ctx, v: dict, pos: list[str]) -> int:
    name = v["name"] or (pos[0] if pos else "")
    if v["launchable"]:
        lid = v["launchable"]
        raise CliError(
            f'failed to fetch launchable "{lid}": '
            + http_error_text(404, f"api/launchables/{lid}/now", '{"message":"launchable not found"}')
        )
    mode = v["mode"]
    if mode not in ("vm", "k8s", "container", "compose"):
        raise CliError(f'invalid mode "{mode}": must be one of vm, k8s, container, compose')
    if mode == "container" and not v["container-image"]:
        raise CliError("--container-image is required for container mode")
    if mode == "compose" and not v["compose-file"]:
        raise CliError("--compose-file is required for compose mode")
    if not name:
        raise CliError("name is required")
    if len(name) > 63:
        raise CliError(f"name must be 63 characters or fewer (got {len(name)})")
    if not _NAME_RE.match(name):
        raise CliError(
            "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots"
        )
    count = v["count"]
    if count < 1:
        raise CliError("--count must be at least 1")
    specs = [(t.strip(), 0.0) for t in (v["type"] or "").split(",") if t.strip()]
    specs += _parse_types_input(ctx.read_stdin_all())
    if v["startup-script"].startswith("@"):
        try:
            with open(v["startup-script"][1:], encoding="utf-8") as fh:
                fh.read()
        except OSError as exc:
            raise CliError(f"open {v['startup-script'][1:]}: {(exc.strerror or 'error').lower()}") from None
    if ctx.documented and v.get("gpu"):
        if specs:
            raise CliError("--gpu cannot be combined with --type or piped instance types")
        specs = _resolve_gpu_flag(ctx, v["gpu"])
    if not specs:
        user_filters = bool(
            v["gpu-name"]
            or v["provider"]
            or v["min-vram"]
            or v["min-total-vram"]
            or v["min-capability"]
            or v["min-disk"]
            or v["max-boot-time"]
            or v["stoppable"]
            or v["rebootable"]
            or v["flex-ports"]
        )
        min_disk = v["min-disk"] or 500.0
        found = filter_catalog(
            ctx.cfg,
            gpu_name=v["gpu-name"],
            provider=v["provider"],
            min_vram=v["min-vram"],
            min_total_vram=v["min-total-vram"] or 20.0,
            min_capability=v["min-capability"] or 8.0,
            min_disk=min_disk,
            max_boot_time=v["max-boot-time"] or (0 if user_filters else 7),
            stoppable=v["stoppable"],
            rebootable=v["rebootable"],
            flex_ports=v["flex-ports"],
            sort_by=v["sort"] or "price",
            desc=v["desc"],
        )
        if not found:
            raise CliError("no GPU instances match the specified filters. Try 'brev search' to see available options")
        for c in found:
            disk = float(c["disk_min_gb"])
            if c["disk_min_gb"] != c["disk_max_gb"] and c["disk_min_gb"] < min_disk <= c["disk_max_gb"]:
                disk = float(min_disk)
            specs.append((c["type"], disk))
    if v["dry-run"]:
        ctx.out(_fmt_specs(specs) + "\n")
        return 0

    user = authenticate(ctx)
    raise_5xx(ctx, "create", "api/me")
    cc_id, wg_id = ("", "")
    if ctx.documented:
        cc_id, wg_id = _check_placement(ctx, v)
    else:
        acc = ctx.accounts
        cc_id = (acc.get("cloud_credentials") or [{"id": ""}])[0]["id"]
        wg_id = (acc.get("workspace_groups") or [{"id": ""}])[0]["id"]

    with ctx.store.txn() as st:
        listing_down = take_fault(st, "listing_unavailable") is not None
    if listing_down:
        ctx.log(
            f"Warning: could not fetch instance types with workspace groups: "
            f"{http_error_text(503, 'api/instances/alltypesavailable/' + ctx.org['id'])}\n"
        )
        ctx.log("Falling back to default workspace group\n")
    known = catalog_index(ctx.cfg)
    parallel = max(1, v["parallel"])
    ctx.log(f"Attempting to create {count} instance(s) with {parallel} parallel attempts\n")
    ctx.log(f"Instance types to try: {_fmt_specs(specs)}\n\n")

    created: list[dict] = []
    for itype, _disk in specs:
        if len(created) >= count:
            break
        remaining = count - len(created)
        ctx.log(f"Trying {itype} for {remaining} instance(s)...\n")
        had_failure = False
        fatal = None
        if not listing_down and itype not in known:
            ctx.log(
                f"Skipping: instance type \"{itype}\" is not a recognized type; run 'brev search' to see "
                f"available types\n"
            )
            had_failure = True
        else:
            workers = min(parallel, remaining)
            for k, idx in enumerate(range(len(created), len(created) + remaining)):
                if len(created) >= count:
                    break
                wid = (k % workers) + 1
                iname = f"{name}-{idx + 1}" if count > 1 else name
                ctx.log(f"[Worker {wid}] Trying {itype} for instance '{iname}'...\n")
                inst, failure = _create_one(ctx, user, iname, itype, listing_down, cc_id, wg_id)
                if failure is not None:
                    ctx.log(f"[Worker {wid}] {itype} Failed: {failure}\n")
                    had_failure = True
                    if "duplicate workspace" in failure:
                        fatal = (
                            f"workspace '{iname}' already exists. Use a different name or delete the existing workspace"
                        )
                elif inst is not None:
                    ctx.log(f"[Worker {wid}] {itype} Success! Created instance '{iname}'\n")
                    created.append(inst)
        if fatal:
            ctx.log(f"\nError: {fatal}\n")
            break
        if not had_failure and len(created) >= count:
            break
        if len(created) < count and had_failure:
            ctx.log(f"\nType {itype} had failures, trying next type...\n\n")
    if len(created) < count:
        ctx.log(f"\nWarning: Only created {len(created)}/{count} instances\n")
        if created:
            ctx.log("Successfully created instances:\n")
            for inst in created:
                ctx.log(f"  - {inst['name']} (ID: {inst['id']})\n")
        raise CliError(f"could only create {len(created)}/{count} instances")

    if not v["detached"]:
        ctx.log("\nWaiting for instance(s) to be ready...\n")
        ctx.log("You can safely ctrl+c to exit\n")
        for inst in created:
            _wait_ready(ctx, inst, float(v["timeout"]))
    if ctx.stdout_piped:
        for inst in created:
            ctx.out(inst["name"] + "\n")
        return 0
    ctx.out("\n")
    ctx.out(f"Successfully created {len(created)} instance(s)!\n\n")
    for inst in created:
        ctx.out(f"Instance: {inst['name']}\n  ID: {inst['id']}\n  Type: {inst['instance_type']}\n")
        ctx.out(f"  Connect:\n    brev open {inst['name']}\n    brev shell {inst['name']}\n\n")
    return 0


def _create_one(
    ctx: Ctx, user: dict, name: str, itype: str, listing_down: bool, cc_id: str, wg_id: str
) -> tuple[dict | None, str | None]:
    """One `POST api/organizations/{org}/workspaces`; returns (instance, None) or (None, error text)."""
    if listing_down:
        return None, (
            f'could not resolve workspace group for "{itype}" (instance-type listing was unavailable); please retry'
        )
    now = ctx.now()
    with ctx.store.txn(now=now) as st:
        f5 = None
        for cand in st.get("faults", []):
            if (
                cand.get("kind") == "http_5xx"
                and cand.get("command") in (None, "create")
                and cand.get("stage") == "post"
                and (cand.get("times") is None or cand["times"] > 0)
            ):
                f5 = cand
                break
        if f5 is not None:
            if f5.get("times") is not None:
                f5["times"] -= 1
            st["faults"] = [x for x in st["faults"] if x.get("times") is None or x["times"] > 0]
        err = None
        if f5 is not None:
            err = http_error_text(
                int(f5.get("status", 502)), f"api/organizations/{ctx.org['id']}/workspaces", f5.get("body")
            )
            if not f5.get("side_effect"):
                return None, err
        if any(i["name"] == name for i in st["instances"] if not derive(i, now)["gone"]):
            return None, "duplicate workspace name"
        if take_fault(st, "capacity", type=itype) is not None:
            return None, f"no capacity available for instance type {itype}"
        boot = take_fault(st, "boot_failure", type=itype, instance=name)
        refused = take_fault(st, "ssh_refused", instance=name)
        inst = new_instance_record(
            ctx.cfg,
            st,
            name,
            itype,
            now,
            created_by=user["id"],
            org_id=ctx.org["id"],
            workspace_group_id=wg_id,
            cloud_cred_id=cc_id,
            failure=(boot.get("message") or "instance failed to boot: VM health check timed out") if boot else None,
            extra_ssh=float(refused.get("seconds", 0)) if refused else 0.0,
        )
        st["instances"].append(inst)
    prepare_sandbox(ctx.root, inst, ctx.cfg)
    if err is not None:
        return None, err
    return inst, None


def _wait_ready(ctx: Ctx, inst: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    poll = ctx.t("poll_seconds")
    while time.monotonic() < deadline:
        cur = get_instance_by_id(ctx, inst["id"])
        if cur is None:
            ctx.log(f"  {inst['name']}: " + http_error_text(404, f"api/workspaces/{inst['id']}") + "\n")
            return
        d = derive(cur, ctx.now())
        if d["status"] == "RUNNING":
            ctx.log(f"  {inst['name']}: Ready\n")
            return
        if d["status"] == "FAILURE":
            msg = f"instance {inst['name']} failed"
            if d["status_message"]:
                msg += f": {d['status_message']}"
            ctx.log(f"  {inst['name']}: {msg}\n")
            return
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
    ctx.log(f"  {inst['name']}: Timeout waiting for ready state\n")


# --------------------------------------------------------------------------------------------------
# delete / stop / start
# --------------------------------------------------------------------------------------------------
def _names_or_error(ctx: Ctx, pos: list[str]) -> list[str]:
    names = list(pos) + ctx.names_from_stdin()
    if not names:
        raise CliError("instance name required: provide as argument or pipe from another command")
    return names


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
def ssh_config_path(ctx: Ctx) -> str:
    return os.path.join(ctx.brev_dir, "ssh_config")


def read_ssh_aliases(ctx: Ctx) -> dict[str, str]:
    """alias -> instance id, from ``~/.brev/ssh_config`` (written only by refresh)."""
    aliases: dict[str, str] = {}
    try:
        with open(ssh_config_path(ctx), encoding="utf-8") as fh:
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


def ssh_block(brev_dir: str, inst: dict, host: bool = False) -> str:
    alias = inst["name"] + ("-host" if host else "")
    return (
        f"Host {alias}\n"
        f"  Hostname {inst.get('ip') or fake_ip(inst['id'])}\n"
        f'  IdentityFile "{os.path.join(brev_dir, "brev.pem")}"\n'
        f"  User ubuntu\n"
        f"  Port 22\n"
        f"  ServerAliveInterval 30\n"
        f"  UserKnownHostsFile /dev/null\n"
        f"  StrictHostKeyChecking no\n"
        f"  # brev-sim-id {inst['id']}\n"
    )


def write_ssh_config(brev_dir: str, insts: list[dict], append: bool = False) -> None:
    """Rewrite (or extend) ``~/.brev/ssh_config`` with aliases ``<name>`` and ``<name>-host``."""
    blocks = [ssh_block(brev_dir, i, host) for i in insts for host in (False, True)]
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
    f = maybe_5xx(ctx, "refresh")
    if f is not None:
        raise CliError(http_error_text(int(f.get("status", 502)), "api/me/keys", f.get("body")))
    st = ctx.store.read()
    now = ctx.now()
    running = [i for i in visible_instances(ctx, st, user) if derive(i, now)["status"] == "RUNNING"]
    write_ssh_config(ctx.brev_dir, running)


def cmd_refresh(ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    ctx.out("refreshing brev...\n")
    user = authenticate(ctx)
    run_refresh(ctx, user)
    ctx.out("brev has been refreshed\n")
    return 0


def ssh_check(ctx: Ctx, alias: str) -> tuple[dict | None, str]:
    """Resolve an ssh alias like ssh would: (instance, None) when sshd answers, else (None, ssh's error)."""
    ident = read_ssh_aliases(ctx).get(alias)
    if ident is None:
        return None, f"ssh: Could not resolve hostname {alias}: Name or service not known"
    st = ctx.store.read()
    now = ctx.now()
    inst = next((i for i in st["instances"] if i["id"] == ident), None)
    if inst is None or derive(inst, now)["gone"]:
        ip = inst.get("ip") if inst else fake_ip(ident)
        return None, f"ssh: connect to host {ip} port 22: Connection timed out"
    d = derive(inst, now)
    ip = inst.get("ip") or fake_ip(ident)
    if d["status"] == "RUNNING" and d["ssh_up"]:
        return inst, ""
    if d["status"] in ("RUNNING", "DEPLOYING", "STARTING"):
        return None, f"ssh: connect to host {ip} port 22: Connection refused"
    return None, f"ssh: connect to host {ip} port 22: Connection timed out"


def wait_for_ssh(ctx: Ctx, alias: str) -> str | None:
    """util.WaitForSSHToBeAvailable: None when reachable, else the offending ssh line."""
    limit = int(ctx.cfg.get("probe_limit", 40))
    counter = 0
    while True:
        inst, line = ssh_check(ctx, alias)
        if inst is not None:
            return None
        satisfactory = any(
            s in line for s in ("Connection refused", "Operation timed out", "Warning:", "Connection timed out")
        )
        if counter >= limit or not satisfactory:
            return line
        counter += 1
        time.sleep(ctx.t("probe_seconds"))


# --------------------------------------------------------------------------------------------------
# exec
# --------------------------------------------------------------------------------------------------
def ssh_command_string(alias: str, command: str, connect_timeout: int) -> str:
    escaped = command.replace("'", "'\\''")
    return f"ssh -T -o ConnectTimeout={connect_timeout} -o LogLevel=ERROR {alias} '{escaped}'"


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


def _append_jsonl(path: str, rec: dict) -> None:
    line = (json.dumps(rec, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def run_remote(ctx: Ctx, inst: dict, alias: str, command: str, host: bool) -> int:
    """Run ``bash -c command`` in the sandbox, streaming output; returns what ssh would exit with."""
    import select
    import subprocess

    _append_jsonl(
        os.path.join(ctx.root, "runs.jsonl"),
        {
            "instance": inst["name"],
            "instance_id": inst["id"],
            "command": command,
            "ts": time.time(),
            "host": host,
            "brev_pid": os.getpid(),
        },
    )
    st = ctx.store.read()
    drop = peek_fault(st, "connection_drop", instance=inst["name"], match=command)
    base = sandbox_dir(ctx.root, inst["id"])
    home = os.path.join(base, "home")
    os.makedirs(home, exist_ok=True)
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=home,
        env=sandbox_env(ctx, inst, host),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    fds = {proc.stdout.fileno(): 1, proc.stderr.fileno(): 2}
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    started = time.monotonic()
    nbytes = 0
    dropped = False
    try:
        while fds:
            timeout_ms = None
            if drop is not None:
                timeout_ms = 50
            try:
                events = poller.poll(timeout_ms)
            except InterruptedError:
                continue
            for fd, _ev in events:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    poller.unregister(fd)
                    del fds[fd]
                    continue
                nbytes += len(data)
                if fds[fd] == 1:
                    if not ctx.stdout_broken:
                        try:
                            _write_fd(1, data)
                        except OSError:
                            ctx.stdout_broken = True
                else:
                    with contextlib.suppress(OSError):
                        _write_fd(2, data)
            if drop is not None and _drop_due(drop, started, nbytes):
                if _consume_drop(ctx, inst["name"], command):
                    dropped = True
                    break
                drop = None
            if ctx.stdout_broken:
                break
    finally:
        if dropped or ctx.stdout_broken:
            _kill_group(proc)
        for stream in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    rc = proc.wait()
    if dropped:
        ctx.err(f"Connection to {alias} closed by remote host.\n")
        return 255
    if rc < 0:
        cur = get_instance_by_id(ctx, inst["id"])
        if cur is None or derive(cur, ctx.now())["status"] != "RUNNING":
            ctx.err(f"Connection to {alias} closed by remote host.\n")
            return 255
        return 128 - rc
    return rc


def _drop_due(drop: dict, started: float, nbytes: int) -> bool:
    if drop.get("after_bytes") is not None and nbytes >= int(drop["after_bytes"]):
        return True
    after = drop.get("after_seconds")
    if after is None and drop.get("after_bytes") is None:
        after = 0.0
    return after is not None and time.monotonic() - started >= float(after)


def _consume_drop(ctx: Ctx, name: str, command: str) -> bool:
    with ctx.store.txn() as st:
        return take_fault(st, "connection_drop", instance=name, match=command) is not None


def _kill_group(proc: Any) -> None:
    """A dropped connection: SIGHUP the remote command's process group, then SIGKILL its shell.

    Processes that ignore SIGHUP (``nohup``) or left the group (``setsid``) keep running, as on a
    real instance; anything still attached to the session's pipes gets SIGPIPE on its next write.
    """
    try:
        os.killpg(os.getpgid(proc.pid), signal.SIGHUP)
    except OSError:
        return
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()


def ssh_run(ctx: Ctx, alias: str, command: str, host: bool, connect_timeout: int) -> int:
    """One ``ssh <alias> '<command>'``: ssh's own error line + 255, or the remote exit code."""
    ctx.record.setdefault("ssh_invocations", []).append(ssh_command_string(alias, command, connect_timeout))
    if "ssh_argv" not in ctx.record:
        ctx.record["ssh_argv"] = ctx.record["ssh_invocations"][0]
    inst, line = ssh_check(ctx, alias)
    if inst is None:
        ctx.err(line + "\n")
        return 255
    return run_remote(ctx, inst, alias, command, host)


class _ExecFailure(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _exit_err(rc: int) -> _ExecFailure:
    return _ExecFailure(traced(f"exit status {rc}", "cmd/exec.runSSHWithTimeout", "cmd/exec/exec.go", 303), rc)


def exec_one(ctx: Ctx, name: str, command: str, host: bool) -> None:
    """exec.runExecCommand (v0.6.320+ fast path, then the slow path)."""
    alias = name + "-host" if host else name
    rc = ssh_run(ctx, alias, command, host, 5)
    if rc == 0:
        return
    if ctx.documented and rc != 255:
        raise _exit_err(rc)
    ctx.err("Connection failed, checking instance status...\n")
    ssh_err = traced(f"exit status {rc}", "cmd/exec.runSSHWithTimeout", "cmd/exec/exec.go", 303)
    try:
        user = authenticate(ctx)
        f = maybe_5xx(ctx, "exec")
        if f is not None:
            raise CliError(http_error_text(int(f.get("status", 502)), f"api/organizations/{ctx.org['id']}/workspaces"))
        st = ctx.store.read()
        inst = find_instance(ctx, st, user, name)
    except CliError:
        raise _ExecFailure(
            f'ssh connection failed and could not look up instance "{name}": {ssh_err}\n'
            f"Please check your instances with: brev ls"
        ) from None
    status = derive(inst, ctx.now())["status"]
    if status == "STOPPED":
        try:
            inst = _start_instance(ctx, user, name)
        except CliError as exc:
            raise _ExecFailure(exc.message) from None
        ctx.out(f"Instance {inst['name']} is starting. \n\n")
        limit = min(600.0, float(ctx.cfg.get("start_wait_max_seconds") or 30.0))
        if not _poll_until_running(ctx, inst["id"], limit):
            raise _ExecFailure("timed out waiting for instance to reach RUNNING state after 10m0s")
        run_refresh(ctx, user)
        alias = inst["name"] + "-host" if host else inst["name"]
        line = wait_for_ssh(ctx, alias)
        if line is not None:
            raise _ExecFailure(traced("\n" + line, "cmd/util.WaitForSSHToBeAvailable", "cmd/util/ssh.go", 76))
    else:
        if status != "RUNNING":
            raise _ExecFailure(f'instance "{name}" is in state "{status}" \u2014 please check with: brev ls')
        try:
            run_refresh(ctx, user)
        except CliError as exc:
            raise _ExecFailure(exc.message) from None
        alias = inst["name"] + "-host" if host else inst["name"]
        line = wait_for_ssh(ctx, alias)
        if line is not None:
            inner = traced("\n" + line, "cmd/util.WaitForSSHToBeAvailable", "cmd/util/ssh.go", 76)
            raise _ExecFailure(f'could not connect to instance "{name}": {inner}\nPlease check with: brev ls')
    rc = ssh_run(ctx, alias, command, host, 10)
    if rc != 0:
        raise _exit_err(rc)


def cmd_exec(ctx: Ctx, v: dict, pos: list[str]) -> int:
    if not pos:
        raise CliError("requires at least 1 arg(s), only received 0")
    command = pos[-1]
    names = pos[:-1] + ctx.names_from_stdin()
    if not names:
        raise CliError("instance name required: provide as argument or pipe from another command")
    if command.startswith("@"):
        path = command[1:]
        try:
            with open(path, encoding="utf-8") as fh:
                command = fh.read()
        except OSError as exc:
            raise CliError(f"open {path}: {(exc.strerror or 'error').lower()}") from None
    if not command:
        raise CliError("command is required")
    multi = len(names) > 1
    errors: list[str] = []
    for n in names:
        if multi:
            ctx.err(f"\n=== {n} ===\n")
        try:
            exec_one(ctx, n, command, v["host"])
        except _ExecFailure as exc:
            if multi:
                ctx.err(f"Error on {n}: {exc.message}\n")
                errors.append(exc.message)
                continue
            msg = exc.message
            if msg.startswith("[error]"):
                msg = msg.split("\n: ", 1)[1] if "\n: " in msg else msg
            code = exc.code if (ctx.documented and exc.code not in (0, 1)) else 1
            raise CliError(msg, code) from None
        if ctx.stdout_piped:
            ctx.out(n + "\n")
    if errors:
        raise CliError(multierror(errors))
    return 0


# --------------------------------------------------------------------------------------------------
# copy
# --------------------------------------------------------------------------------------------------
def _split_remote(arg: str) -> tuple[str, str]:
    if ":" not in arg:
        return "", arg
    parts = arg.split(":")
    if len(parts) != 2:
        raise CliError("invalid instance path format, use instance_name:/path")
    return parts[0], parts[1]


def _remote_path(home: str, p: str) -> str:
    if p in ("", "~"):
        return home
    if p.startswith("~/"):
        return os.path.join(home, p[2:])
    if p.startswith("/"):
        return p
    return os.path.join(home, p)


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
    st = ctx.store.read()
    inst = find_instance(ctx, st, user, ws)
    if derive(inst, ctx.now())["status"] == "STOPPED":
        inst = _start_instance(ctx, user, ws)
        ctx.out(f"Instance {inst['name']} is starting. \n\n")
    limit = float(ctx.cfg.get("start_wait_max_seconds") or 30.0)
    cur = get_instance_by_id(ctx, inst["id"])
    running = cur is not None and derive(cur, ctx.now())["status"] == "RUNNING"
    if not running and not _poll_until_running(ctx, inst["id"], limit):
        raise CliError("Workspace is not running")
    run_refresh(ctx, user)
    alias = inst["name"] + "-host" if v["host"] else inst["name"]
    line = wait_for_ssh(ctx, alias)
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


def cmd_status(ctx: Ctx, _v: dict, _pos: list[str]) -> int:
    ident = os.environ.get("BREV_SIM_INSTANCE")
    if not ident:
        ctx.out("not running on a Brev instance\n")
        return 0
    cur = get_instance_by_id(ctx, ident)
    if cur is not None:
        ctx.out(f"Instance: {cur['name']}\nID: {cur['id']}\nMachine: {cur.get('instance_type', '')}\n")
    return 0


def cmd_unsimulated(name: str) -> Any:
    def handler(_ctx: Ctx, _v: dict, _pos: list[str]) -> int:
        raise CliError(f"simulator: `brev {name}` is interactive or not simulated; use exec/copy instead")

    return handler


# --------------------------------------------------------------------------------------------------
# command table
# --------------------------------------------------------------------------------------------------
def _create_flags(ctx: Ctx) -> list[Flag]:
    flags = [
        Flag("name", "n", "str", "", "Base name for the instances (or pass as first argument)"),
        Flag("type", "t", "str", "", "Comma-separated list of instance types to try"),
        Flag("count", "c", "int", 1, "Number of instances to create"),
        Flag("parallel", "p", "int", 1, "Number of parallel creation attempts"),
        Flag("detached", "d", "bool", False, "Don't wait for instances to be ready"),
        Flag("timeout", "", "int", 300, "Timeout in seconds for each instance to become ready"),
        Flag("startup-script", "s", "str", "", "Startup script to run on instance (string or @filepath)"),
        Flag("dry-run", "", "bool", False, "Show matching instance types without creating anything"),
        Flag("mode", "m", "str", "vm", "Build mode: vm (default), k8s, container, compose"),
        Flag("jupyter", "", "bool", True, "Install Jupyter (default true for vm/k8s modes)"),
        Flag("container-image", "", "str", "", "Container image URL (required for container mode)"),
        Flag("compose-file", "", "str", "", "Docker compose file path or URL (required for compose mode)"),
        Flag("launchable", "l", "str", "", "Launchable ID or URL to deploy (e.g., env-XXX or console URL)"),
        Flag("gpu-name", "g", "str", "", "Filter by GPU name (e.g., A100, H100)"),
        Flag("provider", "", "str", "", "Filter by provider/cloud (e.g., aws, gcp)"),
        Flag("min-vram", "v", "float", 0.0, "Minimum VRAM per GPU in GB"),
        Flag("min-total-vram", "", "float", 0.0, "Minimum total VRAM in GB"),
        Flag("min-capability", "", "float", 0.0, "Minimum GPU compute capability (e.g., 8.0)"),
        Flag("min-disk", "", "float", 0.0, "Minimum disk size in GB"),
        Flag("max-boot-time", "", "int", 0, "Maximum boot time in minutes"),
        Flag("stoppable", "", "bool", False, "Only use instances that can be stopped/restarted"),
        Flag("rebootable", "", "bool", False, "Only use instances that can be rebooted"),
        Flag("flex-ports", "", "bool", False, "Only use instances with configurable firewall rules"),
        Flag("sort", "", "str", "price", "Sort instance preference by: price, vram, boot-time, etc."),
        Flag("desc", "", "bool", False, "Sort in descending order"),
    ]
    if ctx.documented:
        flags += [
            Flag("gpu", "", "str", "", "GPU to provision as NAME:COUNT (e.g., L40S:1)"),
            Flag("cloud-cred-id", "", "str", "", "Cloud credential to place the instance with (see brev orgs --json)"),
            Flag("workspace-group-id", "", "str", "", "Workspace group to place the instance in"),
        ]
    return flags


def _search_flags(ctx: Ctx, cpu: bool = False) -> list[Flag]:
    del ctx
    flags = [
        Flag("provider", "p", "str", "", "Filter by provider/cloud (case-insensitive, partial match)"),
        Flag("arch", "", "str", "", "Filter by architecture (e.g., x86_64, arm64)"),
        Flag("min-vcpu", "", "int", 0, "Minimum number of vCPUs"),
        Flag("min-ram", "", "float", 0.0, "Minimum RAM in GB"),
        Flag("min-disk", "", "float", 0.0, "Minimum disk size in GB"),
        Flag("max-boot-time", "", "int", 0, "Maximum boot time in minutes"),
        Flag("stoppable", "", "bool", False, "Only show instances that can be stopped and restarted"),
        Flag("rebootable", "", "bool", False, "Only show instances that can be rebooted"),
        Flag("flex-ports", "", "bool", False, "Only show instances with configurable firewall/port rules"),
        Flag("sort", "s", "str", "price", "Sort by column (see --help for options)"),
        Flag("desc", "d", "bool", False, "Sort in descending order"),
        Flag("json", "", "bool", False, "Output results as JSON"),
    ]
    if not cpu:
        flags += [
            Flag("gpu-name", "g", "str", "", "Filter by GPU name (case-insensitive, partial match)"),
            Flag("min-vram", "v", "float", 0.0, "Minimum VRAM per GPU in GB"),
            Flag("min-total-vram", "t", "float", 0.0, "Minimum total VRAM (GPU count * VRAM) in GB"),
            Flag("min-capability", "c", "float", 0.0, "Minimum GPU compute capability (e.g., 8.0 for Ampere)"),
            Flag("wide", "w", "bool", False, "Show additional columns (RAM, ARCH)"),
        ]
    return flags


def _no_flags(_ctx: Ctx) -> list[Flag]:
    return []


CREATE_LONG = """Create GPU instances with automatic retry across multiple instance types.

This command attempts to create GPU instances, trying different instance types
until the desired number of instances are successfully created. Instance types
can be specified directly, piped from 'brev search', or auto-selected using defaults."""

CREATE_EXAMPLE = """
  # Create an instance using smart defaults (sorted by price)
  brev create my-instance

  # Create with a specific GPU type
  brev create my-instance --type g5.xlarge

  # Try multiple types in order (fallback chain)
  brev create my-instance --type g5.xlarge,g5.2xlarge,g4dn.xlarge

  # Pipe from search for automatic fallback
  brev search --gpu-name A100 | brev create my-instance
"""

EXEC_EXAMPLE = """  # Run a command on an instance
  brev exec my-instance "nvidia-smi"

  # Run a command on multiple instances
  brev exec instance1 instance2 instance3 "nvidia-smi"

  # Run a script file on the instance (@ prefix reads local file)
  brev exec my-instance @setup.sh"""

COMMANDS: dict[str, dict] = {
    "create": {
        "handler": cmd_create,
        "flags": _create_flags,
        "aliases": ["provision"],
        "use": "create [name]",
        "short": "Create GPU instances with automatic retry",
        "long": CREATE_LONG,
        "example": CREATE_EXAMPLE,
    },
    "ls": {
        "handler": cmd_ls,
        "aliases": ["list"],
        "use": "ls",
        "short": "List instances within active org",
        "flags": lambda _ctx: [
            Flag("org", "o", "str", "", "organization (will override active org)"),
            Flag("all", "", "bool", False, "show all workspaces in org"),
            Flag("json", "", "bool", False, "output as JSON"),
        ],
    },
    "delete": {
        "handler": cmd_delete,
        "flags": _no_flags,
        "use": "delete",
        "short": "Delete an instance",
        "example": "brev delete <ws_name>...\necho instance-name | brev delete",
    },
    "stop": {
        "handler": cmd_stop,
        "flags": lambda _ctx: [Flag("all", "a", "bool", False, "stop all instances")],
        "use": "stop",
        "short": "Stop an instance if it's running",
    },
    "start": {
        "handler": cmd_start,
        "use": "start",
        "short": "Start an instance if it's stopped, or create one from url",
        "flags": lambda _ctx: [
            Flag("detached", "d", "bool", False, "run the command in the background instead of blocking the shell"),
            Flag("empty", "e", "bool", False, "create an empty workspace"),
            Flag("name", "n", "str", "", "name your workspace when creating a new one"),
            Flag("setup-script", "s", "str", "", "takes a raw gist url to an env setup script"),
            Flag("setup-repo", "r", "str", "", "repo that holds env setup script"),
            Flag("setup-path", "p", "str", "", "path to env setup script"),
            Flag("org", "o", "str", "", "organization (will override active org if creating a workspace)"),
            Flag("gpu", "g", "str", "n1-highmem-4:nvidia-tesla-t4:1", "GPU instance type"),
        ],
    },
    "exec": {
        "handler": cmd_exec,
        "use": "exec [instance...] <command>",
        "short": "Execute a command on instance(s)",
        "long": "Execute a command on one or more instances non-interactively",
        "example": EXEC_EXAMPLE,
        "flags": lambda _ctx: [Flag("host", "", "bool", False, "ssh into the host machine instead of the container")],
    },
    "copy": {
        "handler": cmd_copy,
        "aliases": ["cp", "scp"],
        "use": "copy",
        "short": "Copy files to/from an instance",
        "flags": lambda _ctx: [
            Flag("host", "", "bool", False, "copy to/from the host machine instead of the container")
        ],
    },
    "login": {
        "handler": cmd_login,
        "use": "login",
        "short": "Log into brev",
        "flags": lambda _ctx: [
            Flag("token", "", "str", "", "token provided to auto login"),
            Flag("skip-browser", "", "bool", False, "print url instead of auto opening browser"),
            Flag("email", "", "str", "", "email to use for authentication"),
            Flag("auth", "", "str", "", "authentication provider to use (nvidia or legacy)"),
            Flag("api-key", "", "str", "", "API key (bak-...)", hidden=True),
            Flag("org-id", "", "str", "", "org id for the API key", hidden=True),
        ],
    },
    "logout": {"handler": cmd_logout, "flags": _no_flags, "use": "logout", "short": "Log out of brev"},
    "refresh": {
        "handler": cmd_refresh,
        "flags": _no_flags,
        "use": "refresh",
        "short": "Force a refresh to the SSH config",
    },
    "search": {
        "handler": cmd_search,
        "flags": _search_flags,
        "use": "search [gpu|cpu]",
        "short": "Search and filter GPU instance types",
    },
    "healthcheck": {
        "handler": cmd_healthcheck,
        "flags": _no_flags,
        "use": "healthcheck",
        "short": "Check backend to see if it's healthy",
    },
    "org": {"handler": cmd_org, "flags": _no_flags, "use": "org", "short": "Organization commands"},
    "set": {"handler": cmd_set, "flags": _no_flags, "use": "set", "short": "Set active org"},
    "status": {"handler": cmd_status, "flags": _no_flags, "use": "status", "short": "About this instance"},
    "shell": {
        "handler": cmd_unsimulated("shell"),
        "aliases": ["ssh"],
        "flags": lambda _ctx: [Flag("host")],
        "use": "shell",
        "short": "[beta] Open a shell in your instance",
    },
    "open": {
        "handler": cmd_unsimulated("open"),
        "flags": lambda _ctx: [Flag("host")],
        "use": "open",
        "short": "[beta] open VSCode to",
    },
    "reset": {
        "handler": cmd_unsimulated("reset"),
        "flags": _no_flags,
        "use": "reset",
        "short": "Reset an instance if it's in a weird state.",
    },
    "orgs": {
        "handler": cmd_orgs,
        "documented_only": True,
        "use": "orgs",
        "short": "List organizations with their cloud credentials",
        "flags": lambda _ctx: [Flag("json", "", "bool", False, "output as JSON")],
    },
}


def _resolve_command(ctx: Ctx, word: str) -> tuple[str, dict] | None:
    for name, spec in COMMANDS.items():
        if spec.get("documented_only") and not ctx.documented:
            continue
        if word == name or word in spec.get("aliases", []):
            return name, spec
    return None


def _unknown_command(ctx: Ctx, word: str) -> CliError:
    cands = [n for n, s in COMMANDS.items() if not s.get("documented_only") or ctx.documented]
    sugg = [n for n in sorted(cands) if _levenshtein(word, n) <= 2 or n.startswith(word)]
    msg = f'unknown command "{word}" for "brev"'
    if sugg:
        msg += "\n\nDid you mean this?\n" + "".join(f"\t{s}\n" for s in sugg)
    return CliError(msg)


def dispatch(ctx: Ctx, argv: list[str]) -> int:
    # cobra: the first non-flag word (skipping global flags and their values) names the command
    idx = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            break
        if not a.startswith("-") or a == "-":
            idx = i
            break
        if a == "--user":
            i += 1
        i += 1
    if idx is None:
        vals, pos, _ = parse_flags(argv, GLOBAL_FLAGS)
        ctx.record["command"] = ""
        if vals["version"]:
            ctx.out(f"Current Version: {ctx.version}\n")
            return 0
        ctx.out(root_help(ctx))
        return 0
    word = argv[idx]
    rest = argv[:idx] + argv[idx + 1 :]
    if word == "help":
        ctx.record["command"] = "help"
        _, pos, _ = parse_flags(rest, GLOBAL_FLAGS)
        found = _resolve_command(ctx, pos[0]) if pos else None
        ctx.out(command_help(ctx, found[0], found[1]) if found else root_help(ctx))
        return 0
    found = _resolve_command(ctx, word)
    ctx.record["command"] = found[0] if found else word
    if found is None:
        raise _unknown_command(ctx, word)
    name, spec = found
    flags = spec["flags"](ctx)
    if name == "search":
        sub = next((a for a in rest if not a.startswith("-")), None)
        if sub == "cpu":
            flags = _search_flags(ctx, cpu=True)
    vals, pos, _changed = parse_flags(rest, flags + GLOBAL_FLAGS)
    if vals["help"]:
        ctx.out(command_help(ctx, name, spec))
        return 0
    startup_auth_noise(ctx)
    return spec["handler"](ctx, vals, pos)


# --------------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------------
def _on_signal(signum: int, _frame: Any) -> None:
    raise _Terminated(128 + signum)


def main(argv: list[str] | None = None, root: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    started = time.time()
    root = root or os.environ.get(STATE_ENV)
    if not root:
        sys.stderr.write(f"fake brev: ${STATE_ENV} is not set (point it at a BrevSimulator root)\n")
        return 1
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    record = {
        "ts": started,
        "argv": argv,
        "exit_code": None,
        "home": os.environ.get("HOME", ""),
        "pid": os.getpid(),
        "duration": None,
        "stdin_read": False,
    }
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, _on_signal)
    code = 1
    ctx = None
    try:
        ctx = Ctx(root, record)
        record["profile"] = ctx.profile
        code = dispatch(ctx, argv)
    except CliError as exc:
        msg = exc.message
        with contextlib.suppress(OSError):
            _write_fd(2, (msg + "\n").encode("utf-8", "replace"))
        code = exc.code
    except _Terminated as exc:
        code = exc.code
    except Exception:  # a simulator bug: show it, but exit like the CLI does on any error
        import traceback

        with contextlib.suppress(OSError):
            _write_fd(2, ("fake brev internal error:\n" + traceback.format_exc()).encode("utf-8", "replace"))
        code = 1
    finally:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
        record["exit_code"] = code
        record["duration"] = round(time.time() - started, 4)
        with contextlib.suppress(OSError):
            _append_jsonl(os.path.join(root, "calls.jsonl"), record)
        if ctx is not None:
            ctx.store.close()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
