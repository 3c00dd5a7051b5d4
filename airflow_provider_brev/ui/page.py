"""The Brev page as HTML (pure, no I/O): the fleet, the warm pool and the cost history, in one self-contained document.

No script, no stylesheet or font from anywhere: the style is inline and the plots are inline SVG
(:mod:`.charts`), so the page works offline and behind any proxy. Every link is a path under the Airflow UI's own
root (``airflow_root``, e.g. ``/`` or ``/airflow/``): a run's bar and a row's task lead to that task instance's page
(its log) in the Airflow UI, opened in the whole window (the page itself is shown in the UI's frame). Nothing on the
page can create, start, stop or delete anything: it has no form and no button.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING
from urllib.parse import quote

from airflow_provider_brev.core.cost import money, rate
from airflow_provider_brev.ui.charts import bill_chart, legend, share_chart

if TYPE_CHECKING:
    from airflow_provider_brev.core.ui.fleet import Fleet
    from airflow_provider_brev.core.ui.history import DagHistory, RunBill

#: Runs listed under a DAG's plots (the newest; the plots show every run).
TABLE_RUNS = 10

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px;color:#1a1a1a;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 6px}h3{font-size:15px;margin:16px 0 4px}
p.note{color:#555;margin:4px 0;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#b00020;font-weight:600}code{font-size:12px}
svg.chart{display:block;max-width:100%;height:auto;margin:4px 0}
svg .axis{stroke:#666}svg .grid{stroke:#eee}svg .tick{font-size:11px;fill:#555}
svg .line{fill:none;stroke:#d55e00;stroke-width:1.5}svg .dot{fill:#d55e00}
.legend{font-size:12px;margin:2px 0 8px}.key{margin-right:12px;white-space:nowrap}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
nav a{margin-right:14px}
@media (prefers-color-scheme: dark){body{background:#1e1e1e;color:#e6e6e6}th{background:#2a2a2a}
th,td{border-color:#444}p.note{color:#aaa}svg .tick{fill:#bbb}svg .grid{stroke:#333}a{color:#8ab4f8}}
"""


def duration(seconds: float | None) -> str:
    """``seconds`` as ``2 d 3 h``, ``1 h 05 min``, ``4 min 10 s`` or ``12 s``; ``?`` when not known."""
    if seconds is None:
        return "?"
    s = int(max(seconds, 0.0))
    days, hours, minutes = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {s % 60:02d} s"
    return f"{s} s"


def timestamp(epoch: float | None) -> str:
    """``epoch`` as ``2026-12-04 10:58 UTC``; ``?`` when not known."""
    if epoch is None:
        return "?"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def task_link(airflow_root: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The Airflow UI's page of a task instance (its log), under ``airflow_root``."""
    path = f"dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id, safe='')}"
    return airflow_root + path + (f"/mapped/{map_index}" if map_index >= 0 else "")


def run_link(airflow_root: str, dag_id: str, run_id: str) -> str:
    """The Airflow UI's page of a DAG run, under ``airflow_root``."""
    return f"{airflow_root}dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def bill_link(airflow_root: str, run: RunBill) -> str:
    """Where a run's bar leads: its cost report's task log, else the run."""
    if run.report is not None:
        ref = run.report
        return task_link(airflow_root, ref.dag_id, ref.run_id, ref.task_id, ref.map_index)
    return run_link(airflow_root, run.dag_id, run.run_id)


def _table(header: list[str], rows: list[list[str]], *, numeric: set[int], table_id: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _a(href: str, text: str) -> str:
    return f'<a href="{escape(href)}" target="_top">{escape(text)}</a>'


def fleet_section(fleet: Fleet, airflow_root: str, live_note: str) -> str:
    """The fleet: every recorded instance not yet released."""
    rows = []
    for row in fleet.rows:
        task = _a(task_link(airflow_root, row.dag_id, row.run_id, row.task_id, row.map_index), row.task_id)
        flags = []
        if row.orphaned:
            flags.append('<span class="flag" title="its run finished without releasing it">run ended</span>')
        if row.adopted:
            flags.append("adopted")
        rows.append(
            [
                escape(row.dag_id),
                _a(run_link(airflow_root, row.dag_id, row.run_id), row.run_id),
                task,
                f"<code>{escape(row.name)}</code>",
                escape(row.instance_type or "?"),
                escape(row.state) + (" " + " ".join(flags) if flags else ""),
                duration(row.age_seconds),
                escape(rate(row.price_per_hour)),
                escape(money(row.dollars)),
                f"<code>{escape(row.id or '?')}</code>",
                escape(timestamp(row.expires_at)),
            ]
        )
    total = sum(row.dollars or 0.0 for row in fleet.rows)
    hourly = sum(row.price_per_hour or 0.0 for row in fleet.rows)
    parts = [
        '<h2 id="fleet">Fleet</h2>',
        f'<p class="note">{len(fleet.rows)} instance(s) recorded and not yet released: {escape(rate(hourly))} '
        f"together, {escape(money(total))} so far. Live state: {escape(live_note)}</p>",
    ]
    if fleet.gone:
        parts.append(
            f'<p class="note">{fleet.gone} recorded instance(s) are no longer listed by <code>brev ls</code> '
            "(deleted outside their DAG run: the janitor, or by hand) and are not shown.</p>"
        )
    header = ["DAG", "run", "task", "instance", "type", "state", "age", "$/h", "$ so far", "id", "expires"]
    parts.append(
        _table(header, rows, numeric={6, 7, 8}, table_id="fleet-table")
        if rows
        else '<p class="note" id="fleet-empty">No instance is billing.</p>'
    )
    return "".join(parts)


def warm_section(fleet: Fleet) -> str:
    """The warm pool: stopped instances per reuse key."""
    rows = [
        [
            escape(row.key),
            f"<code>{escape(row.name)}</code>",
            escape(row.instance_type or "?"),
            escape(row.dag_id or "?"),
            escape(row.state),
            duration(row.idle_seconds),
            duration(row.left_seconds),
            escape(rate(row.disk_price_per_hour)),
            escape(money(row.disk_dollars)),
            escape(row.break_even or "not recorded"),
            f"<code>{escape(row.id)}</code>",
        ]
        for row in fleet.warm
    ]
    header = ["reuse key", "instance", "type", "DAG", "state", "idle", "max_idle leaves", "disk $/h", "disk $ so far"]
    header += ["break-even (last teardown)", "id"]
    intro = (
        '<h2 id="warm">Warm pool</h2><p class="note">Stopped instances kept for the next run of their reuse key: '
        "only their disk bills. The janitor deletes one when its <code>max_idle</code> has passed.</p>"
    )
    if not rows:
        return intro + '<p class="note" id="warm-empty">No stopped instance.</p>'
    return intro + _table(header, rows, numeric={5, 6, 7, 8}, table_id="warm-table")


def history_section(histories: list[DagHistory], airflow_root: str) -> str:
    """The cost history: per DAG, each run's bill by phase and its non-work share, and the newest runs' table."""
    parts = [
        '<h2 id="history">Cost history</h2><p class="note">Each bar is one run\'s bill, stacked by phase; it links to '
        "the run's cost report (its task log), or to the run when it has none.</p>"
    ]
    if not histories:
        parts.append('<p class="note" id="history-empty">No DAG run reported a cost yet.</p>')
    for dag in histories:

        def link(run: RunBill, root: str = airflow_root) -> str:
            return bill_link(root, run)

        total = sum(run.total_dollars for run in dag.runs)
        parts.append(
            f'<section class="dag" data-dag="{escape(dag.dag_id)}"><h3>{escape(dag.dag_id)}</h3>'
            f'<p class="note">{len(dag.runs)} run(s), {escape(money(total))} in all.</p>'
        )
        parts.append(legend(dag.phases) + bill_chart(dag, link) + share_chart(dag))
        rows = [
            [
                _a(bill_link(airflow_root, run), run.run_id),
                escape(timestamp(run.at)),
                escape(money(run.total_dollars)),
                duration(run.total_seconds),
                "?" if run.non_work_share is None else f"{run.non_work_share:.1%}",
                escape(", ".join(f"{p} {money(run.dollars[p])}" for p in dag.phases if run.dollars.get(p))),
            ]
            for run in reversed(dag.runs[-TABLE_RUNS:])
        ]
        header = ["run (cost report)", "ran", "bill", "billed time", "non-work", "by phase"]
        parts.append(_table(header, rows, numeric={2, 3, 4}, table_id=f"runs-{escape(dag.dag_id)}") + "</section>")
    return "".join(parts)


def render_page(
    fleet: Fleet,
    histories: list[DagHistory],
    *,
    airflow_root: str,
    live_note: str,
    user: str,
    now: float,
) -> str:
    """The whole page.

    :param fleet: the fleet and the warm pool (:func:`~airflow_provider_brev.core.ui.fleet.fleet`).
    :param histories: the cost history (:func:`~airflow_provider_brev.core.ui.history.history`).
    :param airflow_root: the path of the Airflow UI's root, ending in ``/``.
    :param live_note: where the live state comes from, or why there is none.
    :param user: who is looking (shown: the page is scoped to what they may read).
    :param now: when the page is made (epoch seconds).
    """
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Brev</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head><body>'
        '<h1>NVIDIA Brev</h1><p class="note">Read-only: what the provider recorded about its instances and what '
        f"the runs cost, for the DAGs {escape(user)} may read. Made {escape(timestamp(now))}.</p>"
        '<nav><a href="#fleet">Fleet</a><a href="#warm">Warm pool</a><a href="#history">Cost history</a></nav>'
        + fleet_section(fleet, airflow_root, live_note)
        + warm_section(fleet)
        + history_section(histories, airflow_root)
        + "</body></html>"
    )
