"""The Brev page of the Airflow UI: how long it takes to make with ``--instances`` billing and ``--runs`` DAG runs.

The facts are what a busy deployment's metadata database holds, written with the provider's own writers: every
run has a create task's instance record, a step's and the create task's ``brev_cost``, the teardown's lifetime and
the cost report (``brev_run_cost``); ``--instances`` of those instances are still billing (no lifetime) and listed
by ``brev ls``; one DAG holds most of the runs (its plot has that many bars); 50 stopped instances sit in the warm
pool. Timed: what the API server does after its database reads for one request -- the fleet, the warm pool and
the cost history shaped (:mod:`airflow_provider_brev.core.ui`) and the page written, plots included. Reported: the
median and worst of ``--rounds`` renders, and the page's size.

    python benchmarks/bench_page.py --out result.json [--instances 200 --runs 1000 --rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from _common import progress, write_json

from airflow_provider_brev.core.cost import lifetime_cost, run_cost, step_cost
from airflow_provider_brev.core.instances.records import InstanceRecord
from airflow_provider_brev.core.instances.warm_pool import STATE_STOPPED, ReuseEntry
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.core.ui.facts import PageFacts, Pushed, RunFacts
from airflow_provider_brev.core.ui.fleet import fleet
from airflow_provider_brev.core.ui.history import XCOM_RUN_COST, history
from airflow_provider_brev.ui.page import render_page

NOW = 1_800_000_000.0
PRICE = 2.24


def dag_of(run: int, runs: int) -> str:
    """60 % of the runs in one weekly DAG, the rest spread over four others."""
    return "weekly_retrain" if run < runs * 0.6 else f"dag_{run % 4}"


def make_facts(instances: int, runs: int) -> PageFacts:
    pushed: list[Pushed] = []
    run_facts: dict[tuple[str, str], RunFacts] = {}
    live: dict[str, BrevInstance] = {}
    for i in range(runs):
        dag_id, run_id = dag_of(i, runs), f"scheduled__2026-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}T00:00:00+00:00_{i}"
        at = NOW - (runs - i) * 3600.0
        run_facts[(dag_id, run_id)] = RunFacts(dag_id, run_id, "running" if i >= runs - instances else "success", at)
        name, ident = f"afbrev-{dag_id[:12]}-create-{i:08x}-x202701011200", f"id{i:06d}"
        record = InstanceRecord(name, ident, True, False, {"instance_type": "g6e.xlarge"}, PRICE, at, at + 40)
        create = step_cost(instance_name=name, instance_type="g6e.xlarge", price_per_hour=PRICE, phases={"boot": 40})
        work = step_cost(
            instance_name=name,
            instance_type="g6e.xlarge",
            price_per_hour=PRICE,
            phases={"pull": 30 + i % 7, "stage": 12, "work": 600 + i % 50, "upload": 8, "idle": 3},
        )
        pushed += [
            Pushed(dag_id, run_id, "create", -1, "brev_instance", record.to_dict()),
            Pushed(dag_id, run_id, "create", -1, "brev_cost", create),
            Pushed(dag_id, run_id, "train", -1, "brev_cost", work),
        ]
        if i < runs - instances:  # released: its teardown reported the lifetime, its cost report the bill
            life = lifetime_cost(
                instance_name=name, instance_type="g6e.xlarge", price_per_hour=PRICE, created_at=at, ended_at=at + 720
            )
            report = run_cost([("create", create), ("train", work)], [("delete", life)])
            pushed += [
                Pushed(dag_id, run_id, "delete", -1, "brev_lifetime_cost", life),
                Pushed(dag_id, run_id, "cost_report", -1, XCOM_RUN_COST, report),
            ]
        else:
            live[ident] = BrevInstance(name=name, id=ident, status="RUNNING", instance_type="g6e.xlarge")
    warm = [
        ReuseEntry(
            key=f"key-{k % 10}",
            id=f"warm{k}",
            name=f"afbrev-warm-{k}",
            instance_type="g6e.xlarge",
            state=STATE_STOPPED,
            since=NOW - k * 600,
            claimed_by=f"weekly_retrain/r{k}/create/-1",
            disk_price_per_hour=0.034,
            break_even="stopping: the disk stopped for 24.00 h costs $0.82, less than ...",
        )
        for k in range(50)
    ]
    return PageFacts(pushed, run_facts, {}, warm, live, "`brev ls` through brev_default", NOW)


def render(facts: PageFacts) -> str:
    readable = {run[0] for run in facts.runs}
    return render_page(
        fleet(facts, readable),
        history(facts, readable),
        airflow_root="/",
        live_note=facts.live_note,
        user="admin",
        now=NOW,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    facts = make_facts(args.instances, args.runs)
    seconds = []
    html = ""
    for _ in range(args.rounds):
        start = time.perf_counter()
        html = render(facts)
        seconds.append(time.perf_counter() - start)
    rows, bars = html.count("<tr>"), html.count('class="bar"')
    result = {
        "instances": args.instances,
        "runs": args.runs,
        "rounds": args.rounds,
        "render_s_median": round(statistics.median(seconds), 4),
        "render_s_max": round(max(seconds), 4),
        "page_kib": round(len(html.encode()) / 1024, 1),
        "fleet_rows": html.count("<tr>", html.index('id="fleet-table"'), html.index('id="warm"')) - 1,
        "bars": bars,
        "table_rows": rows,
    }
    write_json(Path(args.out), result)
    progress(f"page: {result['render_s_median']} s median ({result['fleet_rows']} instances, {bars} bars)")
    return 0 if result["fleet_rows"] == args.instances and bars == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
