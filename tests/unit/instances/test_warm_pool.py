"""Unit tests of ``airflow_provider_brev/instances/warm_pool.py``."""

from __future__ import annotations


def test_next_run_at_reads_the_timetable():
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from airflow.sdk import DAG

    from airflow_provider_brev.instances.warm_pool import next_run_at

    daily = DAG(dag_id="reuse_daily", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=UTC))
    now = datetime(2026, 3, 2, 6, tzinfo=UTC).timestamp()
    tomorrow = datetime(2026, 3, 3, tzinfo=UTC).timestamp()
    today_run, old_run = (
        SimpleNamespace(data_interval_start=day, data_interval_end=day)
        for day in (datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))
    )
    for run in (today_run, old_run, None):  # this run's interval, an old one, a manual run: the next after now
        assert next_run_at({"dag": daily, "dag_run": run}, now=now) == tomorrow
    manual = DAG(dag_id="reuse_manual", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC))
    assert next_run_at({"dag": manual, "dag_run": today_run}, now=now) is None
    assert next_run_at({}) is None  # no DAG: the break-even falls back to max_idle
