"""``run.py --only NAME[,NAME] --merge``: re-run some benchmarks and merge them into the saved results.

The other benchmarks keep the numbers of the last full ``make bench`` (``results.json``'s ``details``); the saved
``generated_at`` and machine stay theirs, and ``reruns`` records which benchmarks were run again, when, and the
load average then, which ``results.md`` states under its header.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path


def saved_details(path: Path) -> dict[str, Any]:
    """The saved results of the last full run (``{}`` when there are none)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def merged(saved: dict[str, Any], details: dict[str, dict[str, Any]], load_at_start: list[float]) -> tuple[Any, Any]:
    """The details to assemble (the saved ones, those just run replacing theirs) and what the assembled results
    keep of the saved run (``generated_at``, ``machine``) with the ``reruns`` record."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    load = [round(load_at_start[0], 1), round(os.getloadavg()[0], 1)]
    reruns = dict(saved.get("reruns") or {}) | {name: {"at": now, "load_average_1min": load} for name in details}
    keep = {"generated_at": saved["generated_at"], "machine": saved["machine"], "reruns": reruns}
    return {**(saved.get("details") or {}), **details}, keep


def rerun_lines(results: dict[str, Any]) -> list[str]:
    """The header lines of ``results.md`` naming the benchmarks re-run after the full run."""
    reruns = results.get("reruns") or {}
    return [
        f"Re-run alone after it (`run.py --only {name} --merge`) at {r['at']}, 1-min load average at start / end "
        f"{r['load_average_1min'][0]:.1f} / {r['load_average_1min'][1]:.1f}: **{name}**; the other rows are the "
        "full run's."
        for name, r in sorted(reruns.items())
    ] + ([""] if reruns else [])
