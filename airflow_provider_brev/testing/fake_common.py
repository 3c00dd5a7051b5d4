"""Helpers shared by the fake ``docker`` and the fake TAO entrypoints (stdlib only).

Both tools run inside an instance sandbox of the Brev simulator, started through small wrappers in
``<root>/tools/bin`` (``docker``) and ``<root>/tools/container-bin`` (TAO entrypoints), so this
module must stay importable on its own: no third-party imports and nothing costly at import time.
The simulator root comes from ``$BREV_SIM_ROOT`` (set by ``brev exec``), the instance from
``$BREV_SIM_INSTANCE``; knobs live in ``<root>/config.json`` under the ``docker`` and ``tao`` keys
and are changed with ``BrevSimulator.set_docker(...)`` / ``set_tao(...)``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


def read_json(path: str, default: Any = None) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def write_json_atomic(path: str, data: Any, indent: int | None = 1) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=indent, ensure_ascii=False)
    os.replace(tmp, path)


def append_jsonl(path: str, rec: dict) -> None:
    """One ``write`` per record on an ``O_APPEND`` descriptor: safe across concurrent writers."""
    line = (json.dumps(rec, ensure_ascii=False, sort_keys=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_jsonl(path: str) -> list[dict]:
    out: list[dict] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    with contextlib.suppress(ValueError):
                        out.append(json.loads(line))
    except OSError:
        pass
    return out


@contextlib.contextmanager
def flocked(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def sim_root(default: str | None = None) -> str | None:
    return os.environ.get("BREV_SIM_ROOT") or default


def load_section(root: str | None, section: str, defaults: dict) -> dict:
    """``defaults`` updated with ``config.json[section]`` (unknown keys are kept)."""
    out = json.loads(json.dumps(defaults))
    if root:
        cfg = read_json(os.path.join(root, "config.json"), {}) or {}
        out.update(cfg.get(section) or {})
    return out


def knob_applies(value: Any, action: str) -> bool:
    """A fault knob's value: ``True`` (always), an ``int`` count (consumed separately), an action name
    or a list of action names."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, int | float):
        return value > 0
    if isinstance(value, str):
        return value in (action, "*", "all")
    if isinstance(value, list | tuple):
        return action in value or "*" in value
    return bool(value)


def consume_knob(root: str | None, section: str, key: str, action: str) -> bool:
    """Decide whether fault knob ``section.key`` fires for ``action``; an integer count is decremented
    under the simulator's state lock (the same lock ``BrevSimulator`` holds while editing config)."""
    if not root:
        return False
    cfg_path = os.path.join(root, "config.json")
    value = ((read_json(cfg_path, {}) or {}).get(section) or {}).get(key)
    if not knob_applies(value, action):
        return False
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    with flocked(os.path.join(root, "state.lock")):
        cfg = read_json(cfg_path, {}) or {}
        sec = cfg.get(section) or {}
        cur = sec.get(key)
        if isinstance(cur, bool) or not isinstance(cur, int | float) or cur <= 0:
            return knob_applies(cur, action)
        sec[key] = int(cur) - 1
        cfg[section] = sec
        write_json_atomic(cfg_path, cfg, indent=1)
    return True


def pid_alive(pid: int | None) -> bool:
    """True when ``pid`` runs and is not a zombie."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return fh.read().rsplit(") ", 1)[1][:1] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def merge_phases(recs: list[dict], key: str) -> list[dict]:
    """Merge the ``start``/``end`` lines of one call (same ``key``); ``exit_code`` None without an ``end``."""
    merged: dict[str, dict] = {}
    for rec in recs:
        cur = merged.setdefault(str(rec.get(key)), {})
        cur.update(rec)
    out = list(merged.values())
    for rec in out:
        if rec.get("phase") != "end":
            rec["exit_code"] = None
        rec.pop("phase", None)
    out.sort(key=lambda r: r.get("ts", 0))
    return out


def now() -> float:
    return time.time()


#: entrypoints the fake TAO images provide (see :func:`image_provides`)
TAO_TOOLS = ("visual_changenet", "gap_analysis")


def image_provides(image: str, tool: str) -> bool:
    """Whether a (canonical) image ref ships ``tool``: in ``*/tao-toolkit*`` repositories the ``-pyt`` /
    ``-deploy`` images have ``visual_changenet`` and the data-services images (``tao-toolkit-ds`` or a
    ``data-services``/``dataservice`` tag) have ``gap_analysis``; any other image has every tool."""
    if tool not in TAO_TOOLS:
        return True
    name = image.split("@", 1)[0]
    slash, colon = name.rfind("/"), name.rfind(":")
    repo, tag = (name[:colon], name[colon + 1 :]) if colon > slash else (name, "")
    if "tao-toolkit" not in repo:
        return True
    data_services = "tao-toolkit-ds" in repo or "data-services" in tag or "dataservice" in tag
    if not tag and "tao-toolkit-ds" not in repo:
        return True  # a digest-only ref: flavour unknown
    return data_services if tool == "gap_analysis" else not data_services
