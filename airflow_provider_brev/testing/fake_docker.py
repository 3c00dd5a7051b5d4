"""A fake ``docker`` client + daemon for the Brev simulator's instance sandboxes (stdlib only).

``BrevSimulator.install()`` puts a wrapper for this module at ``<root>/tools/bin/docker``, which is on
the PATH of every command ``brev exec`` runs. The "daemon" state is per instance, under
``<root>/instances/<id>/docker/`` (``images.json``, ``containers/<id>/``, ``volumes/``); login state is
the client's ``~/.docker/config.json`` (``$DOCKER_CONFIG`` / ``--config`` honoured) and never holds a key.

Containers are real child processes. ``docker run`` maps container paths to host paths through the
``-v``/``--mount`` binds: every command argument, ``-w`` and ``-e`` value that names a path under a
mounted container path (at a word boundary, also inside ``bash -c`` scripts and ``key=/path``
overrides) is rewritten to the host path, and the mount table is handed to the fake TAO entrypoints
(``$BREV_SIM_CONTAINER_MOUNTS``) so paths inside spec files resolve too. Paths outside every mount land
in the container's private root (``containers/<id>/rootfs``) and vanish with ``--rm``, like in Docker.
The container process runs under a detached "shim" (own session) writing to log files; the client
streams them and proxies signals (``--sig-proxy``), so ``docker stop``/``kill``/``rm -f``/``ps``/``logs``
/``wait``/``inspect`` behave as with a daemon, and killing the client does not kill the container.

Every invocation is appended to ``<root>/docker_calls.jsonl`` (a ``start`` and an ``end`` line with the
same ``call_id``), with ``-e K=V`` values and ``-p/--password`` values redacted; the flags
``inline_env_values`` and ``password_on_argv`` say whether any was given.

Knobs (``BrevSimulator.set_docker(...)``, stored under ``config.json["docker"]``): see
:data:`DEFAULT_DOCKER_CONFIG`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import time

try:
    from airflow_provider_brev.testing import fake_common as _c
except ImportError:  # started as a sandbox tool: testing/ is on sys.path
    import fake_common as _c  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

DOCKER_VERSION = "27.3.1"
DOCKER_BUILD = "ce12230"
CALLS_FILE = "docker_calls.jsonl"
DAEMON_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
REDACTED = "<redacted>"
CONTAINER_PATH_DIRS = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: knobs under ``config.json["docker"]``
DEFAULT_DOCKER_CONFIG: dict = {
    # `docker info` (and every daemon command) fails with "Cannot connect to the Docker daemon ..."
    "daemon_down": False,
    # NGC keys `docker login nvcr.io` rejects (any other non-empty key is valid)
    "revoked_ngc_keys": [],
    # registries that need a prior `docker login` to pull / `manifest inspect`
    "auth_registries": ["nvcr.io"],
    # nvcr.io pulls work without login
    "nvcr_anonymous_pull": False,
    # image refs (or repositories, any tag) whose manifest does not exist
    "missing_images": [],
    # simulated download time of a pull that fetches layers
    "pull_seconds": 0.0,
    # pulls fail with a registry timeout: True (always), an int (the next N pulls), or a list of refs
    "fail_pull": False,
}


class DockerError(Exception):
    """An error the docker CLI prints on stderr before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1, see: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.see = see


# ------------------------------------------------------------------------------------------- output
def _emit(stream: Any, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        # the reader went away (`docker ps | head -1`): silence the stream like a Go program would
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)


def out(text: str) -> None:
    _emit(sys.stdout, text)


def err(text: str) -> None:
    _emit(sys.stderr, text)


def _write_fd(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return False
        view = view[n:]
    return True


# ---------------------------------------------------------------------------------- flag parsing
class Spec:
    __slots__ = ("kind", "name")

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind  # "bool" | "str" | "list"


def _specs(table: dict[str, str]) -> tuple[dict[str, Spec], dict[str, Spec]]:
    """``{"name|n": "bool"}`` -> (long map, short map); ``"net=network"`` style aliases via ``alias``."""
    longs: dict[str, Spec] = {}
    shorts: dict[str, Spec] = {}
    for key, kind in table.items():
        names = key.split("|")
        target = names[0]
        if kind.startswith("alias:"):
            target, kind = kind.split(":", 2)[1], kind.split(":", 2)[2]
        spec = Spec(target, kind)
        for n in names:
            if len(n) == 1:
                shorts[n] = spec
            else:
                longs[n] = spec
    return longs, shorts


def parse_flags(
    args: list[str], table: dict[str, str], see: str, interspersed: bool = True
) -> tuple[dict[str, Any], list[str], int]:
    """pflag-like parsing; returns (options, positionals, index of the first positional that stopped
    parsing (or len(args)))."""
    longs, shorts = _specs(table)
    opts: dict[str, Any] = {}
    pos: list[str] = []
    stop = len(args)

    def put(spec: Spec, value: Any) -> None:
        if spec.kind == "list":
            opts.setdefault(spec.name, []).append(value)
        else:
            opts[spec.name] = value

    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos.extend(args[i + 1 :])
            stop = i + 1
            break
        if a.startswith("--") and len(a) > 2:
            name, eq, val = a[2:].partition("=")
            spec = longs.get(name)
            if spec is None:
                raise DockerError(f"unknown flag: --{name}", 125, see)
            if spec.kind == "bool":
                if eq:
                    if val.lower() not in ("true", "false", "1", "0", "t", "f"):
                        raise DockerError(
                            f'invalid argument "{val}" for "--{name}" flag: strconv.ParseBool: parsing "{val}": invalid syntax',
                            125,
                            see,
                        )
                    put(spec, val.lower() in ("true", "1", "t"))
                else:
                    put(spec, True)
            elif eq:
                put(spec, val)
            else:
                if i + 1 >= len(args):
                    raise DockerError(f"flag needs an argument: --{name}", 125, see)
                put(spec, args[i + 1])
                i += 1
        elif a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                ch = a[j]
                spec = shorts.get(ch)
                if spec is None:
                    raise DockerError(f"unknown shorthand flag: '{ch}' in {a}", 125, see)
                if spec.kind == "bool":
                    put(spec, True)
                    j += 1
                    continue
                rest = a[j + 1 :]
                if rest:
                    put(spec, rest[1:] if rest.startswith("=") else rest)
                else:
                    if i + 1 >= len(args):
                        raise DockerError(f"flag needs an argument: '{ch}' in -{ch}", 125, see)
                    put(spec, args[i + 1])
                    i += 1
                break
        else:
            if not interspersed:
                pos.extend(args[i:])
                stop = i
                break
            pos.append(a)
        i += 1
    return opts, pos, stop


def redact_argv(argv: list[str], sub: str, env_limit: int) -> tuple[list[str], bool, bool]:
    """Redact ``-e K=V`` values (before ``env_limit``) and ``login -p`` passwords.

    Returns (redacted argv, any inline env value, password on argv)."""
    out_argv = list(argv)
    inline = False
    password = False

    def red_env(value: str) -> str:
        nonlocal inline
        if "=" in value:
            inline = True
            return value.split("=", 1)[0] + "=" + REDACTED
        return value

    i = 0
    while i < len(argv):
        a = argv[i]
        if i < env_limit and sub in ("run", "create", "exec", "container"):
            if a in ("-e", "--env") and i + 1 < len(argv):
                out_argv[i + 1] = red_env(argv[i + 1])
                i += 2
                continue
            if a.startswith("--env="):
                out_argv[i] = "--env=" + red_env(a[len("--env=") :])
            elif a.startswith("-e") and not a.startswith("--") and len(a) > 2:
                body = a[2:]
                pre = "-e="[: 3 if body.startswith("=") else 2]
                out_argv[i] = pre + red_env(body[1:] if body.startswith("=") else body)
        if sub == "login":
            if a in ("-p", "--password") and i + 1 < len(argv):
                password = True
                out_argv[i + 1] = REDACTED
                i += 2
                continue
            if a.startswith("--password="):
                password = True
                out_argv[i] = "--password=" + REDACTED
            elif a.startswith("-p") and not a.startswith("--") and len(a) > 2:
                password = True
                out_argv[i] = "-p" + REDACTED
        i += 1
    return out_argv, inline, password


# ------------------------------------------------------------------------------------- references
_REF_RE = re.compile(
    r"^(?:(?P<host>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?(?P<path>[a-zA-Z0-9._/-]+)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


class Ref:
    __slots__ = ("digest", "path", "registry", "tag")

    def __init__(self, registry: str, path: str, tag: str, digest: str) -> None:
        self.registry = registry
        self.path = path
        self.tag = tag
        self.digest = digest

    @property
    def canonical(self) -> str:
        base = f"{self.registry}/{self.path}"
        return f"{base}@{self.digest}" if self.digest else f"{base}:{self.tag}"

    @property
    def repo(self) -> str:
        """Familiar repository name (``ubuntu``, ``nvcr.io/nvidia/tao/tao-toolkit``)."""
        if self.registry == "docker.io":
            return self.path[len("library/") :] if self.path.startswith("library/") else self.path
        return f"{self.registry}/{self.path}"

    @property
    def familiar(self) -> str:
        return f"{self.repo}@{self.digest}" if self.digest else f"{self.repo}:{self.tag}"


def parse_ref(ref: str) -> Ref:
    name = ref
    digest = ""
    if "@" in name:
        name, digest = name.split("@", 1)
    tag = ""
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = "docker.io", (name if "/" in name else f"library/{name}")
    check = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    if not ref or not _REF_RE.match(check) or "//" in path or path.endswith("/") or (digest and len(digest) != 71):
        raise DockerError("invalid reference format")
    if path != path.lower():
        raise DockerError(f"invalid reference format: repository name ({path}) must be lowercase")
    return Ref(registry, path, tag or ("" if digest else "latest"), digest)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def registry_key(server: str) -> str:
    s = re.sub(r"^https?://", "", server.strip()).split("/", 1)[0]
    if s in ("", "index.docker.io", "registry-1.docker.io", "docker.io"):
        return "docker.io"
    return s


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


def human_size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.3g}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1000.0
    return f"{n}TB"


# ------------------------------------------------------------------------------------------ commands
def cmd_version(d: Docker, args: list[str]) -> int:
    opts, _pos, _ = parse_flags(args, {"format|f": "str", "help": "bool"}, "See 'docker version --help'.")
    client = {
        "Version": DOCKER_VERSION,
        "ApiVersion": "1.47",
        "GitCommit": DOCKER_BUILD,
        "Os": "linux",
        "Arch": "amd64",
    }
    server = {"Version": DOCKER_VERSION, "ApiVersion": "1.47", "MinAPIVersion": "1.24", "Os": "linux", "Arch": "amd64"}
    if opts.get("format"):
        down = not d.ddir or d.cfg.get("daemon_down")
        out(render(opts["format"], {"Client": client, "Server": None if down else server}) + "\n")
        if down:
            raise DockerError(DAEMON_DOWN)
        return 0
    out(
        "Client: Docker Engine - Community\n"
        f" Version:           {DOCKER_VERSION}\n API version:       1.47\n Go version:        go1.22.7\n"
        f" Git commit:        {DOCKER_BUILD}\n OS/Arch:           linux/amd64\n Context:           default\n\n"
    )
    d.require_daemon()
    out(
        "Server: Docker Engine - Community\n Engine:\n"
        f"  Version:          {DOCKER_VERSION}\n  API version:      1.47 (minimum version 1.24)\n"
        "  OS/Arch:          linux/amd64\n containerd:\n  Version:          1.7.22\n"
        " runc:\n  Version:          1.1.14\n"
    )
    return 0


def cmd_info(d: Docker, args: list[str]) -> int:
    opts, _pos, _ = parse_flags(args, {"format|f": "str", "help": "bool"}, "See 'docker info --help'.")
    down = not d.ddir or d.cfg.get("daemon_down")
    if opts.get("format"):
        if down:
            raise DockerError(DAEMON_DOWN)
    else:
        out(
            "Client: Docker Engine - Community\n"
            f" Version:    {DOCKER_VERSION}\n Context:    default\n Debug Mode: false\n"
            " Plugins:\n  buildx: Docker Buildx (Docker Inc.)\n    Version:  v0.17.1\n"
            "  compose: Docker Compose (Docker Inc.)\n    Version:  v2.29.7\n\n"
        )
        if down:
            out("Server:\n")
            raise DockerError(DAEMON_DOWN)
    d.require_daemon()
    recs = d.containers()
    running = sum(1 for r in recs if r["State"]["Running"])
    meta = d.meta()
    info = {
        "ID": "SIM" + d.instance_id.upper(),
        "Containers": len(recs),
        "ContainersRunning": running,
        "ContainersPaused": 0,
        "ContainersStopped": len(recs) - running,
        "Images": len(d.images()),
        "ServerVersion": DOCKER_VERSION,
        "Driver": "overlay2",
        "Runtimes": {"io.containerd.runc.v2": {}, "nvidia": {"path": "nvidia-container-runtime"}, "runc": {}},
        "DefaultRuntime": "runc",
        "OperatingSystem": "Ubuntu 22.04.5 LTS",
        "OSType": "linux",
        "Architecture": "x86_64",
        "NCPU": os.cpu_count() or 1,
        "Name": d.instance_name or "brev-sim",
        "DockerRootDir": "/var/lib/docker",
        "GPUs": int(meta.get("gpu_count") or 0),
    }
    if opts.get("format"):
        out(render(opts["format"], info) + "\n")
        return 0
    out(
        "Server:\n"
        f" Containers: {info['Containers']}\n  Running: {running}\n  Paused: 0\n  Stopped: {info['ContainersStopped']}\n"
        f" Images: {info['Images']}\n Server Version: {DOCKER_VERSION}\n Storage Driver: overlay2\n"
        "  Backing Filesystem: extfs\n Logging Driver: json-file\n Cgroup Driver: systemd\n Cgroup Version: 2\n"
        " Runtimes: io.containerd.runc.v2 nvidia runc\n Default Runtime: runc\n"
        " Kernel Version: 6.8.0-1015-aws\n Operating System: Ubuntu 22.04.5 LTS\n OSType: linux\n"
        f" Architecture: x86_64\n CPUs: {info['NCPU']}\n Name: {info['Name']}\n ID: {info['ID']}\n"
        " Docker Root Dir: /var/lib/docker\n Debug Mode: false\n Experimental: false\n Live Restore Enabled: false\n\n"
    )
    return 0


def cmd_login(d: Docker, args: list[str]) -> int:
    see = "See 'docker login --help'."
    opts, pos, _ = parse_flags(
        args, {"username|u": "str", "password|p": "str", "password-stdin": "bool", "help": "bool"}, see
    )
    if len(pos) > 1:
        raise DockerError(
            f'"docker login" requires at most 1 argument.\n{see}\n\nUsage:  docker login [OPTIONS] [SERVER]\n\nLog in to a registry',
            1,
        )
    server = pos[0] if pos else "https://index.docker.io/v1/"
    registry = registry_key(server)
    user = opts.get("username", "")
    password = opts.get("password")
    d.record.update(registry=registry, username=user, password_stdin=bool(opts.get("password-stdin")))
    if password is not None and opts.get("password-stdin"):
        raise DockerError("--password and --password-stdin are mutually exclusive")
    if opts.get("password-stdin"):
        if not user:
            raise DockerError("Must provide --username with --password-stdin")
        data = sys.stdin.read() if sys.stdin is not None else ""
        d.record["stdin_read"] = True
        password = data[:-1] if data.endswith("\n") else data
        password = password[:-1] if password.endswith("\r") else password
    elif password is not None:
        err("WARNING! Using --password via the CLI is insecure. Use --password-stdin.\n")
    if not user or not password:
        raise DockerError("Error: Cannot perform an interactive login from a non TTY device")
    d.require_daemon()
    host = "registry-1.docker.io" if registry == "docker.io" else registry
    unauthorized = f'Error response from daemon: Get "https://{host}/v2/": unauthorized: authentication required'
    if registry in (d.cfg.get("auth_registries") or []):
        if registry == "nvcr.io" and user != "$oauthtoken":
            d.record["login_error"] = "username"
            raise DockerError(unauthorized)
        if password in (d.cfg.get("revoked_ngc_keys") or []):
            d.record["login_error"] = "revoked_key"
            raise DockerError(unauthorized)
    os.makedirs(d.config_dir, exist_ok=True)
    conf = _c.read_json(d.client_config_path, {}) or {}
    conf.setdefault("auths", {})[registry] = {"username": user, "note": "fake docker: no credential stored"}
    _c.write_json_atomic(d.client_config_path, conf, indent=1)
    with contextlib.suppress(OSError):
        os.chmod(d.client_config_path, 0o600)
    d.record["login_ok"] = True
    err(
        f"WARNING! Your password will be stored unencrypted in {d.client_config_path}.\n"
        "Configure a credential helper to remove this warning. See\n"
        "https://docs.docker.com/engine/reference/commandline/login/#credential-stores\n\n"
    )
    out("Login Succeeded\n")
    return 0


def cmd_logout(d: Docker, args: list[str]) -> int:
    _opts, pos, _ = parse_flags(args, {"help": "bool"}, "See 'docker logout --help'.")
    registry = registry_key(pos[0] if pos else "docker.io")
    conf = _c.read_json(d.client_config_path, {}) or {}
    auths = conf.get("auths") or {}
    if registry not in auths:
        out(f"Not logged in to {registry}\n")
        return 0
    out(f"Removing login credentials for {registry}\n")
    del auths[registry]
    conf["auths"] = auths
    _c.write_json_atomic(d.client_config_path, conf, indent=1)
    return 0


def cmd_pull(d: Docker, args: list[str]) -> int:
    see = "See 'docker pull --help'."
    opts, pos, _ = parse_flags(
        args,
        {"quiet|q": "bool", "all-tags|a": "bool", "platform": "str", "disable-content-trust": "bool", "help": "bool"},
        see,
    )
    if len(pos) != 1:
        raise DockerError(
            f'"docker pull" requires exactly 1 argument.\n{see}\n\nUsage:  docker pull [OPTIONS] NAME[:TAG|@DIGEST]\n\nDownload an image from a registry',
            1,
        )
    d.record["image"] = pos[0]
    d.require_daemon()
    d.pull(pos[0], out, quiet=bool(opts.get("quiet")))
    return 0


def cmd_manifest(d: Docker, args: list[str]) -> int:
    see = "See 'docker manifest inspect --help'."
    if not args or args[0] != "inspect":
        raise DockerError("fake docker: only `docker manifest inspect` is simulated", 1)
    opts, pos, _ = parse_flags(args[1:], {"verbose|v": "bool", "insecure": "bool", "help": "bool"}, see)
    if len(pos) != 1:
        raise DockerError(f'"docker manifest inspect" requires 1 argument.\n{see}', 1)
    r = parse_ref(pos[0])
    d.record["image"] = pos[0]
    if d.needs_auth(r.registry):
        d.record["auth_ok"] = False
        raise DockerError(
            "errors:\ndenied: requested access to the resource is denied\nunauthorized: authentication required"
        )
    if d.missing(r):
        d.record["auth_ok"] = True
        raise DockerError(f"no such manifest: {r.canonical}")
    d.record["auth_ok"] = True
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 17834,
            "digest": "sha256:" + _sha("image:" + r.canonical),
        },
        "layers": [
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": 300_000_000 + i,
                "digest": "sha256:" + _sha(f"layer{i}:{r.canonical}"),
            }
            for i in range(3)
        ],
    }
    if opts.get("verbose"):
        manifest = {
            "Ref": r.canonical,
            "Descriptor": {"digest": "sha256:" + _sha("digest:" + r.canonical)},
            "SchemaV2Manifest": manifest,
        }
    out(json.dumps(manifest, indent=1) + "\n")
    return 0


def _image_row(img: dict) -> dict:
    return {
        "Repository": img["repo"],
        "Tag": img["tag"],
        "ID": img["id"][:12],
        "Digest": img.get("digest", ""),
        "CreatedSince": _c.human_duration(time.time() - img["created"]) + " ago",
        "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(img["created"])),
        "Size": human_size(img["size"]),
    }


def cmd_images(d: Docker, args: list[str]) -> int:
    see = "See 'docker images --help'."
    opts, pos, _ = parse_flags(
        args,
        {
            "quiet|q": "bool",
            "all|a": "bool",
            "format": "str",
            "no-trunc": "bool",
            "digests": "bool",
            "filter|f": "list",
            "help": "bool",
        },
        see,
    )
    d.require_daemon()
    imgs = sorted(d.images().values(), key=lambda i: -i.get("first_pulled", 0))
    if pos:
        want = pos[0]
        imgs = [i for i in imgs if want in (i["repo"], f"{i['repo']}:{i['tag']}")]
    rows = [_image_row(i) for i in imgs]
    if opts.get("quiet"):
        out("".join(r["ID"] + "\n" for r in rows))
        return 0
    fmt = opts.get("format")
    if fmt:
        tbl = fmt.startswith("table")
        fmt = fmt[len("table") :].lstrip() if tbl else fmt
        out("".join(render(fmt, r) + "\n" for r in rows))
        return 0
    data = [["REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE"]]
    data += [[r["Repository"], r["Tag"], r["ID"], r["CreatedSince"], r["Size"]] for r in rows]
    out(table(data))
    return 0


def _image_inspect_obj(img: dict) -> dict:
    return {
        "Id": "sha256:" + img["id"],
        "RepoTags": [f"{img['repo']}:{img['tag']}"],
        "RepoDigests": [f"{img['repo']}@{img.get('digest', '')}"],
        "Created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(img["created"])),
        "Size": img["size"],
        "Os": "linux",
        "Architecture": "amd64",
        "Config": {"Env": ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]},
    }


def cmd_image(d: Docker, args: list[str]) -> int:
    if not args:
        raise DockerError("Usage:  docker image COMMAND\n\nManage images", 0)
    sub, rest = args[0], args[1:]
    if sub in ("ls", "list"):
        return cmd_images(d, rest)
    if sub == "pull":
        return cmd_pull(d, rest)
    if sub in ("rm", "remove"):
        return cmd_rmi(d, rest)
    if sub == "inspect":
        opts, pos, _ = parse_flags(rest, {"format|f": "str", "help": "bool"}, "See 'docker image inspect --help'.")
        if not pos:
            raise DockerError('"docker image inspect" requires at least 1 argument.', 1)
        d.require_daemon()
        objs, rc = [], 0
        for name in pos:
            found = d.find_image(name)
            if found is None:
                err(f"Error response from daemon: No such image: {name}\n")
                rc = 1
                continue
            objs.append(_image_inspect_obj(found[1]))
        _print_inspect(objs, opts.get("format"))
        return rc
    raise DockerError(f"docker: '{sub}' is not a docker command.\nSee 'docker --help'", 1)


def cmd_rmi(d: Docker, args: list[str]) -> int:
    _opts, pos, _ = parse_flags(
        args, {"force|f": "bool", "no-prune": "bool", "help": "bool"}, "See 'docker rmi --help'."
    )
    d.require_daemon()
    rc = 0
    for name in pos:
        with d.lock():
            imgs = d.images()
            found = d.find_image(name)
            if found is None:
                err(f"Error response from daemon: No such image: {name}\n")
                rc = 1
                continue
            key, img = found
            del imgs[key]
            _c.write_json_atomic(d.images_path, imgs)
        out(f"Untagged: {img['repo']}:{img['tag']}\nDeleted: sha256:{img['id']}\n")
    return rc


def _print_inspect(objs: list[dict], fmt: str | None) -> None:
    if fmt:
        out("".join(render(fmt, o) + "\n" for o in objs))
    else:
        out(json.dumps(objs, indent=4) + "\n")


# ------------------------------------------------------------------------------------------- run
RUN_FLAGS = {
    "rm": "bool",
    "name": "str",
    "gpus": "str",
    "volume|v": "list",
    "mount": "list",
    "env|e": "list",
    "env-file": "list",
    "shm-size": "str",
    "ipc": "str",
    "workdir|w": "str",
    "user|u": "str",
    "entrypoint": "str",
    "detach|d": "bool",
    "interactive|i": "bool",
    "tty|t": "bool",
    "label|l": "list",
    "cidfile": "str",
    "network": "str",
    "net": "alias:network:str",
    "init": "bool",
    "privileged": "bool",
    "runtime": "str",
    "ulimit": "list",
    "pull": "str",
    "platform": "str",
    "memory|m": "str",
    "memory-swap": "str",
    "cpus": "str",
    "hostname|h": "str",
    "add-host": "list",
    "cap-add": "list",
    "cap-drop": "list",
    "security-opt": "list",
    "publish|p": "list",
    "expose": "list",
    "restart": "str",
    "stop-signal": "str",
    "stop-timeout": "str",
    "sig-proxy": "bool",
    "log-driver": "str",
    "log-opt": "list",
    "device": "list",
    "group-add": "list",
    "read-only": "bool",
    "tmpfs": "list",
    "quiet|q": "bool",
    "help": "bool",
}

_NAME_RE = re.compile(r"^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
_ADJ = ("admiring", "brave", "clever", "eager", "focused", "gallant", "happy", "jolly", "keen", "lucid", "nifty")
_SURN = ("turing", "hopper", "lovelace", "noether", "curie", "dijkstra", "knuth", "ritchie", "shannon", "tesla")


def parse_size(value: str) -> int | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgtb]?)b?", value.strip().lower())
    if not m:
        return None
    mult = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2)]
    return int(float(m.group(1)) * mult)


def parse_gpus(value: str, see: str) -> str | int:
    """``all`` | N | ``device=0,1`` | ``count=N`` | with ``,capabilities=...`` -> "all" or a count."""
    v = value.strip().strip('"').strip("'")
    count: str | int | None = None
    for part in re.split(r",(?=[a-z]+=)", v):
        if part == "all":
            count = "all"
        elif part.isdigit():
            count = int(part)
        elif part.startswith("count="):
            c = part[len("count=") :]
            count = "all" if c == "all" else (int(c) if c.isdigit() else None)
            if count is None:
                break
        elif part.startswith("device="):
            count = len([x for x in part[len("device=") :].split(",") if x])
        elif part.startswith(("capabilities=", "driver=", "options=")):
            continue
        else:
            count = None
            break
    if count is None or (count == 0 and v != "0"):
        raise DockerError(
            f"invalid argument \"{value}\" for \"--gpus\" flag: unexpected key '{v.split('=')[0]}' in '{v}'", 125, see
        )
    return count


def parse_env_file(path: str, see: str) -> list[tuple[str, str | None]]:
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise DockerError(f"docker: open {path}: no such file or directory.", 125, see) from None
    except OSError as exc:
        raise DockerError(f"docker: open {path}: {(exc.strerror or 'error').lower()}.", 125, see) from None
    items: list[tuple[str, str | None]] = []
    for n, raw in enumerate(lines, 1):
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        key, eq, val = line.partition("=")
        if not key or " " in key.strip():
            raise DockerError(
                f"docker: poorly formatted environment: variable '{key}' contains whitespaces (line {n}).", 125, see
            )
        items.append((key, val if eq else None))
    return items


class Mount:
    __slots__ = ("dest", "kind", "rw", "source")

    def __init__(self, source: str, dest: str, rw: bool, kind: str) -> None:
        self.source = source
        self.dest = dest
        self.rw = rw
        self.kind = kind

    def to_json(self) -> dict:
        return {"Type": self.kind, "Source": self.source, "Destination": self.dest, "RW": self.rw}


def _clean(path: str) -> str:
    return os.path.normpath(path) if path else path


def parse_volume(d: Docker, spec: str, cwd: str) -> Mount:
    parts = spec.split(":")
    if len(parts) == 1:
        dest, src, mode = parts[0], "", ""
    elif len(parts) == 2:
        src, dest, mode = parts[0], parts[1], ""
    elif len(parts) == 3:
        src, dest, mode = parts
    else:
        raise DockerError(f"docker: Error response from daemon: invalid spec: {spec}: too many colons.", 125)
    if not dest.startswith("/"):
        raise DockerError(f"docker: Error response from daemon: invalid volume specification: '{spec}'.", 125)
    if _clean(dest) == "/":
        raise DockerError(
            f"docker: Error response from daemon: invalid volume specification: '{spec}': invalid mount config for type \"bind\": invalid specification: destination can't be '/'.",
            125,
        )
    modes = [m for m in mode.split(",") if m]
    for m in modes:
        if m not in (
            "ro",
            "rw",
            "z",
            "Z",
            "shared",
            "rshared",
            "slave",
            "rslave",
            "private",
            "rprivate",
            "nocopy",
            "cached",
            "delegated",
            "consistent",
        ):
            raise DockerError(f"docker: Error response from daemon: invalid mode: {mode}.", 125)
    rw = "ro" not in modes
    if not src:
        name = _sha(f"anon:{time.time()}:{os.getpid()}:{spec}")
        vol = os.path.join(d.ddir, "volumes", name, "_data")
        os.makedirs(vol, exist_ok=True)
        return Mount(vol, _clean(dest), rw, "volume")
    if src.startswith(("/", "./", "../")) or src in (".", ".."):
        host = _clean(os.path.join(cwd, src)) if not src.startswith("/") else _clean(src)
        if not os.path.exists(host):
            os.makedirs(host, exist_ok=True)  # docker creates a missing bind source (as root)
        return Mount(host, _clean(dest), rw, "bind")
    if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", src):
        raise DockerError(
            f'docker: Error response from daemon: create {src}: "{src}" includes invalid characters for a local volume name, '
            'only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path.',
            125,
        )
    vol = os.path.join(d.ddir, "volumes", src, "_data")
    os.makedirs(vol, exist_ok=True)
    return Mount(vol, _clean(dest), rw, "volume")


def parse_mount(d: Docker, spec: str) -> Mount:
    fields: dict[str, str] = {}
    for item in spec.split(","):
        key, eq, val = item.partition("=")
        fields[key.strip().lower()] = val if eq else "true"
    kind = fields.get("type", "volume")
    src = fields.get("source") or fields.get("src") or ""
    dest = fields.get("target") or fields.get("destination") or fields.get("dst") or ""
    ro = fields.get("readonly", fields.get("ro", "false")).lower() in ("true", "1")
    if not dest:
        raise DockerError(
            'invalid argument "' + spec + '" for "--mount" flag: target is required', 125, "See 'docker run --help'."
        )
    if kind == "bind":
        if not src.startswith("/") or not os.path.exists(src):
            raise DockerError(
                f'docker: Error response from daemon: invalid mount config for type "bind": bind source path does not exist: {src}.',
                125,
            )
        return Mount(_clean(src), _clean(dest), not ro, "bind")
    if kind == "volume":
        return parse_volume(d, f"{src}:{dest}" + (":ro" if ro else "") if src else dest, os.getcwd())
    if kind == "tmpfs":
        path = os.path.join(d.ddir, "volumes", "tmpfs-" + _sha(spec + str(time.time()))[:12])
        os.makedirs(path, exist_ok=True)
        return Mount(path, _clean(dest), True, "tmpfs")
    raise DockerError(
        f'invalid argument "{spec}" for "--mount" flag: invalid value for \'type\': {kind}',
        125,
        "See 'docker run --help'.",
    )


def mount_translator(mounts: list[Mount]) -> Callable[[str], str]:
    """Rewrite container paths (at word boundaries) to their host paths."""
    if not mounts:
        return lambda s: s
    by_len = sorted(mounts, key=lambda m: len(m.dest), reverse=True)
    table = {m.dest: m.source for m in by_len}
    alt = "|".join(re.escape(m.dest) for m in by_len)
    pattern = re.compile(r"(?<![^\s'\"=:(,;<>|&])(" + alt + r")(?=$|[/\s'\"\);:,|&<>])")
    return lambda s: pattern.sub(lambda m: table[m.group(1)], s)


def container_path_to_host(mounts: list[Mount], rootfs: str, path: str) -> str:
    p = _clean(path)
    best = None
    for m in mounts:
        if (p == m.dest or p.startswith(m.dest.rstrip("/") + "/")) and (best is None or len(m.dest) > len(best.dest)):
            best = m
    if best is not None:
        return best.source + p[len(best.dest) :]
    return os.path.join(rootfs, p.lstrip("/"))


def _which(cmd: str, path: str) -> str | None:
    for d in path.split(":"):
        if not d:
            continue
        cand = os.path.join(d, cmd)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _oci_error(detail: str) -> str:
    return (
        "docker: Error response from daemon: failed to create task for container: failed to create shim task: "
        "OCI runtime create failed: runc create failed: unable to start container process: "
        f"error during container init: {detail}: unknown."
    )


def cmd_run(d: Docker, args: list[str], argv_offset: int) -> int:
    see = "See 'docker run --help'."
    d.env_limit = argv_offset + len(args)  # until parsed: redact every `-e K=V`-looking token
    opts, pos, stop = parse_flags(args, RUN_FLAGS, see, interspersed=False)
    d.env_limit = argv_offset + stop
    if opts.get("help"):
        out("\nUsage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]\n\nCreate and run a new container from an image\n")
        return 0
    if not pos:
        raise DockerError(
            "docker: 'docker run' requires at least 1 argument.\n\nUsage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]\n\n"
            "See 'docker run --help' for more information",
            125,
        )
    image, cmd = pos[0], pos[1:]
    detach = bool(opts.get("detach"))
    env_args = list(opts.get("env") or [])
    d.record.update(
        image=image,
        cmd=cmd,
        detach=detach,
        rm=bool(opts.get("rm")),
        name=opts.get("name"),
        gpus=opts.get("gpus"),
        shm_size=opts.get("shm-size"),
        ipc=opts.get("ipc"),
        user=opts.get("user"),
        workdir=opts.get("workdir"),
        entrypoint=opts.get("entrypoint"),
        env_keys=[e.split("=", 1)[0] for e in env_args],
        env_files=list(opts.get("env-file") or []),
    )
    if opts.get("tty") and opts.get("interactive") and not os.isatty(0):
        raise DockerError("the input device is not a TTY", 1)
    if opts.get("rm") and opts.get("restart") not in (None, "", "no"):
        raise DockerError("docker: Conflicting options: --restart and --rm.", 125, see)
    shm: int | None = 64 * 1024**2
    if opts.get("shm-size") is not None:
        shm = parse_size(opts["shm-size"])
        if shm is None:
            raise DockerError(
                f'invalid argument "{opts["shm-size"]}" for "--shm-size" flag: invalid size: \'{opts["shm-size"]}\'',
                125,
                see,
            )
    ipc = opts.get("ipc") or "private"
    if not (ipc in ("", "none", "private", "shareable", "host") or ipc.startswith("container:")):
        raise DockerError(f"docker: Error response from daemon: invalid IPC mode: {ipc}.", 125, see)
    if ipc == "host":
        shm = 12 * 1024**3
    gpus_req: str | int | None = parse_gpus(opts["gpus"], see) if opts.get("gpus") is not None else None
    pull_mode = opts.get("pull") or "missing"
    if pull_mode not in ("always", "missing", "never"):
        raise DockerError(
            f'docker: invalid pull option: \'{pull_mode}\': must be one of "always", "missing" or "never".', 125, see
        )
    name = opts.get("name")
    if name is not None and not _NAME_RE.match(name):
        raise DockerError(
            f"docker: Error response from daemon: Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.",
            125,
            see,
        )
    workdir = opts.get("workdir")
    if workdir is not None and not workdir.startswith("/"):
        raise DockerError(
            f"docker: Error response from daemon: the working directory '{workdir}' is invalid, it needs to be an absolute path.",
            125,
            see,
        )
    # environment: -e and --env-file (in docker's order: files first, then -e)
    env_items: list[tuple[str, str | None]] = []
    for path in opts.get("env-file") or []:
        items = parse_env_file(path, see)
        d.record.setdefault("env_file_keys", []).extend(k for k, _v in items)
        env_items += items
    for e in env_args:
        key, eq, val = e.partition("=")
        if not key:
            raise DockerError(
                f'invalid argument "{e}" for "-e, --env" flag: invalid environment variable: {e}', 125, see
            )
        env_items.append((key, val if eq else None))
    d.require_daemon("docker: ", see)
    try:
        ref = parse_ref(image)
    except DockerError as exc:
        raise DockerError("docker: " + exc.message + ".", 125, see) from None
    d.record["image_canonical"] = ref.canonical
    # image: implicit pull
    present = d.find_image(image) is not None or ref.canonical in d.images()
    if pull_mode == "never" and not present:
        raise DockerError(f"docker: Error response from daemon: No such image: {ref.familiar}.", 125, see)
    if pull_mode == "always" or not present:
        if not present:
            err(f"Unable to find image '{ref.familiar}' locally\n")
        d.record["implicit_pull"] = True
        try:
            d.pull(image, err)
        except DockerError as exc:
            raise DockerError("docker: " + exc.message + ".", 125, see) from None
    # GPUs
    meta = d.meta()
    have = int(meta.get("gpu_count") or 0)
    runtime = opts.get("runtime") or ""
    if gpus_req is None and runtime == "nvidia":
        gpus_req = "all"
    gpus = 0
    if gpus_req is not None:
        if have == 0:
            raise DockerError(
                'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
                125,
                see,
            )
        gpus = have if gpus_req == "all" else int(gpus_req)
        if gpus > have:
            raise DockerError(
                _oci_error(
                    "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
                    f"nvidia-container-cli: device error: {gpus - 1}: unknown device"
                ),
                125,
                see,
            )
    d.record["gpu_count"] = gpus
    # container record (name claimed under the daemon lock)
    cid = _sha(f"{time.time()}:{os.getpid()}:{os.urandom(8).hex()}")
    cdir = d.cdir(cid)
    rootfs = os.path.join(cdir, "rootfs")
    with d.lock():
        taken = {r["Name"]: r["Id"] for r in d.containers()}
        if name is None:
            seed = int(cid[:8], 16)
            name = f"{_ADJ[seed % len(_ADJ)]}_{_SURN[(seed // 16) % len(_SURN)]}"
            if name in taken:
                name = f"{name}_{cid[:6]}"
        name = name.lstrip("/")
        if name in taken:
            raise DockerError(
                f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use by container '
                f'"{taken[name]}". You have to remove (or rename) that container to be able to reuse that name.',
                125,
                see,
            )
        os.makedirs(os.path.join(rootfs, "root"), exist_ok=True)
        os.makedirs(os.path.join(rootfs, "tmp"), exist_ok=True)
        rec: dict[str, Any] = {
            "Id": cid,
            "Name": name,
            "Image": image,
            "ImageCanonical": ref.canonical,
            "Cmd": list(cmd),
            "Entrypoint": opts.get("entrypoint"),
            "Created": time.time(),
            "State": {
                "Status": "created",
                "Running": False,
                "Pid": 0,
                "ExitCode": 0,
                "StartedAt": 0,
                "FinishedAt": 0,
                "Error": "",
            },
            "ShimPid": 0,
            "ClientPid": os.getpid(),
            "ClientDone": False,
            "AutoRemove": bool(opts.get("rm")),
            "Detach": detach,
            "Labels": dict(lbl.partition("=")[::2] for lbl in opts.get("label") or []),
            "Gpus": gpus,
            "EnvKeys": [k for k, _v in env_items],
            "ShmSize": shm,
            "IpcMode": ipc,
            "User": opts.get("user") or "",
            "Mounts": [],
        }
        _c.write_json_atomic(os.path.join(cdir, "config.json"), rec)
    d.record.update(container_id=cid, container_name=name)
    try:
        mounts = [parse_volume(d, v, os.getcwd()) for v in opts.get("volume") or []]
        mounts += [parse_mount(d, m) for m in opts.get("mount") or []]
        cidfile = opts.get("cidfile")
        if cidfile:
            if os.path.exists(cidfile):
                raise DockerError(
                    f"docker: Container ID file found, make sure the other container isn't running or delete {cidfile}.",
                    125,
                    see,
                )
            with open(cidfile, "w", encoding="utf-8") as fh:
                fh.write(cid)
    except BaseException:
        d.remove_container(cid)
        raise
    d.record["mounts"] = [[m.source, m.dest, "rw" if m.rw else "ro"] for m in mounts]
    translate = mount_translator(mounts)
    # environment of the container process
    container_path = f"{d.root}/tools/container-bin:{CONTAINER_PATH_DIRS}"
    env: dict[str, str] = {
        "PATH": container_path,
        "HOME": os.path.join(rootfs, "root"),
        "HOSTNAME": cid[:12],
        "LANG": "C.UTF-8",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    }
    if gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    client_env = os.environ
    for key, val in env_items:
        if val is None:
            if key in client_env:
                env[key] = client_env[key]
        else:
            env[key] = translate(val)
    env.update(
        BREV_SIM_ROOT=d.root or "",
        BREV_SIM_INSTANCE=d.instance_id,
        BREV_SIM_INSTANCE_NAME=d.instance_name,
        BREV_SIM_CONTAINER=cid,
        BREV_SIM_CONTAINER_NAME=name,
        BREV_SIM_CONTAINER_IMAGE=ref.canonical,
        BREV_SIM_CONTAINER_GPUS=str(gpus),
        BREV_SIM_CONTAINER_VRAM_GB=str(int(meta.get("vram_per_gpu_gb") or 0)),
        BREV_SIM_CONTAINER_SHM_BYTES=str(shm),
        BREV_SIM_CONTAINER_IPC=ipc,
        BREV_SIM_CONTAINER_USER=opts.get("user") or "",
        BREV_SIM_CONTAINER_ROOTFS=rootfs,
        BREV_SIM_CONTAINER_MOUNTS=json.dumps([[m.source, m.dest, m.rw] for m in mounts]),
    )
    cwd = container_path_to_host(mounts, rootfs, workdir) if workdir else rootfs
    os.makedirs(cwd, exist_ok=True)
    # command
    full = ([opts["entrypoint"]] if opts.get("entrypoint") else []) + list(cmd)
    if not full:
        full = ["/bin/bash"]
    argv = [translate(a) for a in full]
    found: str | None
    if "/" in full[0]:
        if full[0].startswith("/"):
            cand = argv[0] if os.path.exists(argv[0]) else container_path_to_host(mounts, rootfs, full[0])
        else:
            cand = os.path.join(cwd, argv[0])
        found = cand if os.path.exists(cand) else None
        not_found = f'exec: "{full[0]}": stat {full[0]}: no such file or directory'
    else:
        found = _which(argv[0], env.get("PATH", container_path))
        if found and not _c.image_provides(ref.canonical, os.path.basename(found)):
            found = None  # e.g. gap_analysis in the -pyt image
        not_found = f'exec: "{full[0]}": executable file not found in $PATH'
    start_error: tuple[int, str] | None = None
    if found is None:
        start_error = (127, _oci_error(not_found))
    elif os.path.isdir(found) or not os.access(found, os.X_OK):
        start_error = (126, _oci_error(f'exec: "{full[0]}": permission denied'))

    def set_mounts(r: dict) -> None:
        r["Mounts"] = [m.to_json() for m in mounts]

    d.update_container(cid, set_mounts)
    if start_error is not None:
        code, msg = start_error

        def failed(r: dict) -> None:
            r["State"].update(
                Status="exited" if not opts.get("rm") else "dead", ExitCode=code, Error=msg, FinishedAt=time.time()
            )

        d.update_container(cid, failed)
        if opts.get("rm"):
            d.remove_container(cid)
        raise DockerError(msg, code, see)
    assert found is not None
    stdin_fd = 0 if (opts.get("interactive") and not detach) else None
    d.write_record("start", None)  # a client killed while attached still leaves a trace
    _spawn_shim(d, cid, found, argv, env, cwd, stdin_fd)
    if detach:
        rec2 = _wait_started(d, cid)
        if rec2 is not None and rec2["State"].get("Error"):
            raise DockerError(rec2["State"]["Error"], 126, see)
        out(cid + "\n")
        return 0
    sig_proxy = opts.get("sig-proxy", True)
    return _attach(d, cid, bool(sig_proxy))


def _spawn_shim(
    d: Docker, cid: str, exe: str, argv: list[str], env: dict[str, str], cwd: str, stdin_fd: int | None
) -> None:
    """Double-fork a shim (own session) that runs the container process and records its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        _shim(d, cid, exe, argv, env, cwd, stdin_fd)
    except BaseException:
        pass
    os._exit(0)


def _shim(d: Docker, cid: str, exe: str, argv: list[str], env: dict[str, str], cwd: str, stdin_fd: int | None) -> None:
    import subprocess

    devnull = os.open(os.devnull, os.O_RDWR)
    if stdin_fd is None:
        os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.closerange(3, 256)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    cdir = d.cdir(cid)
    out_log = os.open(os.path.join(cdir, "stdout.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    err_log = os.open(os.path.join(cdir, "stderr.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    shim_pid = os.getpid()

    def restore() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)

    try:
        proc = subprocess.Popen(
            argv,
            executable=exe,
            env=env,
            cwd=cwd,
            stdin=0 if stdin_fd is not None else subprocess.DEVNULL,
            stdout=out_log,
            stderr=err_log,
            process_group=0,
            close_fds=True,
            preexec_fn=restore,
        )
    except OSError as exc:
        msg = _oci_error(f'exec: "{argv[0]}": {(exc.strerror or "error").lower()}')

        def failed(r: dict) -> None:
            r["ShimPid"] = shim_pid
            r["State"].update(Status="exited", Running=False, ExitCode=126, Error=msg, FinishedAt=time.time())

        d.update_container(cid, failed)
        return
    os.close(out_log)
    os.close(err_log)

    def started(r: dict) -> None:
        r["ShimPid"] = shim_pid
        r["State"].update(Status="running", Running=True, Pid=proc.pid, StartedAt=time.time())

    d.update_container(cid, started)
    rc = proc.wait()
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # the main process ended: tear the "container" down
    code = rc if rc >= 0 else 128 - rc

    def finished(r: dict) -> None:
        r["State"].update(Status="exited", Running=False, ExitCode=code, FinishedAt=time.time())

    rec = d.update_container(cid, finished)
    if rec is None or not rec.get("AutoRemove"):
        return
    if not rec.get("Detach"):
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            cur = d._read_container(cid)
            if cur is None or cur.get("ClientDone") or not _c.pid_alive(cur.get("ClientPid")):
                break
            time.sleep(0.05)
    d.remove_container(cid)


def _wait_started(d: Docker, cid: str, timeout: float = 30.0) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rec = d._read_container(cid)
        if rec is None or rec["State"]["Status"] != "created":
            return rec
        time.sleep(0.005)
    return d._read_container(cid)


class _LogTail:
    """Copies what a container appends to one of its log files to our stdout/stderr."""

    def __init__(self, path: str, fd: int) -> None:
        self.fd = fd
        self.ok = True
        try:
            self.fh: Any = open(path, "rb")  # noqa: SIM115
        except OSError:
            self.fh = None

    def pump(self) -> bool:
        if self.fh is None:
            return False
        chunk = self.fh.read(65536)
        if not chunk:
            return False
        if self.ok and not _write_fd(self.fd, chunk):
            self.ok = False  # our reader went away: keep draining, stop writing
        return True

    def close(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()


def _attach(d: Docker, cid: str, sig_proxy: bool) -> int:
    """Stream the container's logs until it exits; proxy signals; remove it when ``--rm``."""
    pending: list[int] = []
    state: dict[str, Any] = {"pid": 0}

    def forward(signum: int, _frame: Any) -> None:
        if state["pid"]:
            with contextlib.suppress(OSError):
                os.kill(state["pid"], signum)
        else:
            pending.append(signum)

    if sig_proxy:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, forward)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    rec = _wait_started(d, cid)
    if rec is None:
        raise DockerError("docker: Error response from daemon: No such container: " + cid, 125)
    if rec["State"].get("Error"):
        raise DockerError(rec["State"]["Error"], int(rec["State"].get("ExitCode") or 126))
    state["pid"] = int(rec["State"].get("Pid") or 0)
    for signum in pending:
        forward(signum, None)
    cdir = d.cdir(cid)
    files = [_LogTail(os.path.join(cdir, name), fd) for name, fd in (("stdout.log", 1), ("stderr.log", 2))]
    code = 0
    try:
        while True:
            if any([f.pump() for f in files]):
                continue
            cur = d._read_container(cid)
            done = (
                cur is None
                or cur["State"]["Status"] != "running"
                or (not _c.pid_alive(cur.get("ShimPid")) and not _c.pid_alive(cur["State"].get("Pid")))
            )
            if done:
                for f in files:
                    while f.pump():
                        pass
                if cur is None:
                    code = 137
                elif cur["State"]["Status"] == "running":
                    cur = d.refresh(cur)
                    code = 137
                else:
                    code = int(cur["State"].get("ExitCode") or 0)
                break
            time.sleep(0.01)
    finally:
        for f in files:
            f.close()
    final = d.update_container(cid, lambda r: r.__setitem__("ClientDone", True))
    if final is not None and final.get("AutoRemove") and final["State"]["Status"] != "running":
        d.remove_container(cid)
    d.record["container_exit_code"] = code
    return code


# ------------------------------------------------------------------------------------ containers
def _status_text(rec: dict) -> str:
    st = rec["State"]
    now = time.time()
    if st["Status"] == "running":
        return "Up " + _c.human_duration(now - (st.get("StartedAt") or now))
    if st["Status"] == "created":
        return "Created"
    return f"Exited ({st.get('ExitCode', 0)}) {_c.human_duration(now - (st.get('FinishedAt') or now))} ago"


def _ps_row(rec: dict, no_trunc: bool) -> dict:
    command = " ".join(([rec["Entrypoint"]] if rec.get("Entrypoint") else []) + (rec.get("Cmd") or ["/bin/bash"]))
    if not no_trunc and len(command) > 20:
        command = command[:19] + "\u2026"
    return {
        "ID": rec["Id"] if no_trunc else rec["Id"][:12],
        "Image": rec["Image"],
        "Command": f'"{command}"',
        "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(rec["Created"])),
        "RunningFor": _c.human_duration(time.time() - rec["Created"]) + " ago",
        "Ports": "",
        "State": rec["State"]["Status"],
        "Status": _status_text(rec),
        "Names": rec["Name"],
        "Labels": ",".join(f"{k}={v}" for k, v in (rec.get("Labels") or {}).items()),
        "Mounts": ",".join(m["Destination"] for m in rec.get("Mounts") or []),
    }


def cmd_ps(d: Docker, args: list[str]) -> int:
    see = "See 'docker ps --help'."
    opts, _pos, _ = parse_flags(
        args,
        {
            "all|a": "bool",
            "quiet|q": "bool",
            "no-trunc": "bool",
            "filter|f": "list",
            "format": "str",
            "last|n": "str",
            "latest|l": "bool",
            "size|s": "bool",
            "help": "bool",
        },
        see,
    )
    d.require_daemon()
    recs = d.containers()
    if not opts.get("all") and not opts.get("last") and not opts.get("latest"):
        recs = [r for r in recs if r["State"]["Status"] == "running"]
    for flt in opts.get("filter") or []:
        key, _, val = flt.partition("=")
        if key == "name":
            recs = [r for r in recs if re.search(val, r["Name"])]
        elif key == "id":
            recs = [r for r in recs if r["Id"].startswith(val)]
        elif key == "status":
            recs = [r for r in recs if r["State"]["Status"] == val]
        elif key == "label":
            k, eq, v = val.partition("=")
            recs = [r for r in recs if k in (r.get("Labels") or {}) and (not eq or r["Labels"][k] == v)]
        elif key == "ancestor":
            recs = [r for r in recs if val in (r["Image"], r.get("ImageCanonical"))]
        else:
            raise DockerError(f"Error response from daemon: invalid filter '{key}'")
    if opts.get("latest"):
        recs = recs[:1]
    elif opts.get("last"):
        recs = recs[: int(opts["last"])]
    rows = [_ps_row(r, bool(opts.get("no-trunc"))) for r in recs]
    if opts.get("quiet"):
        out("".join(r["ID"] + "\n" for r in rows))
        return 0
    fmt = opts.get("format")
    if fmt:
        tbl = fmt.startswith("table")
        fmt = fmt[len("table") :].lstrip() if tbl else fmt
        out("".join(render(fmt, r) + "\n" for r in rows))
        return 0
    data = [["CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"]]
    data += [[r["ID"], r["Image"], r["Command"], r["RunningFor"], r["Status"], r["Ports"], r["Names"]] for r in rows]
    out(table(data))
    return 0


def _signal_number(value: str) -> int:
    v = value.upper()
    if v.isdigit():
        return int(v)
    if not v.startswith("SIG"):
        v = "SIG" + v
    try:
        return int(getattr(signal, v))
    except AttributeError:
        raise DockerError(f"Error response from daemon: Invalid signal: {value}") from None


def _wait_exit(d: Docker, cid: str, timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while True:
        rec = d._read_container(cid)
        if rec is None:
            return None
        rec = d.refresh(rec)
        if rec is None or rec["State"]["Status"] != "running":
            return rec
        if time.monotonic() >= deadline:
            return rec
        time.sleep(0.01)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def cmd_stop(d: Docker, args: list[str]) -> int:
    see = "See 'docker stop --help'."
    opts, pos, _ = parse_flags(
        args, {"time|t": "str", "timeout": "alias:time:str", "signal|s": "str", "help": "bool"}, see
    )
    if not pos:
        raise DockerError(f'"docker stop" requires at least 1 argument.\n{see}', 1)
    d.require_daemon()
    grace = float(opts.get("time") or 10)
    sig = _signal_number(opts["signal"]) if opts.get("signal") else signal.SIGTERM
    rc = 0
    for name in pos:
        rec = d.find_container(name)
        if rec is None:
            err(f"Error response from daemon: No such container: {name}\n")
            rc = 1
            continue
        d.record.setdefault("stopped", []).append(rec["Name"])
        pid = int(rec["State"].get("Pid") or 0)
        if rec["State"]["Status"] == "running" and pid:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
            cur = _wait_exit(d, rec["Id"], grace)
            if cur is not None and cur["State"]["Status"] == "running":
                _kill_group(pid, signal.SIGKILL)
                _wait_exit(d, rec["Id"], 5.0)
            if rec.get("AutoRemove"):  # give the --rm cleanup a moment, so `docker ps -a` is settled
                deadline = time.monotonic() + 2.0
                while os.path.exists(d.cdir(rec["Id"])) and time.monotonic() < deadline:
                    time.sleep(0.01)
        out(name + "\n")
    return rc


def cmd_kill(d: Docker, args: list[str]) -> int:
    see = "See 'docker kill --help'."
    opts, pos, _ = parse_flags(args, {"signal|s": "str", "help": "bool"}, see)
    if not pos:
        raise DockerError(f'"docker kill" requires at least 1 argument.\n{see}', 1)
    d.require_daemon()
    sig = _signal_number(opts["signal"]) if opts.get("signal") else signal.SIGKILL
    rc = 0
    for name in pos:
        rec = d.find_container(name)
        if rec is None:
            err(f"Error response from daemon: No such container: {name}\n")
            rc = 1
            continue
        if rec["State"]["Status"] != "running":
            err(f"Error response from daemon: cannot kill container: {name}: container {rec['Id']} is not running\n")
            rc = 1
            continue
        pid = int(rec["State"].get("Pid") or 0)
        if sig == signal.SIGKILL:
            _kill_group(pid, sig)
            _wait_exit(d, rec["Id"], 5.0)
        else:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        out(name + "\n")
    return rc


def cmd_rm(d: Docker, args: list[str]) -> int:
    see = "See 'docker rm --help'."
    opts, pos, _ = parse_flags(args, {"force|f": "bool", "volumes|v": "bool", "link|l": "bool", "help": "bool"}, see)
    if not pos:
        raise DockerError(f'"docker rm" requires at least 1 argument.\n{see}', 1)
    d.require_daemon()
    rc = 0
    for name in pos:
        rec = d.find_container(name)
        if rec is None:
            if not opts.get("force"):
                err(f"Error response from daemon: No such container: {name}\n")
                rc = 1
            continue
        if rec["State"]["Status"] == "running":
            if not opts.get("force"):
                err(
                    f'Error response from daemon: cannot remove container "/{rec["Name"]}": container is running: '
                    "stop the container before removing or force remove\n"
                )
                rc = 1
                continue
            _kill_group(int(rec["State"].get("Pid") or 0), signal.SIGKILL)
            _wait_exit(d, rec["Id"], 5.0)
        d.remove_container(rec["Id"])
        out(name + "\n")
    return rc


def cmd_wait(d: Docker, args: list[str]) -> int:
    _opts, pos, _ = parse_flags(args, {"help": "bool"}, "See 'docker wait --help'.")
    d.require_daemon()
    rc = 0
    for name in pos:
        rec = d.find_container(name)
        if rec is None:
            err(f"Error response from daemon: No such container: {name}\n")
            rc = 1
            continue
        cur = _wait_exit(d, rec["Id"], 10**9)
        out(f"{(cur or rec)['State'].get('ExitCode', 0)}\n")
    return rc


def cmd_logs(d: Docker, args: list[str]) -> int:
    see = "See 'docker logs --help'."
    opts, pos, _ = parse_flags(
        args,
        {
            "follow|f": "bool",
            "tail|n": "str",
            "timestamps|t": "bool",
            "since": "str",
            "until": "str",
            "details": "bool",
            "help": "bool",
        },
        see,
    )
    if len(pos) != 1:
        raise DockerError(f'"docker logs" requires exactly 1 argument.\n{see}', 1)
    d.require_daemon()
    rec = d.find_container(pos[0])
    if rec is None:
        raise DockerError(f"Error response from daemon: No such container: {pos[0]}")
    cdir = d.cdir(rec["Id"])
    tail = opts.get("tail")
    handles = []
    for fname, fd in (("stdout.log", 1), ("stderr.log", 2)):
        try:
            fh = open(os.path.join(cdir, fname), "rb")  # noqa: SIM115
        except OSError:
            continue
        data = fh.read()
        if tail not in (None, "all"):
            n = int(tail or 0)
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-n:]) if n else b""
        _write_fd(fd, data)
        handles.append((fh, fd))
    try:
        while opts.get("follow"):
            got = False
            for fh, fd in handles:
                chunk = fh.read(65536)
                if chunk:
                    got = True
                    _write_fd(fd, chunk)
            if got:
                continue
            cur = d._read_container(rec["Id"])
            if cur is None or d.refresh(cur) is None or cur["State"]["Status"] != "running":
                for fh, fd in handles:
                    _write_fd(fd, fh.read())
                break
            time.sleep(0.02)
    finally:
        for fh, _fd in handles:
            fh.close()
    return 0


def _container_inspect_obj(rec: dict) -> dict:
    st = rec["State"]

    def iso(ts: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts else "0001-01-01T00:00:00Z"

    return {
        "Id": rec["Id"],
        "Created": iso(rec["Created"]),
        "Path": (rec.get("Cmd") or ["/bin/bash"])[0],
        "Args": (rec.get("Cmd") or [])[1:],
        "State": {
            "Status": st["Status"],
            "Running": st["Status"] == "running",
            "Paused": False,
            "Restarting": False,
            "OOMKilled": False,
            "Dead": False,
            "Pid": st.get("Pid", 0) if st["Status"] == "running" else 0,
            "ExitCode": st.get("ExitCode", 0),
            "Error": st.get("Error", ""),
            "StartedAt": iso(st.get("StartedAt") or 0),
            "FinishedAt": iso(st.get("FinishedAt") or 0),
        },
        "Image": "sha256:" + _sha("image:" + rec.get("ImageCanonical", rec["Image"])),
        "Name": "/" + rec["Name"],
        "Mounts": rec.get("Mounts") or [],
        "Config": {
            "Image": rec["Image"],
            "Cmd": rec.get("Cmd") or [],
            "Entrypoint": [rec["Entrypoint"]] if rec.get("Entrypoint") else None,
            "Env": [f"{k}={REDACTED}" for k in rec.get("EnvKeys") or []],
            "Labels": rec.get("Labels") or {},
            "User": rec.get("User", ""),
        },
        "HostConfig": {
            "AutoRemove": bool(rec.get("AutoRemove")),
            "ShmSize": rec.get("ShmSize"),
            "IpcMode": rec.get("IpcMode"),
            "DeviceRequests": [{"Count": rec.get("Gpus", 0), "Capabilities": [["gpu"]]}] if rec.get("Gpus") else None,
        },
    }


def cmd_inspect(d: Docker, args: list[str], kind: str = "") -> int:
    see = "See 'docker inspect --help'."
    opts, pos, _ = parse_flags(args, {"format|f": "str", "type": "str", "size|s": "bool", "help": "bool"}, see)
    if not pos:
        raise DockerError(f'"docker inspect" requires at least 1 argument.\n{see}', 1)
    d.require_daemon()
    kind = kind or opts.get("type") or ""
    objs, rc = [], 0
    for name in pos:
        rec = d.find_container(name) if kind in ("", "container") else None
        if rec is not None:
            objs.append(_container_inspect_obj(rec))
            continue
        img = d.find_image(name) if kind in ("", "image") else None
        if img is not None:
            objs.append(_image_inspect_obj(img[1]))
            continue
        what = {"container": "container", "image": "image"}.get(kind, "object")
        err(f"Error: No such {what}: {name}\n")
        rc = 1
    _print_inspect(objs, opts.get("format"))
    return rc


def cmd_container(d: Docker, args: list[str], offset: int) -> int:
    if not args:
        raise DockerError("Usage:  docker container COMMAND\n\nManage containers", 0)
    sub, rest = args[0], args[1:]
    table_: dict[str, Callable[[Docker, list[str]], int]] = {
        "ls": cmd_ps,
        "list": cmd_ps,
        "ps": cmd_ps,
        "stop": cmd_stop,
        "kill": cmd_kill,
        "rm": cmd_rm,
        "remove": cmd_rm,
        "wait": cmd_wait,
        "logs": cmd_logs,
    }
    if sub == "run":
        return cmd_run(d, rest, offset + 1)
    if sub == "inspect":
        return cmd_inspect(d, rest, "container")
    fn = table_.get(sub)
    if fn is None:
        raise DockerError(f"docker: '{sub}' is not a docker command.\nSee 'docker --help'", 1)
    return fn(d, rest)


GLOBAL_FLAGS = {
    "config": "str",
    "context|c": "str",
    "host|H": "list",
    "log-level|l": "str",
    "debug|D": "bool",
    "tls": "bool",
    "tlsverify": "bool",
    "version|v": "bool",
    "help": "bool",
}


# --------------------------------------------------------------------------------------------- main
HANDLERS: dict[str, Callable[[Docker, list[str]], int]] = {
    "info": cmd_info,
    "version": cmd_version,
    "login": cmd_login,
    "logout": cmd_logout,
    "pull": cmd_pull,
    "images": cmd_images,
    "image": cmd_image,
    "rmi": cmd_rmi,
    "manifest": cmd_manifest,
    "ps": cmd_ps,
    "stop": cmd_stop,
    "kill": cmd_kill,
    "rm": cmd_rm,
    "wait": cmd_wait,
    "logs": cmd_logs,
    "inspect": cmd_inspect,
}


def _dispatch(d: Docker, argv: list[str]) -> int:
    gopts, pos, stop = parse_flags(argv, GLOBAL_FLAGS, "See 'docker --help'.", interspersed=False)
    d.sub = pos[0] if pos else ""
    if gopts.get("config"):
        d.config_dir = gopts["config"]
    if gopts.get("version"):
        out(f"Docker version {DOCKER_VERSION}, build {DOCKER_BUILD}\n")
        return 0
    if not pos:
        out("\nUsage:  docker [OPTIONS] COMMAND\n\nA self-sufficient runtime for containers\n")
        return 0 if gopts.get("help") else 1
    rest, offset = pos[1:], stop + 1
    if d.sub == "run":
        return cmd_run(d, rest, offset)
    if d.sub == "container":
        return cmd_container(d, rest, offset)
    fn = HANDLERS.get(d.sub)
    if fn is None:
        raise DockerError(f"docker: '{d.sub}' is not a docker command.\nSee 'docker --help'", 1)
    return fn(d, rest)


def main(argv: list[str], root: str | None = None) -> int:
    d = Docker(_c.sim_root(root), None)
    d.argv = list(argv)
    code = 1
    try:
        code = _dispatch(d, argv)
    except DockerError as exc:
        if exc.message:
            err(exc.message + "\n")
        if exc.see:
            err(exc.see + "\n")
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    finally:
        d.write_record("end", code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
