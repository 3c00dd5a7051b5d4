"""The fake ``docker``'s containers: their state on the instance, shared by every ``docker`` invocation there, and
the monitor that runs one container's process (containerd's shim).

A container is a directory ``<instance>/docker/containers/<id>/``: ``config.json`` (what ``run`` was given, in
``docker inspect``'s shape, plus how to start the process), ``state.json`` (``State`` of ``docker inspect``),
``stdout.log``/``stderr.log`` (what ``docker logs`` prints), ``shim.lock`` and ``rootfs/``.

The monitor is a process of its own session, started by ``docker run`` with its standard streams on ``/dev/null``
(it never holds the ``brev exec`` pipes open), so a container outlives the ``docker run`` client as on a real
host. It holds ``shim.lock`` for as long as it lives: a ``running`` container whose lock is free lost its monitor
(the instance stopped, or was deleted) and reads as exited with code 255. It starts the container's process in a
session and process group of its own, records its exit code (``128 + signal`` when a signal ended it: 143 after
SIGTERM, 137 after SIGKILL), then kills what is left of the group (the container's other processes die with it)
and, with ``--rm``, removes the container once its attached client has read the exit code. Every process carries
the sandbox's ``BREV_SIM_ROOT``/``BREV_SIM_INSTANCE``, so the simulator finds and stops them with the instance.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

from airflow_provider_brev.testing import fake_common as _c

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Docker(Protocol):
        """Whatever holds an instance's docker state directory (a :class:`~.client.Docker` invocation)."""

        ddir: str


ZERO_TIME = "0001-01-01T00:00:00Z"
#: the exit code of a container whose monitor is gone (what Docker reports after the host went down)
LOST_EXIT_CODE = 255
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_SHIM_BOOT = (
    "import sys\n"
    f"sys.path.insert(0, {_SOURCE_ROOT!r})\n"
    "from airflow_provider_brev.testing.fake_docker.containers import shim_main\n"
    "sys.exit(shim_main(sys.argv[1:]))"
)


def now_iso(ts: float | None = None) -> str:
    """RFC 3339 with nanoseconds, as Docker prints times."""
    ts = time.time() if ts is None else ts
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def containers_dir(d: Docker) -> str:
    return os.path.join(d.ddir, "containers")


def container_dir(d: Docker, cid: str) -> str:
    return os.path.join(containers_dir(d), cid)


def monitor_alive(cdir: str) -> bool:
    """Whether the container's monitor still holds ``shim.lock``."""
    try:
        fd = os.open(os.path.join(cdir, "shim.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def load(d: Docker, cid: str) -> dict[str, Any] | None:
    """The container's ``docker inspect`` object (None when it does not exist); a ``running`` container whose
    monitor is gone reads as exited (255)."""
    cdir = container_dir(d, cid)
    cfg = _c.read_json(os.path.join(cdir, "config.json"))
    if not isinstance(cfg, dict):
        return None
    state = _c.read_json(os.path.join(cdir, "state.json"), {}) or {}
    if state.get("Status") == "running" and not monitor_alive(cdir):
        state.update(Status="exited", Running=False, Pid=0, ExitCode=LOST_EXIT_CODE, FinishedAt=now_iso())
    cfg.pop("exec", None)
    return {**cfg, "State": {**initial_state(), **state}}


def initial_state() -> dict[str, Any]:
    return {
        "Status": "created",
        "Running": False,
        "Paused": False,
        "Restarting": False,
        "OOMKilled": False,
        "Dead": False,
        "Pid": 0,
        "ExitCode": 0,
        "Error": "",
        "StartedAt": ZERO_TIME,
        "FinishedAt": ZERO_TIME,
    }


def all_ids(d: Docker) -> list[str]:
    """Container ids, oldest first."""
    base = containers_dir(d)
    try:
        names = [n for n in os.listdir(base) if os.path.isfile(os.path.join(base, n, "config.json"))]
    except OSError:
        return []
    return sorted(names, key=lambda n: os.path.getmtime(os.path.join(base, n, "config.json")))


def all_containers(d: Docker) -> list[dict[str, Any]]:
    """Every container's ``docker inspect`` object, newest first (``docker ps``'s order)."""
    found = (load(d, cid) for cid in reversed(all_ids(d)))
    return [c for c in found if c is not None]


class InstanceDocker:
    """An instance's docker state directory (what :class:`~.client.Docker` is to these functions)."""

    def __init__(self, ddir: str) -> None:
        self.ddir = ddir


def containers_of(root: str, instance_id: str) -> list[dict[str, Any]]:
    """Every container of one instance (``BrevSimulator.docker_containers``), newest first."""
    return all_containers(InstanceDocker(os.path.join(root, "instances", instance_id, "docker")))


def resolve(d: Docker, ref: str) -> str | None:
    """A container id from a full id, a unique id prefix or a name (Docker's order: id, name, prefix)."""
    ids = all_ids(d)
    if ref in ids:
        return ref
    for cid in ids:
        cfg = _c.read_json(os.path.join(container_dir(d, cid), "config.json"), {}) or {}
        if cfg.get("Name") == "/" + ref.lstrip("/"):
            return cid
    matches = [cid for cid in ids if ref and cid.startswith(ref)]
    return matches[0] if len(matches) == 1 else None


def name_owner(d: Docker, name: str) -> str | None:
    """The id of the container that holds ``name``."""
    for cid in all_ids(d):
        cfg = _c.read_json(os.path.join(container_dir(d, cid), "config.json"), {}) or {}
        if cfg.get("Name") == "/" + name:
            return cid
    return None


def wait_exit(d: Docker, cid: str, timeout: float | None = None) -> bool:
    """Block until the container's monitor is gone (its exit is recorded by then); False after ``timeout``."""
    try:
        fd = os.open(os.path.join(container_dir(d, cid), "shim.lock"), os.O_RDONLY)
    except OSError:
        return True

    def take() -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH)

    if timeout is None:
        take()
        os.close(fd)
        return True
    waiter = threading.Thread(target=take, daemon=True)
    waiter.start()
    waiter.join(max(timeout, 0.0))
    if waiter.is_alive():
        return False  # the descriptor stays open under the blocked thread; the process ends soon
    os.close(fd)
    return True


def exit_code(d: Docker, cid: str) -> int | None:
    """The recorded exit code of an exited container (also of one ``--rm`` removed)."""
    cur = load(d, cid)
    if cur is not None:
        return int(cur["State"]["ExitCode"]) if cur["State"]["Status"] == "exited" else None
    code = _c.read_json(os.path.join(d.ddir, "exits", f"{cid}.json"))
    return int(code) if isinstance(code, int) else None


def signal_container(d: Docker, cid: str, signum: int) -> bool:
    """Send ``signum`` to the container's process group; False when it is not running."""
    cur = load(d, cid)
    pid = int(cur["State"]["Pid"] or 0) if cur else 0
    if not cur or cur["State"]["Status"] != "running" or pid <= 0:
        return False
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    return True


def stop(d: Docker, cid: str, grace: float, signum: int = signal.SIGTERM) -> None:
    """``docker stop``: ``signum`` to the container's processes, SIGKILL after ``grace`` seconds; returns once the
    exit is recorded."""
    if not signal_container(d, cid, signum):
        return
    if grace >= 0 and wait_exit(d, cid, grace):
        return
    signal_container(d, cid, signal.SIGKILL)
    wait_exit(d, cid, 10.0)


def remove(d: Docker, cid: str) -> None:
    """Delete the container's directory (its name is free again)."""
    shutil.rmtree(container_dir(d, cid), ignore_errors=True)


def start_monitor(d: Docker, cid: str, *, attached: bool) -> tuple[int, int | None, int | None]:
    """Start the container's monitor; returns (container pid, the read end of the exit-code pipe, the write end of
    the pipe whose closing lets a ``--rm`` monitor remove the container) -- the pipes only when ``attached``.
    Raises ``OSError`` with the reason when the process could not start."""
    cdir = container_dir(d, cid)
    lock_fd = os.open(os.path.join(cdir, "shim.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)  # held by the monitor from here on: never seen without one
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe() if attached else (-1, -1)
    done_r, done_w = os.pipe() if attached else (-1, -1)
    fds = [fd for fd in (lock_fd, ready_w, exit_w, done_r) if fd >= 0]
    try:
        with open(os.path.join(cdir, "monitor.log"), "ab") as log:
            subprocess.Popen(
                [
                    sys.executable,
                    "-IS",
                    "-c",
                    _SHIM_BOOT,
                    cdir,
                    *(str(fd) for fd in (lock_fd, ready_w, exit_w, done_r)),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=fds,
                start_new_session=True,
            )
    finally:
        for fd in fds:
            os.close(fd)
    with os.fdopen(ready_r, "rb") as ready:
        answer = ready.read().decode("utf-8", "replace").strip()
    if not answer.isdigit():
        for fd in (exit_r, done_w):
            if fd >= 0:
                os.close(fd)
        raise OSError(answer or "the container's monitor did not start")
    return int(answer), (exit_r if attached else None), (done_w if attached else None)


def _write_state(cdir: str, **changes: Any) -> None:
    path = os.path.join(cdir, "state.json")
    state = {**initial_state(), **(_c.read_json(path, {}) or {}), **changes}
    _c.write_json_atomic(path, state)


def shim_main(argv: list[str]) -> int:
    """The monitor: ``<container dir> <lock fd> <ready fd> <exit fd> <done fd>`` (-1: none)."""
    cdir = argv[0]
    _lock_fd, ready_fd, exit_fd, done_fd = (int(a) for a in argv[1:5])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        # only SIGKILL (the instance going away) ends a monitor early; a handler, not SIG_IGN, which the container
        # process would inherit
        signal.signal(sig, lambda _signum, _frame: None)
    cfg = _c.read_json(os.path.join(cdir, "config.json"), {}) or {}
    spec = cfg.get("exec") or {}
    try:
        with open(os.path.join(cdir, "stdout.log"), "ab") as out, open(os.path.join(cdir, "stderr.log"), "ab") as err:
            proc = subprocess.Popen(
                spec["argv"],
                executable=spec["exe"],
                env=spec["env"],
                cwd=spec["cwd"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                restore_signals=True,
            )
    except (OSError, KeyError) as exc:
        _write_state(cdir, Status="exited", ExitCode=127, Error=str(exc), FinishedAt=now_iso())
        os.write(ready_fd, str(exc).encode() or b"error")
        return 1
    _write_state(cdir, Status="running", Running=True, Pid=proc.pid, StartedAt=now_iso())
    os.write(ready_fd, f"{proc.pid}\n".encode())
    os.close(ready_fd)
    rc = proc.wait()
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    code = rc if rc >= 0 else 128 - rc
    _write_state(cdir, Status="exited", Running=False, Pid=0, ExitCode=code, FinishedAt=now_iso())
    if exit_fd >= 0:
        with contextlib.suppress(OSError):
            os.write(exit_fd, f"{code}\n".encode())
        os.close(exit_fd)
    if (cfg.get("HostConfig") or {}).get("AutoRemove"):
        if done_fd >= 0:
            with contextlib.suppress(OSError):
                os.read(done_fd, 1)  # EOF: the attached client has read the exit code (or is gone)
        ddir = os.path.dirname(os.path.dirname(cdir))
        os.makedirs(os.path.join(ddir, "exits"), exist_ok=True)
        _c.write_json_atomic(os.path.join(ddir, "exits", f"{os.path.basename(cdir)}.json"), code)
        shutil.rmtree(cdir, ignore_errors=True)
    return 0


def describe_exit(code: int) -> str:
    """Docker's ``Exited (N)``."""
    return f"Exited ({code})"


def dump(obj: Any) -> str:
    """``docker inspect``'s JSON (four-space indentation)."""
    return json.dumps(obj, indent=4, ensure_ascii=False)
