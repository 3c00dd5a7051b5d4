"""The projected bill of one provider run, from the run's own timeline (used by ``bench_bill.py``).

A run at 1/``scale`` leaves a timeline of wall-clock intervals: the instance's billed time and its boots (the
simulator's instance history), every image download (the fake docker's ``pull`` calls that downloaded bytes),
every TAO run (the fake TAO's start and end records) and every cost phase of every task (``CostMeter`` spans,
recorded by :func:`record_meter_spans` in this process: ``dag.test()`` runs every task here).

:func:`project` walks the billed time in order and gives each instant **one** label, the first that applies:
``boot`` (the instance boots), ``work`` (a TAO run computes: useful compute), ``pull`` (a step waits for its
image), ``stage``, ``upload`` (a step transfers data), ``launch`` (a step's work phase before its TAO run started),
``detection`` (a work phase after its TAO run ended; the create task's readiness check after sshd came up),
``resume`` (a task's ``resume`` phase: its job had ended -- the trigger saw it -- and Airflow had not resumed the
task yet), ``setup`` (no phase of any task: Airflow's task start, the gap between tasks) and ``delete`` (after the last
phase of the last step: the teardown until the stop or delete request). Overlapping time is therefore counted
once: a download that runs while the inputs stage, or while an earlier step computes, is not billed again.

Projection back to the real timeline (the projected clock ``W``): a boot is stretched by ``scale`` (its scaled
duration is the simulator's, all cloud-side); a TAO run of measured length ``m`` and nominal scaled duration
``N`` becomes ``m + (scale - 1) x N`` (only its nominal part is cloud-side); a download likewise becomes
``m + (scale - 1) x N`` from its projected start, and a step waiting for its image waits until the projected
end of that image's downloads (or not at all when they ended before the wait began), plus what the wait took
after the download ended. Everything else -- staging, uploads, ``brev`` and Airflow overhead, detection lags --
keeps its measured length: it is host-side time the provider's code really takes. Non-work share = 1 - work /
billed, on the projected clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

HOST_LABELS = ("stage", "upload")
LABELS = ("boot", "pull", "stage", "work", "upload", "setup", "launch", "detection", "resume", "delete")


def record_meter_spans(spans: list[dict[str, Any]]) -> None:
    """Append every cost phase a task of this process closes (``CostMeter._record``: the spans its ``brev_cost``
    carries, ``resume`` included) to ``spans``: ``{"task_id", "phase", "start", "end"}`` (epoch seconds)."""
    from airflow_provider_brev.cost.meter import CostMeter

    original = CostMeter._record

    def record(self: CostMeter, phase: str, start: float, end: float) -> None:
        original(self, phase, start, end)
        task_id = getattr(getattr(self.memory, "ti", None), "task_id", None)
        spans.append({"task_id": task_id, "phase": phase, "start": start, "end": max(end, start)})

    CostMeter._record = record  # type: ignore[method-assign]


def tao_runs(root: Path, instance: str, window: tuple[float, float]) -> list[dict[str, Any]]:
    """The fake TAO runs on ``instance`` that started in ``window``: ``start``, ``end``, ``step`` (gap_analysis,
    train, evaluate or the action), from the raw start/end records (the merged view keeps only the end time)."""
    from airflow_provider_brev.testing.fake_common import read_jsonl
    from airflow_provider_brev.testing.fake_tao.spec import RUNS_FILE

    runs: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(str(root / RUNS_FILE)):
        if instance not in (rec.get("instance"), rec.get("instance_id")):
            continue
        run = runs.setdefault(str(rec["run_id"]), {"step": rec.get("action")})
        if rec.get("network") == "gap_analysis":
            run["step"] = "gap_analysis"
        run[str(rec["phase"])] = float(rec["ts"])
    return [r for r in runs.values() if "start" in r and "end" in r and window[0] <= r["start"] <= window[1]]


def downloads(sim: Any, instance: str, window: tuple[float, float], rate: float) -> list[dict[str, Any]]:
    """The image downloads on ``instance`` in ``window``: ``start``, ``end``, ``nominal`` (bytes / rate), ``images``."""
    found = []
    for call in sim.docker_calls(instance, subcommand="pull"):
        size = int(call.get("bytes") or 0)
        if size and window[0] <= call["ts"] <= window[1] and call.get("duration") is not None:
            start = float(call["ts"])
            end = start + float(call["duration"])
            found.append({"start": start, "end": end, "nominal": size / rate, "images": call.get("pulled") or []})
    return found


def billed_intervals(record: dict[str, Any], window: tuple[float, float], boot_nominal: dict[str, float]) -> Any:
    """From one instance record's history: the billed intervals begun in ``window`` (a deploy or start until the
    next stop or delete request) and the boots in them (until sshd answered)."""
    history = record.get("history") or [["deploy", record.get("created_at"), None]]
    billed, boots = [], []
    for i, (phase, since, _done) in enumerate(history):
        if phase not in ("deploy", "start") or not window[0] <= float(since) <= window[1]:
            continue
        end = float(history[i + 1][1]) if i + 1 < len(history) else window[1]
        billed.append((float(since), min(end, window[1])))
        ssh_up = float(record.get("t_ssh_up") or 0.0)
        up = ssh_up if since < ssh_up < end else float(since) + boot_nominal[phase]
        boots.append((float(since), up))
    return billed, boots


def _inside(t: float, intervals: Any) -> Any:
    return next((iv for iv in intervals if iv[0] <= t < iv[1]), None)


def project(
    *,
    billed: list[tuple[float, float]],
    boots: list[tuple[float, float]],
    runs: list[dict[str, Any]],
    pulls: list[dict[str, Any]],
    spans: list[dict[str, Any]],
    nominal_work: dict[str, float],
    step_images: dict[str, str],
    scale: float,
) -> dict[str, Any]:
    """Measured and projected seconds per label of the billed time (see the module docstring)."""
    for run in runs:
        m = max(run["end"] - run["start"], 1e-9)
        run["nominal"] = float(nominal_work.get(str(run["step"]), 0.0))
        run["rate"] = (m + (scale - 1) * run["nominal"]) / m
    runs = [r for r in runs if r["nominal"] > 0]
    last_phase_end = max((s["end"] for s in spans), default=0.0)
    points = sorted(
        {
            t
            for b0, b1 in billed
            for t in [b0, b1]
            + [x for iv in boots for x in iv]
            + [x for r in runs for x in (r["start"], r["end"])]
            + [x for s in spans for x in (s["start"], s["end"])]
            + [x for p in pulls for x in (p["start"], p["end"])]
            if b0 <= t <= b1
        }
    )
    measured = dict.fromkeys(LABELS, 0.0)
    projected = dict.fromkeys(LABELS, 0.0)
    clock: dict[float, float] = {}  # measured time -> projected time, at the points walked so far

    def w_at(t: float) -> float:
        known = max((p for p in clock if p <= t), default=None)
        return 0.0 if known is None else clock[known] + (t - known)

    def label(t: float) -> tuple[str, Any]:
        if _inside(t, boots):
            return "boot", None
        run = next((r for r in runs if r["start"] <= t < r["end"]), None)
        if run is not None:
            return "work", run
        active = [s for s in spans if s["start"] <= t < s["end"]]
        for phase in ("pull", *HOST_LABELS):
            span = next((s for s in active if s["phase"] == phase), None)
            if span is not None:
                return phase, span
        work = next((s for s in active if s["phase"] == "work"), None)
        if work is not None:
            started = [r["start"] for r in runs if work["start"] <= r["start"] < work["end"]]
            return ("launch" if not started or t < min(started) else "detection"), None
        if any(s["phase"] == "resume" for s in active):
            return "resume", None
        if any(s["phase"] == "boot" for s in active):
            return "detection", None
        return ("setup" if t < last_phase_end else "delete"), None

    segments: list[list[Any]] = []  # [label, measured, projected], adjacent labels merged
    previous_end: float | None = None
    for b0, b1 in sorted(billed):
        clock[b0] = clock[previous_end] + (b0 - previous_end) if previous_end is not None else 0.0
        inner = [p for p in points if b0 <= p <= b1]
        i = 0
        while i < len(inner) - 1:
            x, y = inner[i], inner[i + 1]
            kind, what = label((x + y) / 2)
            if kind == "pull":  # the whole wait for the image at once
                j = i + 1
                while j < len(inner) - 1 and label((inner[j] + inner[j + 1]) / 2)[0] == "pull":
                    j += 1
                y = inner[j]
                image = step_images.get(str(what.get("task_id")))
                mine = [p for p in pulls if p["start"] < y and (image is None or image in p["images"])]
                if mine:
                    ends = max(p["end"] for p in mine)
                    done = max(w_at(p["start"]) + (p["end"] - p["start"]) + (scale - 1) * p["nominal"] for p in mine)
                    proj = max(clock[x], done) + max(y - max(ends, x), 0.0) - clock[x]
                else:
                    proj = y - x
                for p in inner[i + 1 : j + 1]:
                    clock[p] = clock[x] + proj * (p - x) / (y - x)
                i = j
            else:
                rate = scale if kind == "boot" else what["rate"] if kind == "work" else 1.0
                proj = (y - x) * rate
                clock[y] = clock[x] + proj
                i += 1
            measured[kind] += y - x
            projected[kind] += proj
            if segments and segments[-1][0] == kind:
                segments[-1][1] += y - x
                segments[-1][2] += proj
            else:
                segments.append([kind, y - x, proj])
        previous_end = b1
    downloaded = sum((p["end"] - p["start"]) + (scale - 1) * p["nominal"] for p in pulls)
    stage_during_pulls = sum(
        max(0.0, min(s["end"], p["end"]) - max(s["start"], p["start"]))
        for s in spans
        if s["phase"] == "stage"
        for p in pulls
    )
    return {
        "measured": {k: round(v, 3) for k, v in measured.items()},
        "projected": {k: round(v, 3) for k, v in projected.items()},
        "timeline": [[k, round(m, 3), round(p, 3)] for k, m, p in segments],
        "downloads_projected_s": round(downloaded, 3),
        "downloads_hidden_projected_s": round(max(downloaded - projected["pull"], 0.0), 3),
        "stage_while_downloading_s": round(stage_during_pulls, 3),
        "tao_runs": [{k: r[k] for k in ("step", "start", "end", "nominal")} for r in runs],
    }
