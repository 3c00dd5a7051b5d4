"""One fake ``docker`` invocation: knobs, errors, flag parsing (the fake ``brev``'s pflag parser), the call record
with secrets redacted, image references, registry logins and the instance's image store (``pull``)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
from collections import namedtuple

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_brev.flags import CliError, Flag, parse_flags

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

DOCKER_VERSION = "27.3.1"
CALLS_FILE = "docker_calls.jsonl"
DAEMON_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
REDACTED = "<redacted>"

#: knobs under ``config.json["docker"]`` (``BrevSimulator.set_docker``)
DEFAULT_DOCKER_CONFIG: dict = {
    "daemon_down": False,  # every daemon command fails with "Cannot connect to the Docker daemon ..."
    "revoked_ngc_keys": [],  # NGC keys `docker login nvcr.io` rejects (any other non-empty key is valid)
    "nvcr_anonymous_pull": False,  # nvcr.io pulls work without a prior `docker login nvcr.io`
    "missing_images": [],  # image refs (or repositories) whose manifest does not exist
    "fail_pull": False,  # pulls time out: True (always), an int (the next N pulls) or a list of refs
    "image_bytes": 0,  # bytes a pull of an absent image downloads: an int, or {ref: bytes} (key "*": the rest)
    "pull_bytes_per_second": 0,  # download speed of a pull (0: instant); a pull takes image_bytes / this
    "pull_gate": "",  # a path under the sandbox HOME: a download completes only once it exists (ordering tests)
    "pull_gate_timeout": 60,  # seconds a download waits for the gate, then fails like a registry timeout
}


class DockerError(Exception):
    """An error the docker CLI prints on stderr (then ``see``) before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1, see: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.see = see


def _emit(stream: Any, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # the reader went away: drop the output like a Go program
        stream.write(text)
        stream.flush()


def out(text: str) -> None:
    _emit(sys.stdout, text)


def err(text: str) -> None:
    _emit(sys.stderr, text)


def parse(args: list[str], flags: list[Flag], see: str, interspersed: bool = True) -> tuple[dict[str, Any], list[str]]:
    try:
        return parse_flags(args, [*flags, Flag("help")], interspersed)
    except CliError as exc:
        raise DockerError(exc.message, 125, see) from None


def redact_argv(argv: list[str], sub: str) -> tuple[list[str], bool, bool]:
    """``-e K=V`` values and ``login -p/--password`` values replaced; returns (argv, inline env value, password)."""
    red = list(argv)
    inline = password = False
    for i, arg in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if prev in ("-e", "--env") and "=" in arg:
            red[i], inline = arg.split("=", 1)[0] + "=" + REDACTED, True
        elif sub == "login" and (prev in ("-p", "--password") or arg.startswith("--password=")):
            red[i], password = REDACTED, True
    return red, inline, password


#: a parsed image reference (``reference`` is the tag or the digest)
Ref = namedtuple("Ref", "registry path reference canonical familiar")


def parse_ref(ref: str) -> Ref:
    name, _, digest = ref.partition("@")
    tag = ""
    if name.rfind(":") > name.rfind("/"):
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    registry, path = (first, rest) if rest and ("." in first or ":" in first) else ("docker.io", name)
    if registry == "docker.io" and "/" not in path:
        path = f"library/{path}"
    valid = re.fullmatch(r"[a-z0-9]+(?:(?:[._]|__|-+|/)[a-z0-9]+)*", path)
    if not valid or (tag and not re.fullmatch(r"\w[\w.-]{0,127}", tag)):
        raise DockerError("invalid reference format")
    if digest and not re.fullmatch(r"sha256:[a-f0-9]{64}", digest):
        raise DockerError("invalid reference format")
    reference = digest or tag or "latest"
    sep = "@" if digest else ":"
    repo = path.removeprefix("library/") if registry == "docker.io" else f"{registry}/{path}"
    return Ref(registry, path, reference, f"{registry}/{path}{sep}{reference}", f"{repo}{sep}{reference}")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Docker:
    """One ``docker`` invocation inside an instance sandbox (``$BREV_SIM_ROOT``/``$BREV_SIM_INSTANCE``)."""

    def __init__(self, root: str | None, argv: list[str]) -> None:
        self.root = root
        self.argv = argv
        self.sub = ""
        self.instance_id = os.environ.get("BREV_SIM_INSTANCE", "")
        self.instance_name = os.environ.get("BREV_SIM_INSTANCE_NAME", "")
        self.cfg = _c.load_section(root, "docker", DEFAULT_DOCKER_CONFIG)
        self.inst_dir = os.path.join(root, "instances", self.instance_id) if root and self.instance_id else ""
        self.ddir = os.path.join(self.inst_dir, "docker") if self.inst_dir else ""
        home = os.environ.get("HOME") or os.path.expanduser("~")
        self.config_dir = os.environ.get("DOCKER_CONFIG") or os.path.join(home, ".docker")
        self.record: dict[str, Any] = {}
        self.call_id = os.urandom(8).hex()
        self.started = time.time()

    def write_record(self, phase: str, code: int | None) -> None:
        """Append this invocation to ``<root>/docker_calls.jsonl`` (a ``start`` and an ``end`` line)."""
        if not self.root or not os.path.isdir(self.root):
            return
        red, inline, password = redact_argv(self.argv, self.sub)
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
            **self.record,
        }
        with contextlib.suppress(OSError):
            _c.append_jsonl(os.path.join(self.root, CALLS_FILE), rec)

    def require_daemon(self, prefix: str = "", see: str | None = None) -> None:
        if not self.ddir or self.cfg.get("daemon_down"):
            raise DockerError(prefix + DAEMON_DOWN, 125 if prefix else 1, see)
        os.makedirs(os.path.join(self.ddir, "containers"), exist_ok=True)

    def meta(self) -> dict:
        return _c.read_json(os.path.join(self.inst_dir, "meta.json"), {}) or {}

    @property
    def client_config_path(self) -> str:
        return os.path.join(self.config_dir, "config.json")

    def images(self) -> dict[str, dict]:
        return _c.read_json(os.path.join(self.ddir, "images.json"), {}) or {}

    def image_size(self, ref: Ref) -> int:
        """``image_bytes`` of ``ref`` (an int for every image, or by reference with ``"*"`` for the rest)."""
        sizes: Any = self.cfg.get("image_bytes") or 0
        if isinstance(sizes, dict):
            sizes = sizes.get(ref.familiar, sizes.get(ref.canonical, sizes.get("*", 0)))
        return int(sizes or 0)

    def download(self, ref: Ref, head: str) -> int:
        """The download of an absent image: ``image_bytes`` at ``pull_bytes_per_second``, completing only once the
        ``pull_gate`` file exists; returns the bytes downloaded."""
        size, speed = self.image_size(ref), float(self.cfg.get("pull_bytes_per_second") or 0)
        gate = str(self.cfg.get("pull_gate") or "")
        if gate:
            home = os.environ.get("HOME") or os.path.expanduser("~")
            waited_until = time.monotonic() + float(self.cfg.get("pull_gate_timeout") or 60)
            while not os.path.exists(os.path.join(home, gate)):
                if time.monotonic() > waited_until:
                    raise DockerError(f'Error response from daemon: Get "{head}": net/http: TLS handshake timeout')
                time.sleep(0.05)
        if size and speed > 0:
            time.sleep(size / speed)
        return size

    def pull(self, ref: Ref, write: Callable[[str], None]) -> None:
        """Pull ``ref`` into the instance's image store (auth, missing-manifest and failure knobs)."""
        head = f"https://{'registry-1.docker.io' if ref.registry == 'docker.io' else ref.registry}/v2/"
        fail = self.cfg.get("fail_pull")
        if (
            (ref.canonical in fail or ref.familiar in fail)
            if isinstance(fail, list)
            else _c.consume_knob(self.root, "docker", "fail_pull", "pull")
        ):
            raise DockerError(
                f'Error response from daemon: Get "{head}": net/http: request canceled while waiting for connection '
                "(Client.Timeout exceeded while awaiting headers)"
            )
        auths = (_c.read_json(self.client_config_path, {}) or {}).get("auths") or {}
        if ref.registry == "nvcr.io" and not self.cfg.get("nvcr_anonymous_pull") and "nvcr.io" not in auths:
            raise DockerError(
                f'Error response from daemon: Head "{head}{ref.path}/manifests/{ref.reference}": '
                "unauthorized: authentication required"
            )
        repo = ref.familiar.rsplit("@" if "@" in ref.familiar else ":", 1)[0]
        if {ref.familiar, ref.canonical, repo} & set(self.cfg.get("missing_images") or []):
            raise DockerError(
                f"Error response from daemon: manifest for {ref.familiar} not found: manifest unknown: manifest unknown"
            )
        write(f"{ref.reference}: Pulling from {ref.path}\n")
        with _c.flocked(os.path.join(self.ddir, f"pull-{sha(ref.canonical)[:16]}.lock")):  # one download per image
            present = ref.canonical in self.images()
            size = 0 if present else self.download(ref, head)
            with _c.flocked(os.path.join(self.ddir, "lock")):
                imgs = self.images()
                img = imgs.setdefault(ref.canonical, {"pull_count": 0, "downloads": 0, "first_pulled": time.time()})
                img["pull_count"] += 1
                img["downloads"] += 0 if present else 1
                img["bytes"] = int(img.get("bytes", 0)) + size
                _c.write_json_atomic(os.path.join(self.ddir, "images.json"), imgs)
        self.record["bytes"] = int(self.record.get("bytes", 0)) + size
        if not present:
            write("".join(f"{sha(f'layer{i}:{ref.canonical}')[:12]}: Pull complete\n" for i in range(3)))
        status = "Image is up to date for" if present else "Downloaded newer image for"
        write(f"Digest: sha256:{sha(ref.canonical)}\nStatus: {status} {ref.familiar}\n{ref.familiar}\n")
        self.record.setdefault("pulled", []).append(ref.canonical)
