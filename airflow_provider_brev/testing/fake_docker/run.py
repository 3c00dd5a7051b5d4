"""``docker run`` (foreground, as the provider uses it): option checks, bind mounts, an implicit pull, and the
container as a child process in its own process group. Signals the client gets are forwarded to it (docker's
``--sig-proxy``), so a SIGTERM to the job's process group stops the container and ``docker run`` exits 143.

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
import shutil
import signal
import subprocess
import sys

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_brev.flags import Flag
from airflow_provider_brev.testing.fake_docker.client import DockerError, err, parse, parse_ref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from airflow_provider_brev.testing.fake_docker.client import Docker

SEE = "See 'docker run --help'."
RUN_FLAGS = [
    Flag("rm"),
    Flag("name", "", "str"),
    Flag("gpus", "", "str"),
    Flag("volume", "v", "list"),
    Flag("env", "e", "list"),
    Flag("shm-size", "", "str"),
    Flag("ipc", "", "str"),
    Flag("workdir", "w", "str"),
    Flag("user", "u", "str"),
]
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


def cmd_run(d: Docker, args: list[str]) -> int:
    v, pos = parse(args, RUN_FLAGS, SEE, interspersed=False)
    if not pos:
        raise DockerError(
            "docker: 'docker run' requires at least 1 argument.\n\nUsage:  docker run [OPTIONS] IMAGE [COMMAND] "
            "[ARG...]\n\nSee 'docker run --help' for more information",
            125,
        )
    image, cmd = pos[0], pos[1:]
    name, workdir = v["name"], v["workdir"]
    d.record.update(image=image, cmd=cmd, container_name=name or None, gpus=v["gpus"] or None)
    d.record.update(shm_size=v["shm-size"] or None, ipc=v["ipc"] or None, user=v["user"] or None)
    d.record["env_keys"] = [e.split("=", 1)[0] for e in v["env"]]
    size = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]?)b?", (v["shm-size"] or "64m").lower())
    if size is None:
        raise DockerError(f'invalid argument "{v["shm-size"]}" for "--shm-size" flag: invalid size', 125, SEE)
    shm = 12 * 1024**3 if v["ipc"] == "host" else int(float(size[1]) * 1024 ** " kmgt".index(size[2] or " "))
    if workdir and not workdir.startswith("/"):
        raise _daemon_error(f"the working directory '{workdir}' is invalid, it needs to be an absolute path")
    mounts = [_volume(spec) for spec in v["volume"]]
    d.record["mounts"] = [[src, dest, "rw" if rw else "ro"] for src, dest, rw in mounts]
    d.require_daemon("docker: ", SEE)
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
    cdir = os.path.join(d.ddir, "containers", cid)
    rootfs = os.path.join(cdir, "rootfs")
    for sub in ("root", "tmp"):
        os.makedirs(os.path.join(rootfs, sub), exist_ok=True)
    d.record["container_id"] = cid
    translate = _translator(mounts)
    path = f"{d.root}/tools/container-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {"PATH": path, "HOME": os.path.join(rootfs, "root"), "HOSTNAME": cid[:12], "LANG": "C.UTF-8"}
    if gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    for item in v["env"]:
        key, eq, val = item.partition("=")
        if eq:
            env[key] = translate(val)
        elif key in os.environ:
            env[key] = os.environ[key]
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
    os.makedirs(cwd, exist_ok=True)
    argv = [translate(a) for a in cmd or ["/bin/bash"]]
    try:
        if "/" in argv[0]:
            exe = argv[0] if os.path.exists(argv[0]) else _to_host(mounts, rootfs, argv[0])
            if not os.path.exists(exe):
                raise _oci_error(f'exec: "{argv[0]}": stat {argv[0]}: no such file or directory')
        else:
            exe = shutil.which(argv[0], path=path) or ""
            if not exe or not _c.image_provides(ref.canonical, os.path.basename(exe)):
                raise _oci_error(f'exec: "{argv[0]}": executable file not found in $PATH')
    except DockerError as exc:
        shutil.rmtree(cdir, ignore_errors=True)
        exc.code = 127
        raise
    d.write_record("start", None)  # a client killed while attached still leaves a trace
    return _run_attached(d, cdir, exe, argv, env, cwd, bool(v["rm"]))


def _run_attached(d: Docker, cdir: str, exe: str, argv: list[str], env: dict[str, str], cwd: str, rm: bool) -> int:
    """Run the container process, forwarding signals to it; its other processes die with it (``killpg``)."""
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
    proc = subprocess.Popen(argv, executable=exe, env=env, cwd=cwd, stdin=subprocess.DEVNULL, process_group=0)
    child.append(proc.pid)
    for signum in pending:
        forward(signum, None)
    rc = proc.wait()
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if rm:
        shutil.rmtree(cdir, ignore_errors=True)
    code = rc if rc >= 0 else 128 - rc
    d.record["container_exit_code"] = code
    return code
