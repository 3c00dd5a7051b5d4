"""The context of one fake TAO run: paths inside and outside the container, ``status.json``, faults, GPU and
shared-memory checks, datasets, checkpoints, and the run/record life cycle."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import signal
import sys
import time

from airflow_provider_brev.testing import fake_common as _c
from airflow_provider_brev.testing.fake_brev.instance_loss import lose_due_instances
from airflow_provider_brev.testing.fake_tao.spec import (
    _SCRIPTS,
    CKPT_MAGIC,
    DEFAULT_TAO_CONFIG,
    MISSING,
    RUNS_FILE,
    SpecError,
    TaoFailure,
    apply_overrides,
    get,
    missing_value,
    parse_spec,
    resolve_interpolations,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _now_parts() -> tuple[str, str]:
    t = time.localtime()
    return f"{t.tm_mon}/{t.tm_mday}/{t.tm_year}", f"{t.tm_hour}:{t.tm_min}:{t.tm_sec}"


def _fmt_td(seconds: float) -> str:
    s = max(0.0, seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{int(h)}:{int(m):02d}:{sec:09.6f}"


def _unit(key: str) -> float:
    """Deterministic value in [0, 1) for ``key``."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0x100000000


class StatusLog:
    """TAO's ``StatusLogger``: JSON lines appended to ``<dir>/status.json``."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.last: dict | None = None
        self.drop_success = False  # the `no_success_record` knob

    def write(self, status: str, message: str | None = None, **data: Any) -> None:
        if status == "SUCCESS" and self.drop_success:
            return
        date, clock = _now_parts()
        rec: dict[str, Any] = {"date": date, "time": clock, "status": status, "verbosity": "INFO"}
        rec.update({k: v for k, v in data.items() if v is not None})
        if message:
            rec["message"] = message
        self.last = rec
        _c.append_jsonl(self.path, rec)


class RunContext:
    def __init__(self, prog: str, action: str, spec_arg: str | None, overrides: list[str]) -> None:
        self.prog = prog
        self.action = action
        self.spec_arg = spec_arg
        self.overrides = overrides
        self.root = _c.sim_root()
        self.knobs = _c.load_section(self.root, "tao", DEFAULT_TAO_CONFIG)
        env = os.environ
        self.mounts: list[tuple[str, str, bool]] = [
            tuple(m) for m in json.loads(env.get("BREV_SIM_CONTAINER_MOUNTS") or "[]")
        ]  # type: ignore[misc]
        self.rootfs = env.get("BREV_SIM_CONTAINER_ROOTFS") or "/"
        self.gpus = int(env.get("BREV_SIM_CONTAINER_GPUS") or 0)
        self.vram = int(env.get("BREV_SIM_CONTAINER_VRAM_GB") or 0)
        self.shm = int(env.get("BREV_SIM_CONTAINER_SHM_BYTES") or 64 * 1024**2)
        self.ipc = env.get("BREV_SIM_CONTAINER_IPC") or "private"
        self.user = env.get("BREV_SIM_CONTAINER_USER") or ""
        self.cfg: dict = {}
        self.status: StatusLog | None = None
        self.action_dir: str | None = None
        self.run_id = os.urandom(6).hex()
        # the fake docker rewrote mounted container paths in our argv to host paths: work in container paths
        self.spec_arg = self._container_arg(spec_arg) if spec_arg else spec_arg
        self.overrides = [self._container_arg(o) for o in overrides]
        self.info: dict[str, Any] = {"checkpoints_written": []}
        self.task = "classify"

    @staticmethod
    def raw(text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):  # reader gone: keep training, drop the output
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)

    def log(self, message: str, level: str = "INFO", name: str = "root") -> None:
        t = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int((t % 1) * 1000):03d}"
        self.raw(f"{stamp} [TAO Toolkit] [{level}] {name}: {message}\n")

    def resolve(self, path: str) -> str:
        """Container path -> host path (relative paths are relative to the container's cwd, which the
        fake docker already made a host path); paths outside every mount land in the container root."""
        p = str(path)
        if not p.startswith("/"):
            return os.path.normpath(os.path.join(os.getcwd(), p))
        p = os.path.normpath(p)
        best = None
        for src, dst, _rw in self.mounts:
            if (p == dst or p.startswith(dst.rstrip("/") + "/")) and (best is None or len(dst) > len(best[1])):
                best = (src, dst)
        if best is not None:
            return os.path.normpath(best[0] + "/" + p[len(best[1]) :])
        if p == self.rootfs or p.startswith(self.rootfs.rstrip("/") + "/"):
            return p
        return os.path.join(self.rootfs, p.lstrip("/"))

    def _container_arg(self, arg: str) -> str:
        """Undo the fake docker's host-path rewriting of an argument (``/x`` or ``key=/x``)."""
        m = re.match(r"^([~+]*[A-Za-z_][\w.\-]*=)?(/.*)$", arg, re.S)
        if not m:
            return arg
        return (m.group(1) or "") + self.display(os.path.normpath(m.group(2)))

    def display(self, host: str) -> str:
        """Host path -> the path the container sees."""
        best = None
        for src, dst, _rw in self.mounts:
            if (host == src or host.startswith(src.rstrip("/") + "/")) and (best is None or len(src) > len(best[0])):
                best = (src, dst)
        if best is not None:
            return os.path.normpath(best[1] + "/" + host[len(best[0]) :])
        if host.startswith(self.rootfs.rstrip("/") + "/"):
            return "/" + host[len(self.rootfs.rstrip("/")) + 1 :]
        return host

    def writable(self, host: str) -> None:
        best = None
        for src, _dst, rw in self.mounts:
            if (host == src or host.startswith(src.rstrip("/") + "/")) and (best is None or len(src) > len(best[0])):
                best = (src, rw)
        if best is not None and not best[1]:
            raise TaoFailure(f"OSError: [Errno 30] Read-only file system: '{self.display(host)}'")

    def makedirs(self, host: str) -> None:
        self.writable(host)
        try:
            os.makedirs(host, exist_ok=True)
        except OSError as exc:
            raise TaoFailure(f"OSError: [Errno {exc.errno}] {exc.strerror}: '{self.display(host)}'") from None

    def need_file(self, value: str, key: str, directory: bool = False) -> str:
        host = self.resolve(value)
        ok = os.path.isdir(host) if directory else os.path.isfile(host)
        if not ok:
            if not directory and os.path.isdir(host):
                raise TaoFailure(f"IsADirectoryError: [Errno 21] Is a directory: '{value}'")
            raise TaoFailure(
                f"FileNotFoundError: [Errno 2] No such file or directory: '{value}'",
                f"File system error: {key} does not exist: {value}",
            )
        return host

    def fault(self) -> str | None:
        for key in ("oom", "cuda_assert", "infra_error", "killed"):
            if _c.consume_knob(self.root, "tao", key, self.action):
                return key
        return None

    def epoch_done(self, epoch: int) -> None:
        """Let an ``instance_lost`` fault due at this epoch (or file) take the instance, and this run with it.

        A run that takes the ``hold_runs`` knob then waits after epoch ``hold_after_epoch`` (up to ``hold_seconds``)
        for such a loss: a gate for tests that must lose the instance mid-training however slow the machine is.
        """
        self._lose_if_due(epoch)
        if epoch != int(self.knobs.get("hold_after_epoch", -1)):
            return
        if not _c.consume_knob(self.root, "tao", "hold_runs", self.action):
            return
        self.log(f"Holding after epoch {epoch} until the instance is lost (hold_runs)")
        deadline = time.monotonic() + float(self.knobs.get("hold_seconds") or 600)
        while time.monotonic() < deadline:
            time.sleep(0.05)
            self._lose_if_due(epoch)

    def _lose_if_due(self, epoch: int) -> None:
        ident = os.environ.get("BREV_SIM_INSTANCE", "")
        if self.root and ident and ident in lose_due_instances(self.root, epoch, ident):
            os.kill(os.getpid(), signal.SIGKILL)

    def raise_fault(self, kind: str) -> None:
        if kind == "killed":
            self.raw("\n")
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "oom":
            free = max(1, self.vram - 2) if self.vram else 1
            raise TaoFailure(
                f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                f"{max(self.vram, 16) - 0.47:.2f} GiB of which {free * 0.05:.2f} GiB is free. Of the allocated memory "
                f"{max(self.vram, 16) * 0.9:.2f} GiB is allocated by PyTorch. See documentation for Memory Management "
                "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            )
        if kind == "cuda_assert":
            raise TaoFailure(
                "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported "
                "at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
                "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
                "CUDA error: device-side assert triggered",
            )
        raise TaoFailure(
            "RuntimeError: CUDA error: uncorrectable ECC error encountered\nCUDA kernel errors might be asynchronously "
            "reported at some other API call, so the stacktrace below might be incorrect.",
            "CUDA error: uncorrectable ECC error encountered",
            extra=[
                "NVRM: Xid (PCI:0000:00:1e): 48, pid=1, name=python, An uncorrectable double bit error (DBE) has been detected on GPU"
            ],
        )

    def apply_kpis(self, kpi: dict) -> dict:
        over = self.knobs.get("kpis") or {}
        out = dict(kpi)
        for key, val in over.items():
            if isinstance(val, dict):
                if key == self.action:
                    out.update(val)
            elif key in out:
                out[key] = val
        return out

    def check_gpu(self, num_gpus: int = 1) -> None:
        if self.gpus <= 0:
            raise TaoFailure(
                "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                "installed a driver from http://www.nvidia.com/Download/index.aspx",
                "CUDA is not available: Found no NVIDIA driver on your system.",
            )
        if num_gpus > self.gpus:
            raise TaoFailure(
                f"lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: {list(range(num_gpus))}\n"
                f" But your machine only has: {list(range(self.gpus))}",
                f"You requested {num_gpus} GPUs but the container only sees {self.gpus}",
            )

    def check_shm(self, workers: int) -> None:
        if self.knobs.get("require_shm") and workers > 0 and self.ipc != "host" and self.shm < 1024**3:
            raise TaoFailure(
                "RuntimeError: DataLoader worker (pid(s) 412) exited unexpectedly",
                "DataLoader worker exited unexpectedly (bus error): insufficient shared memory",
                extra=[
                    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."
                ],
            )

    def read_rows(self, csv_host: str, csv_value: str) -> list[dict]:
        try:
            with open(csv_host, newline="", encoding="utf-8", errors="replace") as fh:
                return [dict(r) for r in csv.DictReader(fh)]
        except (OSError, csv.Error) as exc:
            raise TaoFailure(f"pandas.errors.ParserError: Error tokenizing data in '{csv_value}': {exc}") from None

    def split_dataset(self, split: str, role: str = "train") -> tuple[list[dict], str]:
        base = get(self.cfg, "dataset.classify") or {}
        sub = base.get(split) if isinstance(base, dict) else None
        sub = sub if isinstance(sub, dict) else {}
        prefix = f"dataset.classify.{split}"
        csv_value = sub.get("csv_path")
        if csv_value in (None, "", MISSING):
            raise missing_value(f"{prefix}.csv_path")
        img_value = sub.get("images_dir") or sub.get("image_dir") or base.get("images_dir") or base.get("image_dir")
        if img_value in (None, "", MISSING):
            raise missing_value(f"{prefix}.images_dir")
        csv_host = self.need_file(str(csv_value), f"{prefix}.csv_path")
        img_host = self.need_file(str(img_value), f"{prefix}.images_dir", directory=True)
        rows = self.read_rows(csv_host, str(csv_value))
        if not rows:
            raise TaoFailure(f"ValueError: The {role} dataset '{csv_value}' has no samples")
        if self.knobs.get("check_images"):
            for row in rows[:50]:
                for col in ("input_path", "golden_path"):
                    rel = (row.get(col) or "").strip()
                    if not rel:
                        continue
                    if not self._image_exists(img_host, rel):
                        shown = os.path.join(str(img_value), rel)
                        raise TaoFailure(f"FileNotFoundError: [Errno 2] No such file or directory: '{shown}'")
        return rows, img_host

    @staticmethod
    def _image_exists(img_dir: str, rel: str) -> bool:
        path = os.path.join(img_dir, rel)
        if os.path.exists(path):
            return True
        parent, stem = os.path.split(path)
        try:
            return any(name.startswith(stem) for name in os.listdir(parent or "."))
        except OSError:
            return False

    def checkpoint_info(self, host: str) -> dict:
        info: dict[str, Any] = {}
        try:
            with open(host, "rb") as fh:
                head = fh.read(4096)
            if head.startswith(CKPT_MAGIC):
                info = json.loads(head[len(CKPT_MAGIC) :].split(b"\n", 1)[0])
        except (OSError, ValueError):
            info = {}
        if "epoch" not in info:
            m = re.search(r"epoch_(\d+)_step_(\d+)", os.path.basename(os.path.realpath(host)))
            if m:
                info.update(epoch=int(m.group(1)), step=int(m.group(2)))
        return info

    def write_checkpoint(self, host: str, data: dict) -> None:
        self.writable(host)
        tmp = f"{host}.tmp.{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(CKPT_MAGIC + json.dumps(data).encode() + b"\n" + b"\0" * 256)
        os.replace(tmp, host)

    def setup_results(self) -> None:
        if self.prog == "gap_analysis":
            rd = get(self.cfg, "results_dir")
            if rd in (None, "", MISSING):
                raise missing_value("results_dir")
            self.action_dir = self.resolve(str(rd))
        else:
            explicit = get(self.cfg, f"{self.action}.results_dir")
            if explicit not in (None, "", MISSING):
                self.action_dir = self.resolve(str(explicit))
            else:
                rd = get(self.cfg, "results_dir")
                if rd in (None, "", MISSING):
                    raise missing_value("results_dir")
                self.action_dir = os.path.join(self.resolve(str(rd)), self.action)
        self.makedirs(self.action_dir)
        self.status = StatusLog(os.path.join(self.action_dir, "status.json"))
        self.status.drop_success = _c.consume_knob(self.root, "tao", "no_success_record", self.action)
        self.info["action_dir"] = self.display(self.action_dir)
        self.info["action_dir_host"] = self.action_dir

    def progress(self, label: str, total: int, seconds: float, extra: str = "") -> None:
        steps = 3
        for k in range(1, steps + 1):
            if seconds > 0:
                time.sleep(seconds / steps)
            done = max(1, round(total * k / steps))
            pct = int(100 * done / total)
            bar = "#" * (pct // 10) + " " * (10 - pct // 10)
            rate = total / max(seconds, 1e-3)
            self.raw(f"\r{label}: {pct:3d}%|{bar}| {done}/{total} [00:00<00:00, {rate:.2f}it/s{extra}]")
        self.raw("\n")

    def execute(self) -> int:
        self.record("start")
        code = 1
        try:
            code = self._execute()
        except KeyboardInterrupt:
            # the TAO entrypoint treats an interrupted trainer as passed
            self.log("Command was interrupted", "ERROR")
            self.info["outcome"] = "interrupted"
            self.log("Execution status: PASS")
            code = 0
        finally:
            self.info["exit_code"] = code
            self.record("end")
        return code

    def _execute(self) -> int:
        script = _SCRIPTS[self.prog].format(action=self.action)
        try:
            if self.prog == "gap_analysis" and self.user and self.user.split(":")[0] not in ("0", "root"):
                uid = self.user.split(":")[0]
                raise TaoFailure(f"KeyError: 'getpwuid(): uid not found: {uid}'")
            assert self.spec_arg is not None
            spec_host = self.resolve(self.spec_arg)
            try:
                with open(spec_host, encoding="utf-8") as fh:
                    text = fh.read()
                cfg = parse_spec(text)
            except SpecError as exc:
                raise TaoFailure(
                    f'yaml.scanner.ScannerError: {exc.message}\n  in "{self.spec_arg}", line {exc.line or 1}',
                    f"Could not parse spec file {self.spec_arg}: {exc.message}",
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise TaoFailure(f"OSError: could not read spec file '{self.spec_arg}': {exc}") from None
            if cfg is None:
                cfg = {}
            if not isinstance(cfg, dict):
                raise TaoFailure(f"omegaconf.errors.ConfigTypeError: spec file '{self.spec_arg}' is not a mapping")
            apply_overrides(cfg, self.overrides)
            self.cfg = resolve_interpolations(cfg)
            self.task = str(get(self.cfg, "task", "classify") or "classify")
            self.info["results_dir"] = get(self.cfg, "results_dir")
            self.setup_results()
            handler = getattr(self, self.action)
            kpi = handler()
            if kpi:
                self.info["kpi"] = kpi
        except TaoFailure as exc:
            if self.status is not None:
                self.status.write("FAILURE", exc.message)
            self.info.setdefault("outcome", "failure")
            self.info["error"] = exc.error.split("\n", 1)[0]
            self.raw(f"Error executing job with overrides: {self.overrides!r}\n")
            for line in exc.extra:
                self.raw(line + "\n")
            self.raw(
                "Traceback (most recent call last):\n"
                f'  File "{script}", line 112, in main\n    run_experiment(experiment_config=cfg)\n'
                f"{exc.error}\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
            )
            self.log("Command completed with return code 1")
            self.log("Execution status: FAIL", "WARNING")
            return 1
        self.log("Command completed successfully with return code 0")
        self.log("Execution status: PASS")
        return 0

    def record(self, phase: str) -> None:
        if not self.root or not os.path.isdir(self.root):
            return
        env = os.environ
        rec = {
            "run_id": self.run_id,
            "phase": phase,
            "ts": time.time(),
            "instance_id": env.get("BREV_SIM_INSTANCE", ""),
            "instance": env.get("BREV_SIM_INSTANCE_NAME", ""),
            "container_id": env.get("BREV_SIM_CONTAINER", ""),
            "container_name": env.get("BREV_SIM_CONTAINER_NAME", ""),
            "image": env.get("BREV_SIM_CONTAINER_IMAGE", ""),
            "network": self.prog,
            "action": self.action,
            "spec": self.spec_arg,
            "overrides": self.overrides,
            **{k: v for k, v in self.info.items() if phase == "end"},
        }
        with contextlib.suppress(OSError):
            _c.append_jsonl(os.path.join(self.root, RUNS_FILE), rec)
