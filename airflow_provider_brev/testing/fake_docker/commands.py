"""``docker info``, ``login`` and ``pull``, the dispatcher and the entry point of the fake ``docker``."""

from __future__ import annotations

import contextlib
import os
import sys

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_docker.client import (
    DAEMON_DOWN,
    DOCKER_BUILD,
    DOCKER_VERSION,
    DockerError,
    err,
    out,
    parse_flags,
    registry_key,
)
from airflow_provider_brev.testing.fake_docker.daemon import Docker, render
from airflow_provider_brev.testing.fake_docker.run import cmd_run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


# ------------------------------------------------------------------------------------------ commands


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


# ------------------------------------------------------------------------------------ containers


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
    "login": cmd_login,
    "pull": cmd_pull,
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
