"""``docker run``: the container process under a detached shim, attached log streaming and signal proxying."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_docker.client import (
    CONTAINER_PATH_DIRS,
    DockerError,
    _sha,
    _write_fd,
    err,
    out,
    parse_flags,
    parse_ref,
)
from airflow_provider_brev.testing.fake_docker.run_options import (
    _ADJ,
    _NAME_RE,
    _SURN,
    RUN_FLAGS,
    _oci_error,
    _which,
    container_path_to_host,
    mount_translator,
    parse_env_file,
    parse_gpus,
    parse_mount,
    parse_size,
    parse_volume,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from airflow_provider_brev.testing.fake_docker.daemon import Docker


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
