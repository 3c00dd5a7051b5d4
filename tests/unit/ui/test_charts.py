"""The cost history's inline SVG (ui/charts.py): bars stacked by phase in proportion to the bill, a tooltip per run,
and a stable colour for every phase, known or not."""

from __future__ import annotations

import re

from airflow_provider_brev.core.instances.warm_pool_records import TaskRef
from airflow_provider_brev.core.ui.history import DagHistory, RunBill
from airflow_provider_brev.ui.charts import PHASE_COLOURS, bill_chart, phase_colour, share_chart


def bill(run_id: str, at: float, **dollars: float) -> RunBill:
    seconds = {p: v * 1000 for p, v in dollars.items()}
    total = sum(dollars.values())
    return RunBill("d", run_id, at, dict(dollars), seconds, total, sum(seconds.values()), TaskRef("d", run_id, "r", -1))


def test_bars_are_stacked_by_phase_in_proportion_to_the_bill() -> None:
    dag = DagHistory("d", [bill("big", 1.0, boot=1.0, work=3.0), bill("small", 2.0, work=1.0)], ["boot", "work"])
    svg = bill_chart(dag, lambda run: "#")
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"[^>]*data-phase', svg)]
    assert len(heights) == 3
    assert heights[0] * 3 == heights[1] and heights[1] == 3 * heights[2]  # boot 1, work 3 | work 1
    assert "big: $4.00 (boot $1.00, work $3.00); non-work 25.0%" in svg
    assert 'points="' in share_chart(dag)


def test_known_phases_have_fixed_colours_and_any_other_a_stable_one_of_its_own() -> None:
    assert phase_colour("work") == PHASE_COLOURS["work"] != phase_colour("boot")
    assert phase_colour("brand-new") == phase_colour("brand-new") != phase_colour("other-new")
    assert phase_colour("brand-new").startswith("hsl(")
