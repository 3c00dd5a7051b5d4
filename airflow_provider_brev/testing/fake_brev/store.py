"""Shared state of the fake ``brev``: tokens, ``config.json``/``state.json`` under a ``flock``, instance
records and their derived status, sandboxes, fault injection and sandbox processes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time

from airflow_provider_brev.testing.fake_brev.catalog import DEFAULT_CONFIG, DEFAULT_TIMINGS, SMI_NAMES
from airflow_provider_brev.testing.fake_common import read_json, write_json_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def gonum(x: Any) -> Any:
    """Format numbers the way Go's encoding/json does (integral floats without ``.0``)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return int(x)
    return x


#: Issuers the CLI has an authenticator for (KAS, Auth0); any other JWT makes it print "no oauth found for token".
KNOWN_ISSUERS = ("https://login.nvidia.com", "https://brevdev.us.auth0.com/")


def jwt_payload(token: str) -> dict | None:
    """The payload of an (unsigned-checked) JWT, or None when it does not look like one."""
    if not token or token.count(".") != 2:
        return None
    import base64

    part = token.split(".")[1]
    try:
        payload = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def make_token(
    exp_in_seconds: float = 3600, sub: str = "user", now: float | None = None, issuer: str = KNOWN_ISSUERS[0]
) -> str:
    """An unsigned JWT the simulator accepts for ``brev login --token`` until it expires (``iss`` = ``issuer``)."""
    import base64

    def enc(obj: dict) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    t = time.time() if now is None else now
    payload = {"sub": sub, "iss": issuer, "iat": int(t), "exp": int(t + exp_in_seconds), "jti": os.urandom(6).hex()}
    sig = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    return f"{enc({'alg': 'RS256', 'typ': 'JWT'})}.{enc(payload)}.{sig}"


def session_key(token: str) -> str:
    """The key of a token's server-side login session in ``state.json`` (a digest: the state holds no token)."""
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()[:16]


def new_instance_id(existing: set[str]) -> str:
    while True:
        ident = "".join(_ID_ALPHABET[b % 36] for b in os.urandom(9))
        if ident[0].isalpha() and ident not in existing:
            return ident


def fake_ip(ident: str) -> str:
    h = 0
    for c in ident:
        h = (h * 131 + ord(c)) & 0xFFFFFF
    return f"10.{(h >> 16) & 255}.{(h >> 8) & 255}.{max(2, h & 255)}"


def load_config(root: str) -> dict:
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(read_json(os.path.join(root, "config.json"), {}) or {})
    timings = dict(DEFAULT_TIMINGS)
    timings.update(cfg.get("timings") or {})
    cfg["timings"] = timings
    return cfg


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
        st = read_json(self.path, None)
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
    """Drop instances that finished deleting; what they were billed stays in ``state["ledger"]``."""
    gone = [i for i in state["instances"] if derive(i, now)["gone"]]
    if gone:
        state.setdefault("ledger", []).extend(billing_view(i, now) for i in gone)
        state["instances"] = [i for i in state["instances"] if not derive(i, now)["gone"]]


def record_phase(inst: dict, phase: str, now: float, done: float | None = None) -> None:
    """Remember when an instance entered ``phase`` (deploy, stop, start, delete) and, for a stop or a delete, when
    that transition completes (STOPPED, gone): the billing history."""
    history = inst.setdefault("history", [["deploy", inst.get("created_at", now), None]])
    history.append([phase, now, done])


def billing_view(inst: dict, now: float) -> dict:
    """Seconds an instance was billed as a running machine and as a stopped one (disk only), up to ``now``: running
    from a deploy or start until its stop completed (STOPPING is billed) or its deletion ended; stopped from then
    until the next start or delete."""
    history = inst.get("history") or [["deploy", inst.get("created_at", now), None]]
    running = stopped = 0.0
    for (phase, since, done), following in zip(history, [*history[1:], ["now", now, None]], strict=True):
        until = following[1]
        if phase in ("deploy", "start"):
            running += max(0.0, until - since)
        elif phase == "stop":
            stopped_at = since if done is None else done
            running += max(0.0, min(stopped_at, until) - since)
            stopped += max(0.0, until - max(stopped_at, since))
        elif phase == "delete":
            running += max(0.0, min(until if done is None else done, until) - since)
    return {
        "id": inst["id"],
        "name": inst["name"],
        "instance_type": inst.get("instance_type", ""),
        "running_seconds": round(running, 3),
        "stopped_seconds": round(stopped, 3),
    }


def derive(inst: dict, now: float) -> dict:
    """Status fields of an instance at ``now``, from its phase: deploy (DEPLOYING -> RUNNING or FAILURE),
    stop (STOPPING -> STOPPED), start (STARTING -> RUNNING), delete (DELETING -> gone)."""
    ph = inst["phase"]
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
    raise ValueError(f"unknown instance phase {ph!r}")


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


def _fault_matches(f: dict, kind: str, **attrs: Any) -> bool:
    """A fault attribute left unset matches anything, except ``stage`` (a ``stage="post"`` 5xx hits only the
    POST); ``match`` is a substring of the command."""
    if f.get("kind") != kind or (f.get("stage") or None) != attrs.pop("stage", None):
        return False
    for key, val in attrs.items():
        want = f.get(key)
        if want is not None and val is not None and (want not in val if key == "match" else want != val):
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


def marked_pids(*markers: tuple[str, str]) -> list[int]:
    """PIDs (not this process's) whose environment holds any ``key=value`` of ``markers`` (scans /proc/*/environ;
    a zombie's environment reads empty, so only live processes count)."""
    needles = {f"{key}={value}".encode() for key, value in markers}
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
        if needles.intersection(env.split(b"\0")):
            pids.append(pid)
    return pids


def kill_marked(*markers: tuple[str, str]) -> int:
    """SIGKILL every process :func:`marked_pids` finds; repeats a few rounds to catch forks in flight. Returns how
    many processes were killed."""
    killed: set[int] = set()
    for _ in range(5):
        pids = marked_pids(*markers)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.01)
    return len(killed)
