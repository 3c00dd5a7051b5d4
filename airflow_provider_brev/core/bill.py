"""A DAG run's bill (pure): what the instances billed, split into every task's phases, and its table.

The bill of an instance is its billed window, ``brev create`` (or ``brev start`` of a stopped warm instance) to
the ``brev delete`` (or ``brev stop``) request, as its teardown reported it (:func:`~.cost.lifetime_cost`). Every
second of that window belongs to **one** task and **one** phase (:func:`split_window`):

* each task that billed on the instance reports its window (``started_at`` .. ``ended_at``) and the spans of its
  phases (``spans``: ``[phase, start, end]``, wall-clock; :func:`~.cost.step_cost`); what of its window no span
  covers is its ``idle``;
* where tasks overlap (steps running side by side on one instance) a second goes to the phase first in
  :data:`PRECEDENCE` (``work`` before any overhead), then to the task first in the DAG's order;
* what no task covers -- the scheduler's gaps between tasks, a plain ``@task`` that used the instance without
  a meter -- is :data:`UNCOVERED`, a row of its own.

So the phases of every row add up to the bill. Tasks on an instance the run has no window of (an existing instance
the run neither created nor deleted, an ephemeral step's own instance, a Lepton job, whose cost is an estimate from
its shape's price) bill what they measured themselves: their windows, merged where they overlap, split the same way.
A stopped warm instance's disk time (stopped until this run started it again) is billed to its reuse key
(:func:`disk_cost`). :func:`run_cost` puts the bill first, then the rows; its total is the bill's.

The report is kept under :data:`XCOM_RUN_COST`; :func:`is_run_report` is how its one reader, the Brev page's cost
history (:mod:`~airflow_provider_brev.core.ui.history`), recognises it: writer and reader share both.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import CURRENCY, PHASES, dollars, money, rate

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

#: Billed time no task covers (a row of the table, a column of its own).
UNCOVERED = "uncovered"
#: A stopped warm instance's disk time (a row of its own, billed to its reuse key).
STOPPED = "stopped"
#: The columns of the table: every phase, then a stopped disk's time and what no task covers.
TABLE_PHASES = (*PHASES, STOPPED, UNCOVERED)
#: Which phase a second goes to where tasks overlap: the first in this order.
PRECEDENCE = ("work", "upload", "stage", "pull", "boot", "resume", "idle")
#: The task id of the uncovered row.
UNCOVERED_ROW = "(uncovered)"
#: The XCom key of a DAG run's report (:func:`run_cost`), kept by the task that made it; the Brev page reads it.
XCOM_RUN_COST = "brev_run_cost"

Span = tuple[str, float, float]


def task_spans(cost: Mapping[str, Any]) -> list[Span] | None:
    """The spans of a task's cost, its ``idle`` filling the rest of its window; ``None`` when the cost carries no
    window (a cost reported before spans existed: it can only be counted as it was reported).

    :param cost: a :func:`~.cost.step_cost` dict.
    """
    started, ended, spans = cost.get("started_at"), cost.get("ended_at"), cost.get("spans")
    if not isinstance(started, int | float) or not isinstance(ended, int | float) or not isinstance(spans, list):
        return None
    found: list[Span] = [
        (str(phase), float(start), float(end))
        for phase, start, end in (s for s in spans if isinstance(s, list | tuple) and len(s) == 3)
        if phase in PHASES and end > start
    ]
    if ended > started:
        found.append(("idle", float(started), float(ended)))
    return found


def split_window(
    start: float, end: float, tasks: Sequence[tuple[str, Sequence[Span]]]
) -> tuple[list[dict[str, float]], float]:
    """Split the billed window ``start`` .. ``end`` into the tasks' phases (see the module docstring).

    :param start: the window's start (epoch seconds).
    :param end: its end.
    :param tasks: ``(task id, spans)`` in the DAG's order (:func:`task_spans`).
    :return: the seconds per phase of each task (in the order given) and the uncovered seconds.
    """
    rank = {phase: i for i, phase in enumerate(PRECEDENCE)}
    shares: list[dict[str, float]] = [dict.fromkeys(PHASES, 0.0) for _ in tasks]
    end = max(start, end)  # an inverted window bills nothing
    points = {start, end}  # the window's bounds and every span's, held inside the window
    for _, spans in tasks:
        points.update(min(max(t, start), end) for _, s, e in spans for t in (s, e))
    ordered = sorted(points)
    uncovered = 0.0
    for a, b in itertools.pairwise(ordered):
        owner = min(
            (
                (rank[phase], i, phase)
                for i, (_, spans) in enumerate(tasks)
                for phase, s, e in spans
                if s <= a and e >= b
            ),
            default=None,
        )
        if owner is None:
            uncovered += b - a
        else:
            shares[owner[1]][owner[2]] += b - a
    return shares, uncovered


def merged(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``windows`` as disjoint windows, in order."""
    out: list[list[float]] = []
    for s, e in sorted(w for w in windows if w[1] > w[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def disk_cost(
    *, reuse_key: str, instance_name: str, stopped_at: float, started_at: float, disk_price_per_hour: float | None
) -> dict[str, Any]:
    """A stopped warm instance's disk time, from its stop to the start that reused it, charged to its reuse key
    (the create task's ``brev_cost["stopped"]``).

    :param reuse_key: the key it was stopped under.
    :param instance_name: the instance.
    :param stopped_at: when it was stopped (epoch seconds).
    :param started_at: when this run started it again.
    :param disk_price_per_hour: its disk's price (``None``: not known).
    """
    seconds = round(max(started_at - stopped_at, 0.0), 3)
    return {
        "reuse_key": reuse_key,
        "instance_name": instance_name,
        "stopped_at": stopped_at,
        "started_at": started_at,
        "seconds": seconds,
        "disk_price_per_hour": disk_price_per_hour,
        "dollars": dollars(disk_price_per_hour, seconds),
    }


def is_run_report(value: Any) -> bool:
    """Whether ``value`` is a run's report as :func:`run_cost` makes it (a dict with its ``tasks`` and a total).

    :param value: what a task kept under :data:`XCOM_RUN_COST`.
    """
    return isinstance(value, dict) and isinstance(value.get("tasks"), list) and "total_dollars" in value


# -- the run's report --------------------------------------------------------------------------------------------
def _row(task_id: str, cost: Mapping[str, Any], seconds: Mapping[str, float], **extra: Any) -> dict[str, Any]:
    price = cost.get("price_per_hour")
    rounded = {phase: round(float(seconds.get(phase, 0.0)), 3) for phase in TABLE_PHASES}
    total = round(sum(float(seconds.get(phase, 0.0)) for phase in TABLE_PHASES), 3)
    return {
        "task_id": task_id,
        "instance_name": cost.get("instance_name"),
        "instance_type": cost.get("instance_type"),
        "price_per_hour": price,
        "currency": CURRENCY,
        "seconds": rounded,
        "dollars": {phase: dollars(price, value) for phase, value in rounded.items()},
        "total_seconds": total,
        "total_dollars": dollars(price, total),
        "estimate": bool(cost.get("estimate")),
        **extra,
    }


def _as_reported(cost: Mapping[str, Any]) -> dict[str, float]:
    return {phase: float((cost.get("seconds") or {}).get(phase, 0.0)) for phase in PHASES}


def _bill_entry(kind: str, cost: Mapping[str, Any], seconds: float, **extra: Any) -> dict[str, Any]:
    price = cost.get("price_per_hour")
    return {
        "kind": kind,
        "instance_name": cost.get("instance_name"),
        "instance_type": cost.get("instance_type"),
        "price_per_hour": price,
        "seconds": round(seconds, 3),
        "dollars": dollars(price, seconds),
        **extra,
    }


def _split_group(
    group: list[tuple[int, str, Mapping[str, Any]]], windows: list[tuple[float, float]]
) -> tuple[dict[int, dict[str, float]], float, float]:
    """Split ``windows`` among the costs of ``group``; costs without spans count as reported (their time taken
    from the uncovered rest). Returns the seconds by position, the uncovered seconds and the billed seconds."""
    spanned = [(i, task_id, spans) for i, task_id, cost in group if (spans := task_spans(cost)) is not None]
    shares: dict[int, dict[str, float]] = {i: dict.fromkeys(PHASES, 0.0) for i, _, _ in group}
    uncovered = billed = 0.0
    for start, end in windows:
        split, rest = split_window(start, end, [(task_id, spans) for _, task_id, spans in spanned])
        for (i, _, _), share in zip(spanned, split, strict=True):
            shares[i] = {phase: shares[i][phase] + share[phase] for phase in PHASES}
        uncovered += rest
        billed += end - start
    known = {i for i, _, _ in spanned}
    for i, _, cost in group:
        if i not in known:
            shares[i] = _as_reported(cost)
            uncovered -= sum(shares[i].values())
    return shares, max(uncovered, 0.0), billed


def run_cost(
    costs: Iterable[tuple[str, Mapping[str, Any]]], lifetimes: Iterable[tuple[str, Mapping[str, Any]]] = ()
) -> dict[str, Any]:
    """A DAG run's bill and its split into tasks and phases (JSON; see the module docstring).

    :param costs: ``(task id, cost)`` pairs in the DAG's order (a mapped task gives one pair per map index).
    :param lifetimes: ``(teardown task id, lifetime)`` pairs (:func:`~.cost.lifetime_cost`): the billed windows of
        the instances the run released.
    :return: ``{"bill": [{"kind", "instance_name", "instance_type", "price_per_hour", "seconds", "dollars", ...}],
        "tasks": [rows: "task_id", "instance_name", "instance_type", "price_per_hour", "seconds" and "dollars" per
        phase of :data:`TABLE_PHASES`, "total_seconds", "total_dollars", "estimate"], "seconds": {phase: s},
        "total_seconds", "total_dollars" (the bill's), "unpriced": [rows whose price is not known], "lifetimes",
        "phases", "currency"}``. ``kind`` is ``instance`` (a released instance's window), ``measured`` (what the
        tasks on it measured), ``estimate`` (a Lepton job) or ``disk`` (a stopped warm instance's disk).
    """
    costs = list(costs)
    lives = [(task_id, dict(life)) for task_id, life in lifetimes]
    rows: list[dict[str, Any]] = []
    bill: list[dict[str, Any]] = []
    placed: dict[int, dict[str, Any]] = {}
    claimed: set[int] = set()
    groups: list[set[int]] = []  # the positions of the costs on each lifetime's instance
    for life_task, life in lives:
        start = float(life.get("created_at") or 0.0)
        end = float(life.get("ended_at") or life.get("deleted_at") or start)
        group = [
            (i, task_id, cost)
            for i, (task_id, cost) in enumerate(costs)
            if i not in claimed and cost.get("instance_name") == life.get("instance_name")
        ]
        claimed.update(i for i, _, _ in group)
        groups.append({i for i, _, _ in group})
        shares, uncovered, billed = _split_group(group, [(start, end)])
        price = life.get("price_per_hour")
        for i, task_id, cost in group:
            billed_at = {
                "price_per_hour": cost.get("price_per_hour") if price is None else price,
                "instance_type": cost.get("instance_type") or life.get("instance_type"),
            }
            placed[i] = _row(task_id, {**cost, **billed_at}, shares[i])
        if uncovered > 0.0005:
            placed[len(costs) + len(bill)] = _row(UNCOVERED_ROW, life, {UNCOVERED: uncovered})
        bill.append(
            _bill_entry(
                "instance",
                life,
                billed,
                task_id=life_task,
                started_at=start,
                ended_at=end,
                ended_by=life.get("ended_by") or "delete",
                tasks=[task_id for _, task_id, _ in group],
            )
        )
    rest: dict[str, list[tuple[int, str, Mapping[str, Any]]]] = {}
    for i, (task_id, cost) in enumerate(costs):
        if i not in claimed:
            rest.setdefault(str(cost.get("instance_name") or ""), []).append((i, task_id, cost))
    for group in rest.values():
        windows = [(float(c["started_at"]), float(c["ended_at"])) for _, _, c in group if task_spans(c) is not None]
        shares, _, billed = _split_group(group, merged(windows))
        billed += sum(float(c.get("total_seconds") or 0.0) for _, _, c in group if task_spans(c) is None)
        for i, task_id, cost in group:
            placed[i] = _row(task_id, cost, shares[i])
        first = group[0][2]
        kind = "estimate" if any(c.get("estimate") for _, _, c in group) else "measured"
        bill.append(_bill_entry(kind, first, billed, tasks=[task_id for _, task_id, _ in group]))
    for task_id, cost in costs:
        stopped = cost.get("stopped")
        if isinstance(stopped, dict) and isinstance(stopped.get("seconds"), int | float):
            key = stopped.get("reuse_key")
            disk = {
                "instance_name": stopped.get("instance_name"),
                "instance_type": "disk",
                "price_per_hour": stopped.get("disk_price_per_hour"),
            }
            seconds = float(stopped["seconds"])
            placed[len(costs) + len(bill)] = _row(f"(stopped: {key})", disk, {STOPPED: seconds})
            bill.append(_bill_entry("disk", disk, seconds, task_id=task_id, reuse_key=key))
    rows = [placed[key] for key in sorted(placed)]
    priced = [entry for entry in bill if entry["dollars"] is not None]
    return {
        "bill": bill,
        "tasks": rows,
        "seconds": {phase: round(sum(r["seconds"][phase] for r in rows), 3) for phase in TABLE_PHASES},
        "total_seconds": round(sum(entry["seconds"] for entry in bill), 3),
        "total_dollars": round(sum(float(entry["dollars"]) for entry in priced), 6),
        "unpriced": [r["task_id"] for r in rows if r.get("total_dollars") is None],
        "lifetimes": [
            {
                "task_id": task_id,
                **life,
                "tasks_dollars": round(
                    sum(float(placed[i]["total_dollars"] or 0.0) for i in placed if i in entry_tasks),
                    6,
                ),
            }
            for (task_id, life), entry_tasks in zip(lives, groups, strict=True)
        ],
        "phases": list(TABLE_PHASES),
        "currency": CURRENCY,
    }


def bill_lines(report: Mapping[str, Any]) -> list[str]:
    """The bill, first: its total, then one line per instance window, measured group, estimate and stopped disk."""
    lines = [
        f"Bill: {money(report.get('total_dollars'))} for {float(report.get('total_seconds') or 0):.1f} s "
        "(every row below is a share of it; the total row equals it)"
    ]
    for entry in report.get("bill") or []:
        what = f"{entry.get('instance_type') or '?'} at {rate(entry.get('price_per_hour'))}"
        seconds, cost = float(entry["seconds"]), money(entry.get("dollars"))
        kind = entry.get("kind")
        if kind == "instance":
            verb = "brev start/create" if entry.get("ended_by") == "stop" else "brev create"
            end = "brev stop" if entry.get("ended_by") == "stop" else "brev delete"
            lines.append(
                f"  instance {entry['instance_name']} ({what}): {seconds:.1f} s from {verb} to {end} "
                f"({entry.get('task_id')}), {cost}"
            )
        elif kind == "disk":
            lines.append(
                f"  stopped disk of reuse key {entry.get('reuse_key')!r} ({entry['instance_name']}, "
                f"{rate(entry.get('price_per_hour'))}): {seconds / 3600:.2f} h until this run started it, {cost}"
            )
        else:
            if kind == "estimate":
                lines.append(
                    f"  Lepton job {entry['instance_name']} ({what}): {seconds:.1f} s, an estimate from its shape's "
                    f"price, {cost}"
                )
            else:
                lines.append(
                    f"  instance {entry['instance_name']} ({what}): {seconds:.1f} s as its tasks measured it, {cost}"
                )
    return lines


def cost_table(report: Mapping[str, Any]) -> str:
    """A :func:`run_cost` report as text: the bill first (:func:`bill_lines`), then one row per task (type, $/h,
    seconds per phase, $) and a total equal to the bill. Columns of phases no row has are left out (boot and work
    always shown), so the table stays narrow."""
    tasks = list(report.get("tasks") or [])
    phases = [p for p in TABLE_PHASES if p in ("boot", "work") or any(float(t["seconds"].get(p, 0.0)) for t in tasks)]
    header = ["task", "type", "$/h", *phases, "seconds", "$"]
    rows = [
        [
            str(task["task_id"]) + (" (estimate)" if task.get("estimate") else ""),
            str(task.get("instance_type") or "?"),
            "?" if task.get("price_per_hour") is None else f"{task['price_per_hour']:.2f}",
            *(f"{float(task['seconds'].get(phase, 0.0)):.1f}" for phase in phases),
            f"{float(task['total_seconds']):.1f}",
            money(task.get("total_dollars")),
        ]
        for task in tasks
    ]
    seconds = report.get("seconds") or {}
    total = ["total", "", "", *(f"{float(seconds.get(p, 0.0)):.1f}" for p in phases)]
    total += [f"{float(report.get('total_seconds') or 0):.1f}", money(report.get("total_dollars"))]
    widths = [max(len(row[i]) for row in [header, *rows, total]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = [
            cell.ljust(width) if i < 2 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths)
    text = [*bill_lines(report), "", line(header), rule, *map(line, rows), rule, line(total)]
    if report.get("unpriced"):
        text.append(f"(price not known for: {', '.join(report['unpriced'])}; not in the dollars)")
    if seconds.get(UNCOVERED):
        text.append(
            "(uncovered: billed time no task accounts for -- Airflow's gaps between tasks, or a task without a meter)"
        )
    if seconds.get("resume"):
        text.append("(resume: from a job's end until Airflow resumed its task after the deferral; not work)")
    return "\n".join(text)
