"""The Brev page's HTML and SVG (ui/page.py, ui/charts.py): self-contained, read-only, links under the UI's
root, everything escaped, and a phase it does not know drawn like the others."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from airflow_provider_brev.core.instances.warm_pool_records import TaskRef
from airflow_provider_brev.core.ui.fleet import Fleet, FleetRow, WarmRow
from airflow_provider_brev.core.ui.history import DagHistory, RunBill
from airflow_provider_brev.ui.page import bill_link, duration, render_page, task_link

EVIL = '<script>alert("x")</script>'


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def bill(run_id: str, at: float, *, report: bool = True, **dollars: float) -> RunBill:
    ref = TaskRef("dag_a", run_id, "cost_report", -1) if report else None
    total = sum(dollars.values())
    seconds = {p: v * 1000 for p, v in dollars.items()}
    return RunBill("dag_a", run_id, at, dict(dollars), seconds, total, sum(seconds.values()), ref)


def row(dag_id: str = "dag_a", **kw) -> FleetRow:
    values = dict(
        dag_id=dag_id, run_id="manual__1", task_id="create", map_index=-1, name="gpu-1", id="id-1",
        instance_type="g6e.xlarge", state="RUNNING", created_at=0.0, age_seconds=3725.0, price_per_hour=2.0,
        dollars=2.07, expires_at=None, orphaned=False, adopted=False,
    )  # fmt: skip
    values.update(kw)
    return FleetRow(**values)


def warm_row() -> WarmRow:
    return WarmRow(
        "weekly", "gpu-2", "id-2", "g6e.xlarge", "dag_a", "STOPPED", 600.0, 3000.0, 0.05, 0.0083, "stop: ..."
    )


def page(fleet: Fleet, histories: list[DagHistory], root: str = "/") -> str:
    return render_page(fleet, histories, airflow_root=root, live_note="`brev ls` at 10:00", user="admin", now=0.0)


def test_the_page_is_self_contained_and_read_only() -> None:
    dag = DagHistory(
        "dag_a",
        [bill("r1", 1.0, work=1.0, boot=0.2), bill("r2", 2.0, work=0.5, mystery=0.1)],
        ["boot", "work", "mystery"],
    )
    html = page(Fleet([row()], [warm_row()], 0), [dag])
    found = {tag for tag, _ in tags(html)}
    assert not found & {"script", "form", "button", "input", "iframe", "link", "img", "object", "embed"}
    assert (
        re.findall(r"(?:https?:)?//[^\s\"'<>]+", html) == ["http://www.w3.org/2000/svg"] * 2
    )  # the SVG namespace only
    assert html.count('class="bar"') == 2 and "<polyline" in html
    assert "$2.07" in html and "1 h 02 min" in html and "$2.00/h" in html and "stop: ..." in html


def test_links_lead_to_task_instances_under_the_ui_root_in_the_whole_window() -> None:
    dag = DagHistory("dag_a", [bill("r 1/x", 1.0, work=1.0), bill("r2", 2.0, report=False, work=1.0)], ["work"])
    html = page(Fleet([row(map_index=3)], [], 0), [dag], root="/airflow/")
    anchors = [attrs for tag, attrs in tags(html) if tag == "a" and attrs.get("target") == "_top"]
    hrefs = {a["href"] for a in anchors}
    assert "/airflow/dags/dag_a/runs/r%201%2Fx/tasks/cost_report" in hrefs  # a bar: the cost report's log
    assert "/airflow/dags/dag_a/runs/r2" in hrefs  # no report: the run
    assert "/airflow/dags/dag_a/runs/manual__1/tasks/create/mapped/3" in hrefs
    assert all(href.startswith("/airflow/") for href in hrefs)
    assert task_link("/", "d", "r", "t") == "/dags/d/runs/r/tasks/t"
    assert bill_link("/", bill("r", 0.0, work=1.0)) == "/dags/dag_a/runs/r/tasks/cost_report"


def test_everything_a_user_or_a_record_controls_is_escaped() -> None:
    evil_bill = RunBill(EVIL, EVIL, 0.0, {EVIL: 1.0}, {EVIL: 1.0}, 1.0, 1.0, TaskRef(EVIL, EVIL, EVIL, -1))
    html = page(Fleet([row(dag_id=EVIL, name=EVIL, state=EVIL)], [], 0), [DagHistory(EVIL, [evil_bill], [EVIL])])
    assert "<script>" not in html
    assert "script" not in {tag for tag, _ in tags(html)}


def test_empty_sections_say_so_and_the_gone_count_is_shown() -> None:
    html = page(Fleet([], [], 2), [])
    assert 'id="fleet-empty"' in html and 'id="warm-empty"' in html and 'id="history-empty"' in html
    assert "2 recorded instance(s) are no longer listed" in html


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (None, 0, 59, 61, 3725, 90061)] == [
        "?",
        "0 s",
        "59 s",
        "1 min 01 s",
        "1 h 02 min",
        "1 d 1 h",
    ]
