"""The cost history of one DAG as inline SVG (pure): nothing to load, no script, drawn where the page is made.

:func:`bill_chart` draws each run's bill as a bar stacked by phase (dollars), oldest run on the left, each bar a link
to the run's cost report (its task log) with a tooltip; :func:`share_chart` draws the non-work share of each run
over the same runs. Colours are fixed for the known phases and derived from the name for any other, so a phase the
page does not know still gets a stable colour of its own.
"""

from __future__ import annotations

import hashlib
from html import escape
from typing import TYPE_CHECKING

from airflow_provider_brev.core.cost import money

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.core.ui.history import DagHistory, RunBill

#: Colours of the known phases (colour-blind-safe where it matters: work against the overheads).
PHASE_COLOURS = {
    "boot": "#e69f00",
    "pull": "#56b4e9",
    "stage": "#009e73",
    "work": "#0072b2",
    "resume": "#cc79a7",
    "settle": "#cc79a7",
    "upload": "#f0e442",
    "idle": "#999999",
    "stopped": "#8c6d31",
    "uncovered": "#d55e00",
    "other": "#bbbbbb",
}
WIDTH, HEIGHT, SHARE_HEIGHT = 760, 220, 130
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 12, 28


def phase_colour(phase: str) -> str:
    """The colour of ``phase``: its fixed one, else one derived from its name."""
    if phase in PHASE_COLOURS:
        return PHASE_COLOURS[phase]
    digest = hashlib.sha256(phase.encode("utf-8")).digest()
    return f"hsl({digest[0] * 360 // 256}, 55%, {40 + digest[1] % 25}%)"


def _frame(title: str, y_labels: list[tuple[float, str]], inner: list[str], caption: str, height: int) -> str:
    plot_h = height - _TOP - _BOTTOM
    axis = [
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" class="axis"/>',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{WIDTH - _RIGHT}" y2="{_TOP + plot_h}" class="axis"/>',
    ]
    for fraction, label in y_labels:
        y = _TOP + plot_h * (1 - fraction)
        axis.append(f'<line x1="{_LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - _RIGHT}" y2="{y:.1f}" class="grid"/>')
        axis.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{escape(label)}</text>')
    axis.append(
        f'<text x="{_LEFT}" y="{height - 8}" class="tick">{escape(caption)}</text>'
        if caption
        else ""  # no x labels: a run is named by its tooltip and link
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" class="chart">' + "".join(axis) + "".join(inner) + "</svg>"
    )


def _slots(count: int) -> tuple[float, float]:
    """The x step per run and the bar width."""
    step = (WIDTH - _LEFT - _RIGHT) / max(count, 1)
    return step, max(min(step * 0.8, 40.0), 0.5)


def bill_chart(dag: DagHistory, link: Callable[[RunBill], str]) -> str:
    """Each run's bill of ``dag`` as a stacked bar by phase; ``link(run)`` is where its bar leads."""
    runs = dag.runs
    top = max((run.total_dollars for run in runs), default=0.0) or 1.0
    plot_h = HEIGHT - _TOP - _BOTTOM
    step, width = _slots(len(runs))
    bars = []
    for i, run in enumerate(runs):
        x = _LEFT + i * step + (step - width) / 2
        y = float(_TOP + plot_h)
        rects = []
        for phase in dag.phases:
            value = run.dollars.get(phase, 0.0)
            if value <= 0:
                continue
            h = plot_h * value / top
            y -= h
            rects.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{h:.1f}" fill="{phase_colour(phase)}" '
                f'data-phase="{escape(phase)}"/>'
            )
        parts = ", ".join(f"{p} {money(run.dollars[p])}" for p in dag.phases if run.dollars.get(p, 0.0) > 0)
        share = run.non_work_share
        tip = f"{run.run_id}: {money(run.total_dollars)}" + (f" ({parts})" if parts else "")
        tip += f"; non-work {share:.1%}" if share is not None else ""
        bars.append(
            f'<a href="{escape(link(run))}" target="_top" class="bar" data-run="{escape(run.run_id)}">'
            f"<title>{escape(tip)}</title>{''.join(rects)}</a>"
        )
    labels = [(f, money(top * f)) for f in (0.0, 0.5, 1.0)]
    caption = f"{len(runs)} run(s), oldest on the left; $ per run by phase"
    return _frame(f"Bill per run of {dag.dag_id}", labels, bars, caption, HEIGHT)


def share_chart(dag: DagHistory) -> str:
    """The non-work share of each run of ``dag`` (0-100 %), as a line over the same runs as :func:`bill_chart`."""
    plot_h = SHARE_HEIGHT - _TOP - _BOTTOM
    step, _ = _slots(len(dag.runs))
    points = []
    dots = []
    for i, run in enumerate(dag.runs):
        share = run.non_work_share
        if share is None:
            continue
        x, y = _LEFT + (i + 0.5) * step, _TOP + plot_h * (1 - share)
        points.append(f"{x:.1f},{y:.1f}")
        dots.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" class="dot"><title>{escape(run.run_id)}: non-work '
            f"{share:.1%}</title></circle>"
        )
    line = [f'<polyline points="{" ".join(points)}" class="line"/>'] if len(points) > 1 else []
    labels = [(f, f"{f:.0%}") for f in (0.0, 0.5, 1.0)]
    return _frame(
        f"Non-work share per run of {dag.dag_id}", labels, line + dots, "non-work share of billed time", SHARE_HEIGHT
    )


def legend(phases: list[str]) -> str:
    """The phases' colours, as HTML."""
    items = "".join(
        f'<span class="key"><span class="swatch" style="background:{phase_colour(p)}"></span>{escape(p)}</span>'
        for p in phases
    )
    return f'<div class="legend">{items}</div>'
