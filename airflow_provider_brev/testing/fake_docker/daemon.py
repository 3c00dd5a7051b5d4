"""One fake ``docker`` invocation and the per-instance "daemon": images, registry logins, pulls, container
records, ``--format`` templates."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_docker.client import (
    CALLS_FILE,
    DAEMON_DOWN,
    DEFAULT_DOCKER_CONFIG,
    DockerError,
    Ref,
    _sha,
    parse_ref,
    redact_argv,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


# ------------------------------------------------------------------------------------------ context
class Docker:
    """One docker invocation: simulator root, instance, daemon state and the client's config dir."""

    def __init__(self, root: str | None, config_dir: str | None = None) -> None:
        self.root = root
        self.instance_id = os.environ.get("BREV_SIM_INSTANCE", "")
        self.instance_name = os.environ.get("BREV_SIM_INSTANCE_NAME", "")
        self.cfg = _c.load_section(root, "docker", DEFAULT_DOCKER_CONFIG)
        self.tao_cfg = _c.load_section(root, "tao", {})
        home = os.environ.get("HOME") or os.path.expanduser("~")
        self.config_dir = config_dir or os.environ.get("DOCKER_CONFIG") or os.path.join(home, ".docker")
        self.record: dict[str, Any] = {}
        self.call_id = os.urandom(8).hex()
        self.started = time.time()
        self.argv: list[str] = []
        self.sub = ""
        self.env_limit: int | None = None
        self.inst_dir = os.path.join(root, "instances", self.instance_id) if root and self.instance_id else ""
        self.ddir = os.path.join(self.inst_dir, "docker") if self.inst_dir else ""

    def write_record(self, phase: str, code: int | None) -> None:
        """Append this invocation to ``<root>/docker_calls.jsonl`` (secrets redacted)."""
        if not self.root or not os.path.isdir(self.root):
            return
        limit = len(self.argv) if self.env_limit is None else self.env_limit
        red, inline, password = redact_argv(self.argv, self.sub, limit)
        rec: dict[str, Any] = {
            "call_id": self.call_id,
            "phase": phase,
            "ts": self.started,
            "duration": round(time.time() - self.started, 4),
            "instance_id": self.instance_id,
            "instance": self.instance_name,
            "subcommand": self.sub,
            "argv": red,
            "inline_env_values": inline,
            "password_on_argv": password,
            "exit_code": code,
        }
        for key, val in self.record.items():
            rec.setdefault(key, val)
        with contextlib.suppress(OSError):
            _c.append_jsonl(os.path.join(self.root, CALLS_FILE), rec)

    # daemon --------------------------------------------------------------------------------------
    def require_daemon(self, prefix: str = "", see: str | None = None) -> None:
        if not self.ddir or self.cfg.get("daemon_down"):
            raise DockerError(prefix + DAEMON_DOWN, 125 if prefix else 1, see)
        os.makedirs(os.path.join(self.ddir, "containers"), exist_ok=True)

    def lock(self) -> Any:
        return _c.flocked(os.path.join(self.ddir, "lock"))

    def meta(self) -> dict:
        return _c.read_json(os.path.join(self.inst_dir, "meta.json"), {}) or {}

    # images --------------------------------------------------------------------------------------
    @property
    def images_path(self) -> str:
        return os.path.join(self.ddir, "images.json")

    def images(self) -> dict[str, dict]:
        return _c.read_json(self.images_path, {}) or {}

    def find_image(self, ref: str) -> tuple[str, dict] | None:
        imgs = self.images()
        try:
            r = parse_ref(ref)
            if r.canonical in imgs:
                return r.canonical, imgs[r.canonical]
        except DockerError:
            pass
        want = ref[len("sha256:") :] if ref.startswith("sha256:") else ref
        if len(want) >= 4 and re.fullmatch(r"[a-f0-9]+", want):
            for key, img in imgs.items():
                if img["id"].startswith(want):
                    return key, img
        return None

    # auth ----------------------------------------------------------------------------------------
    @property
    def client_config_path(self) -> str:
        return os.path.join(self.config_dir, "config.json")

    def logged_in(self, registry: str) -> bool:
        conf = _c.read_json(self.client_config_path, {}) or {}
        return registry in (conf.get("auths") or {})

    def needs_auth(self, registry: str) -> bool:
        if registry not in (self.cfg.get("auth_registries") or []):
            return False
        if registry == "nvcr.io" and self.cfg.get("nvcr_anonymous_pull"):
            return False
        return not self.logged_in(registry)

    def missing(self, r: Ref) -> bool:
        for m in self.cfg.get("missing_images") or []:
            try:
                mr = parse_ref(m)
            except DockerError:
                continue
            explicit_tag = ":" in m.rsplit("/", 1)[-1] or "@" in m
            if mr.canonical == r.canonical or (not explicit_tag and mr.registry == r.registry and mr.path == r.path):
                return True
        return False

    def fail_pull_fires(self, r: Ref) -> bool:
        for section, cfg in (("docker", self.cfg), ("tao", self.tao_cfg)):
            val = cfg.get("fail_pull")
            if isinstance(val, list | tuple):
                if any(v in (r.canonical, r.familiar, r.repo) for v in val):
                    return True
                continue
            if _c.consume_knob(self.root, section, "fail_pull", "pull"):
                return True
        return False

    def pull(self, ref: str, write: Callable[[str], None], quiet: bool = False) -> tuple[str, bool]:
        """Pull ``ref`` (auth, missing, failure knobs, simulated time); returns (canonical, downloaded)."""
        r = parse_ref(ref)
        head = f"https://{r.registry if r.registry != 'docker.io' else 'registry-1.docker.io'}/v2/"
        manifest_url = f"{head}{r.path}/manifests/{r.digest or r.tag}"
        if self.fail_pull_fires(r):
            raise DockerError(
                f'Error response from daemon: Get "{head}": net/http: request canceled while waiting for connection '
                "(Client.Timeout exceeded while awaiting headers)"
            )
        if self.needs_auth(r.registry):
            raise DockerError(
                f'Error response from daemon: Head "{manifest_url}": unauthorized: authentication required'
            )
        if self.missing(r):
            raise DockerError(
                f"Error response from daemon: manifest for {r.familiar} not found: manifest unknown: manifest unknown"
            )
        digest = r.digest or "sha256:" + _sha("digest:" + r.canonical)
        with self.lock():
            present = r.canonical in self.images()
        if not quiet:
            write(f"{r.digest or r.tag}: Pulling from {r.path}\n")
        if not present:
            layers = [_sha(f"layer{i}:{r.canonical}")[:12] for i in range(3)]
            if not quiet:
                for layer in layers:
                    write(f"{layer}: Pulling fs layer\n")
            seconds = float(self.cfg.get("pull_seconds") or 0.0)
            if seconds > 0:
                time.sleep(seconds)
            if not quiet:
                for layer in layers:
                    write(f"{layer}: Pull complete\n")
        now = time.time()
        with self.lock():
            imgs = self.images()
            img = imgs.get(r.canonical)
            if img is None:
                size = 2_000_000_000 + int(_sha("size:" + r.canonical)[:8], 16) % 20_000_000_000
                img = {
                    "ref": r.canonical,
                    "repo": r.repo,
                    "tag": r.tag or "<none>",
                    "id": _sha("image:" + r.canonical),
                    "digest": digest,
                    "size": size,
                    "created": now - 14 * 86400,
                    "first_pulled": now,
                    "pull_count": 0,
                    "downloads": 0,
                }
            img["pull_count"] = int(img.get("pull_count", 0)) + 1
            img["last_pulled"] = now
            if not present:
                img["downloads"] = int(img.get("downloads", 0)) + 1
            imgs[r.canonical] = img
            _c.write_json_atomic(self.images_path, imgs)
        if not quiet:
            write(f"Digest: {digest}\n")
            status = "Image is up to date for" if present else "Downloaded newer image for"
            write(f"Status: {status} {r.familiar}\n")
        write(f"{r.familiar}\n")
        pulled = self.record.setdefault("pulled", [])
        pulled.append(r.canonical)
        return r.canonical, not present

    # containers ----------------------------------------------------------------------------------
    def cdir(self, cid: str) -> str:
        return os.path.join(self.ddir, "containers", cid)

    def _read_container(self, cid: str) -> dict | None:
        rec = _c.read_json(os.path.join(self.cdir(cid), "config.json"), None)
        return rec if isinstance(rec, dict) else None

    def update_container(self, cid: str, fn: Callable[[dict], None]) -> dict | None:
        with self.lock():
            rec = self._read_container(cid)
            if rec is None:
                return None
            fn(rec)
            with contextlib.suppress(OSError):
                _c.write_json_atomic(os.path.join(self.cdir(cid), "config.json"), rec)
            return rec

    def remove_container(self, cid: str) -> None:
        shutil.rmtree(self.cdir(cid), ignore_errors=True)

    def refresh(self, rec: dict) -> dict | None:
        """Mark a container whose shim and process vanished (instance stopped, SIGKILL) as exited."""
        st = rec["State"]
        if st["Status"] == "running" and not _c.pid_alive(rec.get("ShimPid")) and not _c.pid_alive(st.get("Pid")):

            def apply(r: dict) -> None:
                s = r["State"]
                if s["Status"] == "running":
                    s.update(Status="exited", Running=False, ExitCode=137, FinishedAt=time.time())

            rec = self.update_container(rec["Id"], apply) or rec
            if rec.get("AutoRemove"):
                self.remove_container(rec["Id"])
                return None
        return rec

    def containers(self) -> list[dict]:
        base = os.path.join(self.ddir, "containers")
        try:
            ids = os.listdir(base)
        except OSError:
            return []
        recs = []
        for cid in ids:
            rec = self._read_container(cid)
            if rec is not None:
                rec = self.refresh(rec)
                if rec is not None:
                    recs.append(rec)
        recs.sort(key=lambda r: r.get("Created", 0), reverse=True)
        return recs

    def find_container(self, ident: str) -> dict | None:
        recs = self.containers()
        for r in recs:
            if r["Name"] == ident.lstrip("/") or r["Id"] == ident:
                return r
        matches = [r for r in recs if len(ident) >= 1 and r["Id"].startswith(ident)]
        return matches[0] if len(matches) == 1 else None


# ---------------------------------------------------------------------------------------- templates
def _go_value(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "<nil>"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{_go_value(x)}" for k, x in v.items()) + "]"
    if isinstance(v, list):
        return "[" + " ".join(_go_value(x) for x in v) + "]"
    return str(v)


_TMPL_RE = re.compile(r"\{\{\s*(json\s+)?\.([\w.]*)\s*\}\}")


def render(template: str, obj: dict) -> str:
    """A tiny subset of Go templates: ``{{.A.B}}``, ``{{json .A}}``, ``{{json .}}``, ``\\t``/``\\n``."""

    def sub(m: re.Match[str]) -> str:
        cur: Any = obj
        for part in [p for p in m.group(2).split(".") if p]:
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            else:
                return "<no value>"
        if m.group(1):
            return json.dumps(cur, separators=(",", ":"))
        return _go_value(cur)

    return _TMPL_RE.sub(sub, template.replace("\\t", "\t").replace("\\n", "\n"))


def table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i] + 3) if i < len(r) - 1 else c for i, c in enumerate(r)]
        lines.append("".join(cells).rstrip() + "\n")
    return "".join(lines)
