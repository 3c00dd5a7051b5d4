"""The fake Lepton workspace's jobs: their states, queue, containers, logs and TTL.

A job is queued (``Queueing``) until its resource shape has a free slot (:attr:`Workspace.capacity`), then
``Starting`` for ``start_seconds``, then ``Running``: its container really runs, as a process in its own process
group, through the simulator's fake ``docker`` (:mod:`airflow_provider_brev.testing.fake_docker`) on a replica
sandbox of its own, so the fake TAO entrypoints, GPU checks and registry logins of the Brev simulator apply. Its
output is the job's log (one entry per line, strictly increasing nanosecond timestamps). Exit code 0 ends it
``Completed``; any other restarts it (``Restarting``) while ``max_failure_retry`` allows, then ends it ``Failed``.
A stop (``spec.stopped``) sends SIGTERM to the container (SIGKILL after ``stop_grace``, to its ``docker run`` and
the container's own processes) and ends it ``Stopped``.
``ttl_seconds_after_finished`` after it ended, the job and its log are removed (the API then answers 404).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

#: GPUs and memory per GPU of the resource shapes the fake workspace knows.
DEFAULT_SHAPES: dict[str, tuple[int, int]] = {
    "cpu.small": (0, 0),
    "cpu.medium": (0, 0),
    "cpu.large": (0, 0),
    "gpu.1xa10": (1, 24),
    "gpu.1xh100-sxm": (1, 80),
    "gpu.8xh100-sxm": (8, 80),
    "gpu.8xh100-80gb": (8, 80),
}
ENDED = ("Completed", "Failed", "Stopped")


@dataclass
class Job:
    """One job of the fake workspace."""

    name: str
    body: dict[str, Any]
    created_at: float
    state: str = "Queueing"
    log: list[tuple[int, str]] = field(default_factory=list)
    started_at: float | None = None
    finished_at: float | None = None
    restarts: int = 0
    failed: int = 0
    succeeded: int = 0
    exit_codes: list[int] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    stopping: bool = False

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.body.get("spec") or {})

    def to_api(self) -> dict[str, Any]:
        """The job as ``GET /jobs/<id>`` returns it."""
        metadata = dict(self.body.get("metadata") or {})
        metadata.update(id=self.name, name=metadata.get("name") or self.name, created_at=int(self.created_at * 1000))
        return {
            "metadata": metadata,
            "spec": self.spec,
            "status": {
                "job_name": self.name,
                "state": self.state,
                "ready": 1 if self.state == "Running" else 0,
                "active": 1 if self.state in ("Starting", "Running", "Restarting") else 0,
                "failed": self.failed,
                "succeeded": self.succeeded,
                "creation_time": int(self.created_at),
                "completion_time": int(self.finished_at) if self.finished_at else None,
            },
        }


class Workspace:
    """The jobs, secrets and knobs of one fake workspace (thread-safe: the HTTP server's threads and the ticker).

    :param root: the fake's directory (replica sandboxes, the fake docker's state).
    :param tools: the simulator's tool directories (``docker`` and the TAO entrypoints).
    """

    def __init__(self, root: Path, tools_bin: Path) -> None:
        self.root = root
        self.tools_bin = tools_bin
        self.lock = threading.RLock()
        self.jobs: dict[str, Job] = {}
        self.secrets: dict[str, str] = {}
        self.pull_secrets: dict[str, tuple[str, str]] = {}  # name -> (registry, password)
        self.shapes = dict(DEFAULT_SHAPES)
        self.capacity: dict[str, int] = {}  # shape -> concurrent jobs (absent: unlimited)
        self.node_groups: set[str] | None = None  # known node groups (None: any)
        self.quota_exceeded = False
        self.start_seconds = 0.2
        self.stop_grace = 5.0
        self.submissions: list[dict[str, Any]] = []
        self._last_ts = 0
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, name="fake-lepton-ticker", daemon=True)
        self._ticker.start()

    # -- the API's operations ------------------------------------------------------------------------
    def create(self, body: dict[str, Any]) -> tuple[int, Any]:
        """``POST /jobs``: (status, answer)."""
        metadata = body.get("metadata") or {}
        name = str(metadata.get("id") or metadata.get("name") or "")
        spec = body.get("spec") or {}
        with self.lock:
            self.submissions.append(body)
            if not name:
                return 400, {"code": "BadRequest", "message": "metadata.id is required"}
            if name in self.jobs:
                return 409, {"code": "AlreadyExists", "message": f"job {name} already exists"}
            shape = str(spec.get("resource_shape") or "")
            if shape not in self.shapes:
                return 400, {"code": "BadRequest", "message": f"unknown resource shape {shape!r}"}
            groups = (spec.get("affinity") or {}).get("allowed_dedicated_node_groups") or []
            unknown = [g for g in groups if self.node_groups is not None and g not in self.node_groups]
            if unknown:
                return 400, {"code": "BadRequest", "message": f"unknown node group {unknown[0]!r}"}
            if self.quota_exceeded:
                return 403, {"code": "QuotaExceeded", "message": "workspace quota exceeded for " + shape}
            if not (spec.get("container") or {}).get("image"):
                return 400, {"code": "BadRequest", "message": "container.image is required"}
            job = self.jobs[name] = Job(name, body, time.time())
            return 200, job.to_api()

    def get(self, name: str) -> Job | None:
        with self.lock:
            return self.jobs.get(name)

    def stop(self, name: str) -> bool:
        with self.lock:
            job = self.jobs.get(name)
            if job is None:
                return False
            if job.state in ENDED:
                return True
            job.stopping = True
            job.body.setdefault("spec", {})["stopped"] = True
            proc = job.proc
            if proc is None:
                self._end(job, "Stopped")
        if proc is not None:
            self._terminate(proc, f"{job.name}-{job.restarts}")
        return True

    def delete(self, name: str) -> bool:
        stopped = self.stop(name)
        with self.lock:
            self.jobs.pop(name, None)
        return stopped

    def log_of(self, name: str, start: int, end: int, limit: int) -> list[tuple[int, str]] | None:
        with self.lock:
            job = self.jobs.get(name)
            if job is None:
                return None
            return [(ts, line) for ts, line in job.log if start <= ts < end][:limit]

    # -- the ticker: queue, start, TTL ------------------------------------------------------------------
    def _tick_loop(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(Exception):
                self.tick()

    def tick(self) -> None:
        now = time.time()
        to_start: list[Job] = []
        with self.lock:
            for job in sorted(self.jobs.values(), key=lambda j: j.created_at):
                if job.state == "Queueing" and self._free(job):
                    job.state, job.started_at = "Starting", now
                elif (
                    job.state in ("Starting", "Restarting")
                    and job.proc is None
                    and job.started_at is not None
                    and now - job.started_at >= self.start_seconds
                ):
                    job.state = "Running"
                    to_start.append(job)
            for job in list(self.jobs.values()):
                ttl = job.spec.get("ttl_seconds_after_finished")
                ttl = 600 if ttl is None else float(ttl)
                if job.finished_at is not None and now - job.finished_at >= ttl:
                    del self.jobs[job.name]
        for job in to_start:
            self._launch(job)

    def _free(self, job: Job) -> bool:
        shape = str(job.spec.get("resource_shape"))
        limit = self.capacity.get(shape)
        if limit is None:
            return True
        busy = sum(
            1
            for other in self.jobs.values()
            if other.spec.get("resource_shape") == shape and other.state in ("Starting", "Running", "Restarting")
        )
        return busy < limit

    # -- containers -------------------------------------------------------------------------------------
    def _append(self, job: Job, line: str) -> None:
        with self.lock:
            ts = max(time.time_ns(), self._last_ts + 1)
            self._last_ts = ts
            job.log.append((ts, line))

    def _env(self, job: Job) -> tuple[dict[str, str], str | None]:
        env: dict[str, str] = {"LEPTON_JOB_NAME": job.name}
        for item in job.spec.get("envs") or []:
            name = str(item.get("name"))
            if item.get("value") is not None:
                env[name] = str(item["value"])
                continue
            ref = ((item.get("value_from") or {}).get("secret_name_ref")) or ""
            with self.lock:
                if ref not in self.secrets:
                    return env, f"secret {ref!r} not found (env {name})"
                env[name] = self.secrets[ref]
        return env, None

    def _launch(self, job: Job) -> None:
        env, problem = self._env(job)
        if problem:
            self._append(job, f"Error: {problem}")
            with self.lock:
                job.failed += 1
                self._end(job, "Failed")
            return
        replica = f"{job.name}-{job.restarts}"
        sandbox = self.root / "replicas" / replica
        instance = self.root / "instances" / replica
        gpus, vram = self.shapes.get(str(job.spec.get("resource_shape")), (0, 0))
        for path in (sandbox / "home", sandbox / "work", instance / "docker"):
            path.mkdir(parents=True, exist_ok=True)
        meta = {"id": replica, "gpu_count": gpus, "vram_per_gpu_gb": vram, "smi_name": "NVIDIA H100 80GB HBM3"}
        (instance / "meta.json").write_text(json.dumps(meta))
        base = {
            "PATH": f"{self.tools_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(sandbox / "home"),
            "BREV_SIM_ROOT": str(self.root),
            "BREV_SIM_INSTANCE": replica,
            "BREV_SIM_INSTANCE_NAME": replica,
            "LANG": "C.UTF-8",
        }
        logins: list[str] = []
        for secret in job.spec.get("image_pull_secrets") or []:
            with self.lock:
                registry_password = self.pull_secrets.get(str(secret))
            if registry_password:
                registry, password = registry_password
                variable = f"_FL_PULL_PASSWORD_{len(logins)}"  # in the environment, not on bash's command line
                base[variable] = password
                logins.append(
                    f'printf %s "${variable}" | docker login {shlex.quote(registry)} '
                    "-u '$oauthtoken' --password-stdin >/dev/null"
                )
        argv = ["docker", "run", "--rm", "--name", replica]
        if gpus:
            argv += ["--gpus", "all"]
        shm = job.spec.get("shared_memory_size")
        argv += ["--shm-size", f"{int(shm)}m" if shm else "8g"]
        argv += ["-v", f"{sandbox / 'work'}:/workspace", "-w", "/workspace"]
        for name in env:
            argv += ["-e", name]
        container = job.spec.get("container") or {}
        argv += [str(container.get("image")), *[str(a) for a in container.get("command") or []]]
        image = shlex.quote(str(container.get("image")))
        pull = f"docker pull {image} >/dev/null 2>&1"  # quietly, like the platform: only a failure shows
        script = " && ".join([*logins, f"{{ {pull} || true; }}", "exec " + shlex.join(argv)])
        proc = subprocess.Popen(
            ["/bin/bash", "-c", script],
            env={**base, **env},
            cwd=str(sandbox / "work"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,
        )
        with self.lock:
            job.proc = proc
            stop_now = job.stopping
        if stop_now:
            self._terminate(proc, replica)
        threading.Thread(target=self._watch, args=(job, proc), name=f"fake-lepton-{replica}", daemon=True).start()

    def _watch(self, job: Job, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            self._append(job, raw.decode("utf-8", "replace").rstrip("\n"))
        code = proc.wait()
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with self.lock:
            job.proc = None
            job.exit_codes.append(code)
            if job.stopping:
                self._end(job, "Stopped")
            elif code == 0:
                job.succeeded += 1
                self._end(job, "Completed")
            elif job.restarts < int(job.spec.get("max_failure_retry") or 0):
                job.failed += 1
                job.restarts += 1
                job.state, job.started_at = "Restarting", time.time()
            else:
                job.failed += 1
                self._end(job, "Failed")

    def _end(self, job: Job, state: str) -> None:
        job.state, job.finished_at = state, time.time()

    def _terminate(self, proc: subprocess.Popen[bytes], replica: str) -> None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGTERM)

        def kill_later() -> None:
            try:
                proc.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                self._kill_containers(replica)

        threading.Thread(target=kill_later, daemon=True).start()

    def _kill_containers(self, replica: str | None = None) -> None:
        """SIGKILL the container processes (and their monitors) of one replica, or of every replica: a container
        outlives its ``docker run`` client, as with real Docker."""
        from airflow_provider_brev.testing.fake_brev.store import marked_pids

        pids = set(marked_pids(("BREV_SIM_ROOT", str(self.root))))
        if replica is not None:
            pids &= set(marked_pids(("BREV_SIM_INSTANCE", replica)))
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        """Stop the ticker and every container."""
        self._stop.set()
        with self.lock:
            procs = [job.proc for job in self.jobs.values() if job.proc is not None]
        for proc in procs:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        self._kill_containers()
