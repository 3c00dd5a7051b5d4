"""Files, locks and fault knobs shared by the simulator's fake tools (stdlib only, cheap to import: the tools start
hundreds of times per test run). Tools in a sandbox find the simulator root in ``$BREV_SIM_ROOT``; their knobs live
in ``<root>/config.json`` under ``docker`` and ``tao``."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os

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
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, (json.dumps(rec, ensure_ascii=False) + "\n").encode())
    finally:
        os.close(fd)


def read_jsonl(path: str) -> list[dict]:
    out: list[dict] = []
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as fh:
        for line in fh:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


@contextlib.contextmanager
def flocked(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def sim_root(default: str | None = None) -> str | None:
    return os.environ.get("BREV_SIM_ROOT") or default


def load_section(root: str | None, section: str, defaults: dict) -> dict:
    """``defaults`` updated with ``config.json[section]``."""
    cfg = (read_json(os.path.join(root, "config.json"), {}) or {}) if root else {}
    return {**json.loads(json.dumps(defaults)), **(cfg.get(section) or {})}


def knob_applies(value: Any, action: str) -> bool:
    """A fault knob: ``True`` (always), a count (> 0), an action name or a list of action names."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, int | float):
        return value > 0
    return value in (action, "*", "all") if isinstance(value, str) else action in value or "*" in value


def consume_knob(root: str | None, section: str, key: str, action: str) -> bool:
    """Whether fault knob ``section.key`` fires for ``action``; a count is decremented under the state lock (the
    lock ``BrevSimulator`` holds while editing config)."""
    if not root or not knob_applies(load_section(root, section, {}).get(key), action):
        return False
    cfg_path = os.path.join(root, "config.json")
    with flocked(os.path.join(root, "state.lock")):
        cfg = read_json(cfg_path, {}) or {}
        sec = cfg.get(section) or {}
        cur = sec.get(key)
        if isinstance(cur, bool) or not isinstance(cur, int | float):
            return knob_applies(cur, action)
        if cur <= 0:
            return False
        sec[key] = int(cur) - 1
        cfg[section] = sec
        write_json_atomic(cfg_path, cfg)
    return True


def merge_phases(recs: list[dict], key: str) -> list[dict]:
    """Merge the ``start``/``end`` lines of one call (same ``key``); ``exit_code`` None without an ``end``."""
    merged: dict[str, dict] = {}
    for rec in recs:
        merged.setdefault(str(rec.get(key)), {}).update(rec)
    for rec in merged.values():
        if rec.pop("phase", None) != "end":
            rec["exit_code"] = None
    return sorted(merged.values(), key=lambda r: r.get("ts", 0))


def image_provides(image: str, tool: str) -> bool:
    """Whether a (canonical) image ships ``tool``: in ``tao-toolkit`` repositories the ``-pyt`` images have
    ``visual_changenet`` and the ``data-services`` images ``gap_analysis``; other images have every tool."""
    name = image.split("@", 1)[0]
    repo, _, tag = name.rpartition(":") if name.rfind(":") > name.rfind("/") else (name, "", "")
    if tool not in ("visual_changenet", "gap_analysis") or "tao-toolkit" not in repo or not tag:
        return True
    return ("data-services" in tag) == (tool == "gap_analysis")
