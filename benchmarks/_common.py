"""Helpers shared by the benchmark scripts (stdlib only; the provider is imported by the callers).

Every benchmark runs against :class:`~airflow_provider_brev.testing.simulator.BrevSimulator` roots under
``benchmarks/.work/`` (git-ignored), with its own ``HOME`` for the CLI's ``~/.brev``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from airflow_provider_brev.testing.simulator import BrevSimulator

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work"
AIRFLOW_HOME = WORK_DIR / "airflow-home"

#: Subcommands the hook runs once per process (``--version`` and ``create --help``), not per lifecycle.
PROBE_ARGVS = (["--version"], ["create", "--help"])


def progress(message: str) -> None:
    """Progress goes to stderr (stdout of child benchmarks may carry the hook's log)."""
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


PYCACHE = WORK_DIR / "pycache"


def airflow_env() -> dict[str, str]:
    """Environment for any process that imports Airflow: an isolated, throw-away AIRFLOW_HOME."""
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    return {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }


def child_env(*, bytecode_cache: bool = True) -> dict[str, str]:
    """``os.environ`` plus :func:`airflow_env` for a child interpreter.

    With ``bytecode_cache`` (the deployed condition: pip/uv installs ship or write ``.pyc`` files), bytecode is
    read from and written to ``benchmarks/.work/pycache`` via ``PYTHONPYCACHEPREFIX`` -- never into the source
    tree or the venv -- even where the environment sets ``PYTHONDONTWRITEBYTECODE``. Without it, an empty
    prefix and ``PYTHONDONTWRITEBYTECODE=1`` make every module compile from source.
    """
    env = {**os.environ, **airflow_env()}
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(WORK_DIR / "pycache-none")
    return env


def use_simulator(sim: BrevSimulator, home: Path) -> None:
    """Point this process's hook at ``sim``: brev on PATH, a fresh HOME, ``brev_default`` connection."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(airflow_env())
    os.environ.update(sim.env())
    os.environ["HOME"] = str(home)
    os.environ["AIRFLOW_CONN_BREV_DEFAULT"] = sim.connection_json()
    os.environ.pop("BREV_API_TOKEN", None)


def quiet_provider_logs() -> None:
    """Keep the hook's INFO lines out of the benchmark output (they still reach WARNING and above)."""
    import logging

    for name in ("airflow.task.hooks", "airflow.task", "airflow"):
        logging.getLogger(name).setLevel(logging.WARNING)


def subcommand(argv: list[str]) -> str:
    """``brev`` subcommand of a recorded call (``--version`` for the bare version probe)."""
    if list(argv) in [list(p) for p in PROBE_ARGVS]:
        return " ".join(argv)
    return next((a for a in argv if not a.startswith("-")), argv[0] if argv else "")


def is_probe(argv: list[str]) -> bool:
    return list(argv) in [list(p) for p in PROBE_ARGVS]


def calls_between(sim: BrevSimulator, start: float, end: float) -> list[dict[str, Any]]:
    """``brev`` invocations the simulator recorded as started in ``[start, end]`` (wall clock), probes included."""
    return [c for c in sim.calls() if start <= float(c.get("ts", 0)) <= end]


def count_by_subcommand(calls: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in calls:
        key = subcommand(call["argv"])
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def median(values: Iterable[float]) -> float | None:
    vals = [float(v) for v in values]
    return statistics.median(vals) if vals else None


def summary(values: Iterable[float], digits: int = 3) -> dict[str, Any]:
    vals = sorted(float(v) for v in values)
    if not vals:
        return {"n": 0}
    return {
        "n": len(vals),
        "median": round(statistics.median(vals), digits),
        "min": round(vals[0], digits),
        "max": round(vals[-1], digits),
        "mean": round(statistics.fmean(vals), digits),
    }


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class InstanceWatcher(threading.Thread):
    """Remember every simulator instance record (``t_running``, ``t_ssh_up``, ``t_deleting`` ...).

    The simulator drops instances from ``state.json`` once their deletion finished, so the ground truth
    needed afterwards (when sshd came up, when deletion was requested) is sampled while they exist.
    ``state.json`` is replaced atomically by the simulator, so reading it without the lock is safe.
    """

    def __init__(self, sim: BrevSimulator, interval: float = 0.05) -> None:
        super().__init__(daemon=True, name="instance-watcher")
        self.state_path = Path(sim.state_path)
        self.interval = interval
        self.records: dict[str, dict[str, Any]] = {}
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def sample(self) -> None:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        with self._lock:
            for inst in state.get("instances", []):
                self.records[inst["id"]] = dict(inst)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
        self.sample()

    def by_name(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            found = [dict(r) for r in self.records.values() if r.get("name") == name]
        return sorted(found, key=lambda r: r.get("created_at") or 0)
