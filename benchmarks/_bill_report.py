"""The rows and the phase table of ``bench_bill.py`` in ``results.md`` (used by ``run.py``)."""

from __future__ import annotations

from typing import Any

#: Non-work share budgets of the projected bill (fresh run, warm second run).
BILL_BUDGETS = {"bill_fresh_non_work_share": 0.10, "bill_warm_non_work_share": 0.05}
SIDES = (
    ("provider_fresh", "provider, fresh run"),
    ("provider_second", "provider, second run"),
    ("seed_recipe", "seed recipe (extended)"),
)
PHASES = ("boot", "pull", "stage", "work", "upload", "lags")


def _share(bill: dict[str, Any], side: str) -> float | None:
    return ((bill.get(side) or {}).get("projected") or {}).get("non_work_share")


def bill_checks(bill: dict[str, Any]) -> list[tuple[str, Any, str, bool | None]]:
    """Rows: the projected non-work share of each side (budgets for the provider's runs) and its dollars."""
    if not bill or "error" in bill:
        return [("GPU bill (flagship, scaled timeline): non-work share, provider fresh run", None, "≤ 10 %", None)]
    second = "warm" if bill.get("warm_reuse_supported") else "cold (no warm reuse in the operators)"
    fresh, warm = _share(bill, "provider_fresh"), _share(bill, "provider_second")
    label = f"GPU bill, flagship at 1/{bill['timings']['scale']:g} scale, projected"
    rows: list[tuple[str, Any, str, bool | None]] = [
        (
            f"{label}: non-work share, provider fresh run",
            fresh,
            "≤ 0.1",
            None if fresh is None else fresh <= BILL_BUDGETS["bill_fresh_non_work_share"],
        ),
        (
            f"{label}: non-work share, provider second run ({second})",
            warm,
            "≤ 0.05",
            None if warm is None else warm <= BILL_BUDGETS["bill_warm_non_work_share"],
        ),
        (f"{label}: non-work share, seed recipe", _share(bill, "seed_recipe"), "—", None),
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
        f"second provider run: {bill.get('second_run_kind')}. Projected = measured + ({t['scale']:g} - 1) x the "
        "nominal cloud-side seconds of boot, pull and work. Seconds (measured / projected):",
        "",
        "| | " + " | ".join(PHASES) + " | billed | non-work share | $ |",
        "| --- |" + " --- |" * (len(PHASES) + 3),
    ]
    for side, name in SIDES:
        data = bill.get(side) or {}
        if "measured" not in data:
            continue
        m, p = data["measured"], data["projected"]
        cells = [f"{m['seconds'][k]:.1f} / {p['seconds'][k]:.0f}" for k in PHASES]
        share = f"{m['non_work_share']:.1%} / {p['non_work_share']:.1%}"
        money = " / ".join("$?" if v is None else f"${v:.2f}" for v in (m["dollars"], p["dollars"]))
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {m['total_s']:.0f} / {p['total_s']:.0f} | {share} | {money} |"
        )
    return lines
