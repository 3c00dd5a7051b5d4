"""Plumbing of the fake ``docker`` client: errors, output, pflag-style flag parsing, secret redaction in
the call record, image references."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
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
