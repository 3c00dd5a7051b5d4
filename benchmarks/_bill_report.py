"""The rows and the phase table of ``bench_bill.py`` in ``results.md`` (used by ``run.py``)."""

from __future__ import annotations

from typing import Any

from _bill_timeline import LABELS

#: Non-work share budgets of the projected bill (fresh run, warm second run).
BILL_BUDGETS = {"bill_fresh_non_work_share": 0.10, "bill_warm_non_work_share": 0.05}
SIDES = (
    ("provider_fresh", "provider, fresh run"),
    ("provider_second", "provider, second run"),
    ("seed_recipe", "seed recipe (extended)"),
)


def _share(bill: dict[str, Any], side: str) -> float | None:
    return ((bill.get(side) or {}).get("projected") or {}).get("non_work_share")


def _percent(share: float | None) -> float | None:
    """A share as a percentage with two decimals (a share of 0.1001 is over a 10 % budget: 10.01, not "0.1")."""
    return None if share is None else round(100 * share, 2)


def bill_checks(bill: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows: the projected non-work share of each side (budgets for the provider's runs) and its dollars."""
    if not bill or "error" in bill:
        return [("GPU bill (flagship, scaled timeline): non-work share (%), provider fresh run", None, "≤ 10", None)]
    second = "warm" if bill.get("warm_reuse_supported") else "cold (no warm reuse in the operators)"
    fresh, warm = _share(bill, "provider_fresh"), _share(bill, "provider_second")
    label = f"GPU bill, flagship at 1/{bill['timings']['scale']:g} scale, projected"
    rows: list[tuple[str, Any, str, bool | None]] = [
        (
            f"{label}: non-work share (%), provider fresh run",
            _percent(fresh),
            "≤ 10",
            None if fresh is None else fresh <= BILL_BUDGETS["bill_fresh_non_work_share"],
        ),
        (
            f"{label}: non-work share (%), provider second run ({second})",
            _percent(warm),
            "≤ 5",
            None if warm is None else warm <= BILL_BUDGETS["bill_warm_non_work_share"],
        ),
        (f"{label}: non-work share (%), seed recipe", _percent(_share(bill, "seed_recipe")), "—", None),
    ]
    for side, name in SIDES:
        rows.append(
            (f"{label}: $ per run, {name}", ((bill.get(side) or {}).get("projected") or {}).get("dollars"), "—", None)
        )
    return rows


def bill_markdown(bill: dict[str, Any]) -> list[str]:
    """The per-phase table (measured on the scaled run, and projected), one row per side."""
    if not bill or "error" in bill or "timings" not in bill:
        return []
    t = bill["timings"]
    lines = [
        "",
        f"GPU bill per run (`bench_bill.py`): cloud-side durations at 1/{t['scale']:g} (deploy "
        f"{t['deploy_seconds']:g} s, sshd {t['ssh_seconds']:g} s later, {t['image_bytes'] / 1e9:g} GB per image at "
        f"{t['pull_bytes_per_second'] / 1e6:g} MB/s, {t['epoch_seconds']:g} s per TAO epoch), "
        f"{bill.get('dataset', {}).get('objects')} dataset objects of {bill.get('dataset', {}).get('object_bytes')} B; "
        f"second provider run: {bill.get('second_run_kind')}.",
        "",
        "Method. The provider's runs are projected from their own timeline: the instance's billed time (simulator "
        "history, create/start until the stop/delete request), its boots, every image download (fake docker), every "
        "TAO run (fake TAO) and every task's cost phases (CostMeter spans) as wall-clock intervals. Each instant of "
        "billed time gets one label, the first that applies: boot, work (a TAO run computes), pull (a step waits for "
        "its image), stage, upload, launch (work phase before its TAO run), detection (after it; readiness after "
        "sshd), resume (the job ended and Airflow had not resumed its deferred task yet: the meter's resume phase), "
        "setup (no task phase: Airflow task start, gaps between tasks), delete (after the last step). Work is the "
        "job's own run time only. Time "
        "that overlaps is counted once: a download running while inputs stage or while an earlier step computes is "
        "not billed again. Back to the real timeline, boots are stretched by the scale, a TAO run of measured m "
        f"and nominal N s lasts m + ({t['scale']:g} - 1) x N, a download likewise from its projected start, and a "
        "step waiting for its image waits until that projected end; staging, uploads, lags and all other host-side "
        "time keep their measured length (they are real time the provider's code takes). The seed recipe runs "
        f"every phase one after the other, so its projection is measured + ({t['scale']:g} - 1) x the nominal "
        "cloud-side seconds of boot, pull and work. Non-work share = 1 - work / billed. Seconds (measured / "
        "projected):",
        "",
        "| | " + " | ".join(LABELS) + " | billed | non-work share | $ |",
        "| --- |" + " --- |" * (len(LABELS) + 3),
    ]
    for side, name in SIDES:
        data = bill.get(side) or {}
        if "measured" not in data:
            continue
        m, p = data["measured"], data["projected"]
        cells = [f"{m['seconds'].get(k, 0.0):.1f} / {p['seconds'].get(k, 0.0):.0f}" for k in LABELS]
        share = f"{m['non_work_share']:.2%} / {p['non_work_share']:.2%}"
        money = " / ".join("$?" if v is None else f"${v:.2f}" for v in (m["dollars"], p["dollars"]))
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {m['total_s']:.0f} / {p['total_s']:.0f} | {share} | {money} |"
        )
    for side, name in SIDES[:2]:
        data = bill.get(side) or {}
        if "projected" in data:
            lines += ["", _largest_non_work(name, data)]
    return lines


def _largest_non_work(name: str, data: dict[str, Any]) -> str:
    """One line: the three largest non-work labels of a provider run (projected) and the download time hidden."""
    projected = data["projected"]
    billed = projected["total_s"] or 1.0
    top = sorted(((v, k) for k, v in projected["seconds"].items() if k != "work"), reverse=True)[:3]
    parts = ", ".join(f"{k} {v:.0f} s ({v / billed:.1%})" for v, k in top)
    timeline = data.get("timeline") or {}
    hidden = (
        f"; image downloads {timeline['downloads_projected_s']:.0f} s, of which {timeline['downloads_hidden_projected_s']:.0f}"
        " s ran under other phases"
        if timeline.get("downloads_projected_s")
        else "; no image downloaded"
    )
    return f"Largest non-work, {name} (projected): {parts}{hidden}."
