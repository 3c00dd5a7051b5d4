"""Option parsing of ``docker run``: sizes, ``--gpus``, env files, ``-v``/``--mount`` and the container-to-host
path mapping."""

from __future__ import annotations

import os
import re
import time

from airflow_provider_brev.testing.fake_docker.client import DockerError, _sha

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.testing.fake_docker.daemon import Docker


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
