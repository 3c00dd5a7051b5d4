"""``docker info``, ``login`` and ``pull``, the command table (:data:`COMMANDS`), the dispatcher and the entry
point of the fake ``docker``. Docker's other commands are listed so that they fail saying they are not simulated;
a word Docker does not know fails as Docker fails it."""

from __future__ import annotations

import contextlib
import os
import re
import sys

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_brev.flags import Flag
from airflow_provider_brev.testing.fake_docker.client import (
    DAEMON_DOWN,
    DOCKER_VERSION,
    Docker,
    DockerError,
    err,
    out,
    parse,
    parse_ref,
)
from airflow_provider_brev.testing.fake_docker.manage import FLAGS as MANAGE_FLAGS
from airflow_provider_brev.testing.fake_docker.manage import (
    cmd_images,
    cmd_inspect,
    cmd_kill,
    cmd_logs,
    cmd_ps,
    cmd_rm,
    cmd_stop,
    cmd_wait,
)
from airflow_provider_brev.testing.fake_docker.run import RUN_FLAGS, cmd_run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def cmd_info(d: Docker, args: list[str]) -> int:
    parse(args, [], "See 'docker info --help'.")
    out(f"Client: Docker Engine - Community\n Version:    {DOCKER_VERSION}\n Context:    default\n\nServer:\n")
    if not d.ddir or d.cfg.get("daemon_down"):
        raise DockerError(DAEMON_DOWN)
    out(
        f" Server Version: {DOCKER_VERSION}\n Storage Driver: overlay2\n Cgroup Version: 2\n"
        " Runtimes: io.containerd.runc.v2 nvidia runc\n Default Runtime: runc\n Operating System: Ubuntu 22.04.5 LTS\n"
        f" Architecture: x86_64\n CPUs: {os.cpu_count() or 1}\n Name: {d.instance_name or 'brev-sim'}\n"
        f" GPUs: {int(d.meta().get('gpu_count') or 0)}\n\n"
    )
    return 0


LOGIN_FLAGS = [Flag("username", "u", "str"), Flag("password", "p", "str"), Flag("password-stdin")]


def cmd_login(d: Docker, args: list[str]) -> int:
    see = "See 'docker login --help'."
    v, pos = parse(args, LOGIN_FLAGS, see)
    if len(pos) > 1:
        raise DockerError(f'"docker login" requires at most 1 argument.\n{see}')
    registry = re.sub(r"^https?://", "", pos[0] if pos else "docker.io").split("/", 1)[0]
    registry = "docker.io" if registry in ("index.docker.io", "registry-1.docker.io") else registry
    user, password = v["username"], v["password"]
    d.record.update(registry=registry, username=user, password_stdin=v["password-stdin"])
    if v["password-stdin"]:
        if password:
            raise DockerError("--password and --password-stdin are mutually exclusive")
        if not user:
            raise DockerError("Must provide --username with --password-stdin")
        password = sys.stdin.read().removesuffix("\n").removesuffix("\r")
        d.record["stdin_read"] = True
    elif password:
        err("WARNING! Using --password via the CLI is insecure. Use --password-stdin.\n")
    if not user or not password:
        raise DockerError("Error: Cannot perform an interactive login from a non TTY device")
    d.require_daemon()
    if registry == "nvcr.io" and (user != "$oauthtoken" or password in (d.cfg.get("revoked_ngc_keys") or [])):
        d.record["login_error"] = "username" if user != "$oauthtoken" else "revoked_key"
        raise DockerError(
            'Error response from daemon: Get "https://nvcr.io/v2/": unauthorized: authentication required'
        )
    os.makedirs(d.config_dir, exist_ok=True)
    conf = _c.read_json(d.client_config_path, {}) or {}
    conf.setdefault("auths", {})[registry] = {"username": user, "note": "fake docker: no credential stored"}
    _c.write_json_atomic(d.client_config_path, conf)
    with contextlib.suppress(OSError):
        os.chmod(d.client_config_path, 0o600)
    err(  # docker 24's notice, word for word (the provider keeps it out of the task log)
        f"WARNING! Your password will be stored unencrypted in {d.client_config_path}.\n"
        "Configure a credential helper to remove this warning. See\n"
        "https://docs.docker.com/engine/reference/commandline/login/#credential-stores\n\n"
    )
    out("Login Succeeded\n")
    return 0


def cmd_pull(d: Docker, args: list[str]) -> int:
    _, pos = parse(args, [], "See 'docker pull --help'.")
    if len(pos) != 1:
        raise DockerError("\"docker pull\" requires exactly 1 argument.\nSee 'docker pull --help'.")
    d.record["image"] = pos[0]
    d.require_daemon()
    d.pull(parse_ref(pos[0]), out)
    return 0


#: the simulated commands
HANDLERS: dict[str, Callable[[Docker, list[str]], int]] = {
    "images": cmd_images,
    "info": cmd_info,
    "inspect": cmd_inspect,
    "kill": cmd_kill,
    "login": cmd_login,
    "logs": cmd_logs,
    "ps": cmd_ps,
    "pull": cmd_pull,
    "rm": cmd_rm,
    "run": cmd_run,
    "stop": cmd_stop,
    "wait": cmd_wait,
}
#: management commands: ``docker container ls`` is ``docker ps`` (their other subcommands are not simulated)
MANAGEMENT: dict[str, dict[str, str]] = {
    "container": {
        "inspect": "inspect",
        "kill": "kill",
        "logs": "logs",
        "ls": "ps",
        "list": "ps",
        "ps": "ps",
        "rm": "rm",
        "remove": "rm",
        "run": "run",
        "stop": "stop",
        "wait": "wait",
    },
    "image": {"inspect": "inspect", "ls": "images", "list": "images", "pull": "pull"},
    "system": {"info": "info"},
}
#: Docker 27's other commands: they exist, and fail here saying the simulator does not simulate them
UNSIMULATED = [
    "attach",
    "build",
    "builder",
    "buildx",
    "checkpoint",
    "commit",
    "compose",
    "config",
    "context",
    "cp",
    "create",
    "diff",
    "events",
    "exec",
    "export",
    "history",
    "import",
    "load",
    "logout",
    "manifest",
    "network",
    "node",
    "pause",
    "plugin",
    "port",
    "push",
    "rename",
    "restart",
    "rmi",
    "save",
    "search",
    "secret",
    "service",
    "stack",
    "start",
    "stats",
    "swarm",
    "tag",
    "top",
    "trust",
    "unpause",
    "update",
    "version",
    "volume",
]
#: the flags of each simulated command (``docs/simulator.md``'s table is checked against these)
FLAGS: dict[str, list[Flag]] = {"info": [], "login": LOGIN_FLAGS, "pull": [], "run": RUN_FLAGS, **MANAGE_FLAGS}


def _unsimulated(word: str) -> DockerError:
    return DockerError(f"docker: '{word}' is a docker command the Brev simulator does not simulate (docs/simulator.md)")


def _resolve(d: Docker, words: list[str]) -> tuple[Callable[[Docker, list[str]], int], list[str]]:
    """The handler of ``docker <words...>`` and its arguments."""
    word, rest = words[0], words[1:]
    if word in HANDLERS:
        return HANDLERS[word], rest
    if word in MANAGEMENT:
        if not rest or rest[0].startswith("-"):
            raise DockerError(
                f"Usage:  docker {word} COMMAND\n\nRun 'docker {word} COMMAND --help' for more information"
            )
        target = MANAGEMENT[word].get(rest[0])
        if target is None:
            raise _unsimulated(f"{word} {rest[0]}")
        d.sub = f"{word} {rest[0]}"
        typed = ["--type", word] if target == "inspect" else []  # `container inspect` looks at containers only
        return HANDLERS[target], [*typed, *rest[1:]]
    if word in UNSIMULATED:
        raise _unsimulated(word)
    raise DockerError(f"docker: '{word}' is not a docker command.\nSee 'docker --help'")


def main(argv: list[str], root: str | None = None) -> int:
    d = Docker(_c.sim_root(root), list(argv))
    code = 1
    try:
        v, pos = parse(argv, [Flag("config", "", "str"), Flag("version", "v")], "See 'docker --help'.", False)
        d.config_dir = v["config"] or d.config_dir
        d.sub = pos[0] if pos else ""
        if v["version"] or not pos:
            out(f"Docker version {DOCKER_VERSION}, build ce12230\n" if v["version"] else "Usage:  docker COMMAND\n")
            code = 0 if v["version"] or v["help"] else 1
        else:
            handler, rest = _resolve(d, pos)
            code = handler(d, rest)
    except DockerError as exc:
        err("".join(f"{text}\n" for text in (exc.message, exc.see) if text))
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    finally:
        d.write_record("end", code)
    return code
