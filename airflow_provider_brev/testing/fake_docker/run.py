"""``docker run``: option checks, bind mounts, an implicit pull, the container created (:mod:`.containers`) and
started under its monitor; then either its id printed (``-d``) or, attached, its output streamed until it exits
and its exit code returned. An attached client forwards the signals it gets to the container's process (docker's
``--sig-proxy``), so a SIGTERM to the job's process group stops the container and ``docker run`` exits 143; a
client killed outright leaves the container running, as with real Docker (``docker stop`` ends it).

There is no chroot: container paths are mapped to host paths through the ``-v`` binds. Every command argument,
``-w`` and ``-e`` value naming a path under a mounted container path (at a word boundary, also inside
``bash -c`` scripts and ``key=/path`` overrides) is rewritten to the host path, and the mount table is handed to
the fake TAO entrypoints (``$BREV_SIM_CONTAINER_MOUNTS``). Paths outside every mount land in the container's
private root (``containers/<id>/rootfs``), which ``--rm`` removes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import sys

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_brev.flags import Flag, write_fd
from airflow_provider_brev.testing.fake_docker import containers as _ct
from airflow_provider_brev.testing.fake_docker.client import DockerError, err, out, parse, parse_ref, sha

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from airflow_provider_brev.testing.fake_docker.client import Docker

SEE = "See 'docker run --help'."
RUN_FLAGS = [
    Flag("rm"),
    Flag("detach", "d"),
    Flag("name", "", "str"),
    Flag("label", "l", "list"),
    Flag("cidfile", "", "str"),
    Flag("gpus", "", "str"),
    Flag("volume", "v", "list"),
    Flag("env", "e", "list"),
    Flag("env-file", "", "list"),
    Flag("entrypoint", "", "str"),
    Flag("shm-size", "", "str"),
    Flag("ipc", "", "str"),
    Flag("workdir", "w", "str"),
    Flag("user", "u", "str"),
    Flag("init"),
    Flag("network", "", "str"),
]
_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_NAME_RE = re.compile(r"/?[a-zA-Z0-9][a-zA-Z0-9_.-]+")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _daemon_error(detail: str) -> DockerError:
    return DockerError(f"docker: Error response from daemon: {detail}.", 125, SEE)


def _oci_error(detail: str) -> DockerError:
    return _daemon_error(
        "failed to create task for container: failed to create shim task: OCI runtime create failed: runc create "
        f"failed: unable to start container process: error during container init: {detail}: unknown"
    )


def _volume(spec: str) -> tuple[str, str, bool]:
    """``-v /host:/container[:ro]`` -> (host, container, rw); docker creates a missing host directory."""
    src, _, rest = spec.partition(":")
    dest, _, mode = rest.partition(":")
    if not dest.startswith("/") or not src.startswith("/") or mode not in ("", "ro", "rw"):
        raise _daemon_error(f"invalid volume specification: '{spec}'")
    os.makedirs(src, exist_ok=True)
    return os.path.normpath(src), os.path.normpath(dest), mode != "ro"


def _to_host(mounts: list[tuple[str, str, bool]], rootfs: str, path: str) -> str:
    path = os.path.normpath(path)
    for src, dest, _rw in sorted(mounts, key=lambda m: -len(m[1])):
        if path == dest or path.startswith(dest.rstrip("/") + "/"):
            return src + path[len(dest) :]
    return os.path.join(rootfs, path.lstrip("/"))


def _translator(mounts: list[tuple[str, str, bool]]) -> Any:
    """Rewrite mounted container paths (at word boundaries) in a string to their host paths."""
    if not mounts:
        return lambda s: s
    by_len = sorted(mounts, key=lambda m: -len(m[1]))
    table = {dest: src for src, dest, _rw in by_len}
    alt = "|".join(re.escape(dest) for _src, dest, _rw in by_len)
    pattern = re.compile(r"(?<![^\s'\"=:(,;<>|&])(" + alt + r")(?=$|[/\s'\"\);:,|&<>])")
    return lambda s: pattern.sub(lambda m: table[m.group(1)], s)


def _gpus(d: Docker, value: str) -> int:
    if not value:
        return 0
    have = int(d.meta().get("gpu_count") or 0)
    req = value.strip("\"'")
    if req != "all" and not req.isdigit():
        raise DockerError(f'invalid argument "{value}" for "--gpus" flag: unexpected key \'{req}\'', 125, SEE)
    if have == 0:
        raise _daemon_error('could not select device driver "" with capabilities: [[gpu]]')
    gpus = have if req == "all" else int(req)
    if gpus > have:
        raise _oci_error(
            "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
            f"nvidia-container-cli: device error: {gpus - 1}: unknown device"
        )
    return gpus


def _env_file(path: str) -> list[str]:
    """``--env-file``: ``KEY=VALUE`` lines taken literally, a bare ``KEY`` from the client's environment, ``#``
    comments and blank lines skipped."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise DockerError(f"docker: open {path}: {(exc.strerror or 'error').lower()}.", 125, SEE) from None
    items = []
    for line in (raw.lstrip() for raw in lines):
        if not line or line.startswith("#"):
            continue
        key = line.partition("=")[0]
        if not key or re.search(r"\s", key):
            raise DockerError(f"docker: poorly formatted environment: variable '{key}' contains whitespaces.", 125, SEE)
        items.append(line)
    return items


def _generated_name(cid: str) -> str:
    """A name like Docker's ``adjective_surname`` for a container run without ``--name``."""
    left = ("admiring", "brave", "clever", "eager", "focused", "jolly", "keen", "quirky")
    right = ("curie", "hopper", "lovelace", "noether", "shannon", "tesla", "turing", "wozniak")
    return f"{left[int(cid[0], 16) % 8]}_{right[int(cid[1], 16) % 8]}{int(cid[2:5], 16) % 100}"


def _check_name(d: Docker, name: str) -> None:
    if name and not _NAME_RE.fullmatch(name):
        raise _daemon_error(f"Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed")
    owner = _ct.name_owner(d, name.lstrip("/")) if name else None
    if owner:
        raise _daemon_error(
            f'Conflict. The container name "/{name.lstrip("/")}" is already in use by container "{owner}". You '
            "have to remove (or rename) that container to be able to reuse that name"
        )


def _resolve_exe(mounts: list[tuple[str, str, bool]], rootfs: str, argv: list[str], path: str, image: str) -> str:
    if "/" in argv[0]:
        exe = argv[0] if os.path.exists(argv[0]) else _to_host(mounts, rootfs, argv[0])
        if not os.path.exists(exe):
            raise _oci_error(f'exec: "{argv[0]}": stat {argv[0]}: no such file or directory')
        return exe
    exe = shutil.which(argv[0], path=path) or ""
    if not exe or not _c.image_provides(image, os.path.basename(exe)):
        raise _oci_error(f'exec: "{argv[0]}": executable file not found in $PATH')
    return exe


def cmd_run(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, RUN_FLAGS, SEE, interspersed=False)
    if not pos:
        raise DockerError(
            "docker: 'docker run' requires at least 1 argument.\n\nUsage:  docker run [OPTIONS] IMAGE [COMMAND] "
            "[ARG...]\n\nSee 'docker run --help' for more information",
            125,
        )
    image, cmd = pos[0], pos[1:]
    name, workdir, entrypoint = v["name"], v["workdir"], v["entrypoint"]
    labels = {item.partition("=")[0]: item.partition("=")[2] for item in v["label"]}
    d.record.update(image=image, cmd=cmd, container_name=name or None, gpus=v["gpus"] or None)
    d.record.update(shm_size=v["shm-size"] or None, ipc=v["ipc"] or None, user=v["user"] or None)
    d.record.update(detach=v["detach"], labels=labels, cidfile=v["cidfile"] or None, entrypoint=entrypoint or None)
    env_items = [item for path in v["env-file"] for item in _env_file(path)] + v["env"]
    d.record["env_keys"] = [e.split("=", 1)[0] for e in env_items]
    size = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]?)b?", (v["shm-size"] or "64m").lower())
    if size is None:
        raise DockerError(f'invalid argument "{v["shm-size"]}" for "--shm-size" flag: invalid size', 125, SEE)
    shm = 12 * 1024**3 if v["ipc"] == "host" else int(float(size[1]) * 1024 ** " kmgt".index(size[2] or " "))
    if workdir and not workdir.startswith("/"):
        raise _daemon_error(f"the working directory '{workdir}' is invalid, it needs to be an absolute path")
    if v["cidfile"] and os.path.exists(v["cidfile"]):
        raise DockerError(
            f"docker: Container ID file found, make sure the other container isn't running or delete {v['cidfile']}.",
            125,
            SEE,
        )
    mounts = [_volume(spec) for spec in v["volume"]]
    d.record["mounts"] = [[src, dest, "rw" if rw else "ro"] for src, dest, rw in mounts]
    d.require_daemon("docker: ", SEE)
    _check_name(d, name)
    try:
        ref = parse_ref(image)
        if ref.canonical not in d.images():
            err(f"Unable to find image '{ref.familiar}' locally\n")
            d.record["implicit_pull"] = True
            d.pull(ref, err)
    except DockerError as exc:
        raise DockerError(f"docker: {exc.message}.", 125, SEE) from None
    gpus = _gpus(d, v["gpus"])
    cid = os.urandom(32).hex()
    translate = _translator(mounts)
    path = f"{d.root}/tools/container-bin:{_IMAGE_PATH}"
    cdir = _ct.container_dir(d, cid)
    rootfs = os.path.join(cdir, "rootfs")
    name = name.lstrip("/") or _generated_name(cid)
    env = {"PATH": path, "HOME": os.path.join(rootfs, "root"), "HOSTNAME": cid[:12], "LANG": "C.UTF-8"}
    if gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    for item in env_items:
        key, eq, val = item.partition("=")
        if eq:
            env[key] = translate(val)
        elif key in os.environ:
            env[key] = os.environ[key]
    user_env = {key: val for key, val in env.items() if key not in ("PATH", "HOME", "HOSTNAME", "LANG")}
    config_env = [f"PATH={_IMAGE_PATH}", *(f"{key}={val}" for key, val in user_env.items())]
    env.update(
        BREV_SIM_ROOT=d.root or "",
        BREV_SIM_INSTANCE=d.instance_id,
        BREV_SIM_INSTANCE_NAME=d.instance_name,
        BREV_SIM_CONTAINER=cid,
        BREV_SIM_CONTAINER_NAME=name,
        BREV_SIM_CONTAINER_IMAGE=ref.canonical,
        BREV_SIM_CONTAINER_GPUS=str(gpus),
        BREV_SIM_CONTAINER_VRAM_GB=str(int(d.meta().get("vram_per_gpu_gb") or 0)),
        BREV_SIM_CONTAINER_SHM_BYTES=str(shm),
        BREV_SIM_CONTAINER_IPC=v["ipc"] or "private",
        BREV_SIM_CONTAINER_USER=v["user"],
        BREV_SIM_CONTAINER_ROOTFS=rootfs,
        BREV_SIM_CONTAINER_MOUNTS=json.dumps(mounts),
    )
    cwd = _to_host(mounts, rootfs, workdir) if workdir else rootfs
    argv = [*([entrypoint] if entrypoint else []), *(cmd or ([] if entrypoint else ["/bin/bash"]))]
    config = {
        "Id": cid,
        "Created": _ct.now_iso(),
        "Path": argv[0],
        "Args": argv[1:],
        "Image": f"sha256:{sha(ref.canonical)}",
        "Name": f"/{name}",
        "RestartCount": 0,
        "Driver": "overlay2",
        "Platform": "linux",
        "HostConfig": {
            "Binds": list(v["volume"]) or None,
            "AutoRemove": bool(v["rm"]),
            "NetworkMode": v["network"] or "bridge",
            "IpcMode": v["ipc"] or "private",
            "ShmSize": shm,
            "Init": bool(v["init"]),
            "DeviceRequests": [{"Driver": "", "Count": -1 if v["gpus"] == "all" else gpus, "Capabilities": [["gpu"]]}]
            if gpus
            else None,
        },
        "Mounts": [
            {
                "Type": "bind",
                "Source": s,
                "Destination": t,
                "Mode": "" if rw else "ro",
                "RW": rw,
                "Propagation": "rprivate",
            }
            for s, t, rw in mounts
        ],
        "Config": {
            "Hostname": cid[:12],
            "User": v["user"],
            "Env": config_env,
            "Cmd": cmd or (None if entrypoint else ["/bin/bash"]),
            "Image": image,
            "WorkingDir": workdir,
            "Entrypoint": [entrypoint] if entrypoint else None,
            "Labels": labels,
        },
        "exec": {"argv": [translate(a) for a in argv], "exe": "", "env": env, "cwd": cwd},
    }
    with _c.flocked(os.path.join(d.ddir, "containers.lock")):
        _check_name(d, name)
        for sub in ("root", "tmp"):
            os.makedirs(os.path.join(rootfs, sub), exist_ok=True)
        os.makedirs(cwd, exist_ok=True)
        _c.write_json_atomic(os.path.join(cdir, "config.json"), config)
    d.record.update(container_id=cid, container_name=name)
    if v["cidfile"]:
        with open(v["cidfile"], "x", encoding="utf-8") as fh:
            fh.write(cid)
    try:
        config["exec"]["exe"] = _resolve_exe(mounts, rootfs, config["exec"]["argv"], path, ref.canonical)
    except DockerError as exc:
        _fail_start(d, cid, exc, bool(v["rm"]))
        raise
    _c.write_json_atomic(os.path.join(cdir, "config.json"), config)
    if v["detach"]:
        try:
            _ct.start_monitor(d, cid, attached=False)
        except OSError as exc:
            _fail_start(d, cid, _oci_error(str(exc)), bool(v["rm"]))
            raise _oci_error(str(exc)) from None
        out(f"{cid}\n")
        return 0
    d.write_record("start", None)  # a client killed while attached still leaves a trace
    return _run_attached(d, cid, bool(v["rm"]))


def _fail_start(d: Docker, cid: str, exc: DockerError, rm: bool) -> None:
    """A container whose process cannot start stays ``created`` with the error (removed with ``--rm``)."""
    exc.code = 127 if "not found" in exc.message or "no such file" in exc.message else 126
    if rm:
        _ct.remove(d, cid)
        return
    state = {**_ct.initial_state(), "ExitCode": exc.code, "Error": exc.message.removeprefix("docker: ")}
    _c.write_json_atomic(os.path.join(_ct.container_dir(d, cid), "state.json"), state)


def _run_attached(d: Docker, cid: str, rm: bool) -> int:
    """Start the container, forward the signals this client gets to its process, stream its output until it exits
    and return its exit code."""
    child: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if not child:
            pending.append(signum)
        with contextlib.suppress(OSError, IndexError):
            os.kill(child[0], signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid, exit_r, done_w = _ct.start_monitor(d, cid, attached=True)
    except OSError as exc:
        _fail_start(d, cid, _oci_error(str(exc)), rm)
        raise _oci_error(str(exc)) from None
    assert exit_r is not None and done_w is not None
    child.append(pid)
    for signum in pending:
        forward(signum, None)
    cdir = _ct.container_dir(d, cid)
    logs = [(open(os.path.join(cdir, name), "rb"), fd) for name, fd in (("stdout.log", 1), ("stderr.log", 2))]  # noqa: SIM115
    code: int | None = None
    try:
        while code is None:
            ready, _, _ = select.select([exit_r], [], [], 0.05)
            _pump(logs)
            if ready:
                answer = os.read(exit_r, 64).strip()
                code = int(answer) if answer.isdigit() else _ct.exit_code(d, cid)
                code = _ct.LOST_EXIT_CODE if code is None else code
        _pump(logs)
    finally:
        for fh, _fd in logs:
            fh.close()
        os.close(exit_r)
        os.close(done_w)  # a --rm monitor removes the container now
    if rm:
        _ct.wait_exit(d, cid, 10.0)  # as Docker's client, return once the container is gone
    d.record["container_exit_code"] = code
    return code


def _pump(logs: list[tuple[Any, int]]) -> None:
    """Copy what the container wrote since the last call to this client's stdout/stderr."""
    for fh, fd in logs:
        while chunk := fh.read(1 << 20):
            with contextlib.suppress(OSError):  # the reader went away: drop the output
                write_fd(fd, chunk)
