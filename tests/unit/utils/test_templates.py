"""run_slug: a DAG run id as one safe path segment for S3 prefixes (manual runs have no logical date)."""

from __future__ import annotations

import re

import pytest

from airflow_provider_brev.utils.templates import run_slug

SAFE = re.compile(r"[A-Za-z0-9_-]+")


@pytest.mark.parametrize(
    ("run_id", "slug"),
    [
        # Airflow 3 manual run without a logical date: run_after plus a random suffix
        (
            "manual__2026-07-01T10:11:12.123456+00:00_AbCdEfGh",
            "manual__2026-07-01T10-11-12-123456-00-00_AbCdEfGh",
        ),
        ("scheduled__2026-01-05T03:00:00+00:00", "scheduled__2026-01-05T03-00-00-00-00"),
        ("asset_triggered__2026-01-05T03:00:00+00:00_x1Y2z3W4", "asset_triggered__2026-01-05T03-00-00-00-00_x1Y2z3W4"),
        ("my run / retry #2", "my-run-retry-2"),  # hand-written ids (REST API): spaces, slashes
        ("../../etc", "etc"),  # never a path traversal
        ("already_safe-id", "already_safe-id"),
    ],
)
def test_run_ids_become_one_safe_path_segment(run_id, slug):
    assert run_slug(run_id) == slug
    assert SAFE.fullmatch(run_slug(run_id))


@pytest.mark.parametrize("run_id", ["", "...", "::+", "_", "/"])
def test_a_run_id_without_letters_or_digits_still_gets_a_segment(run_id):
    slug = run_slug(run_id)
    assert re.fullmatch(r"run-[0-9a-f]{12}", slug)
    assert slug == run_slug(run_id)  # deterministic: every task and every try renders the same prefix


def test_distinct_generated_run_ids_stay_distinct():
    ids = [f"scheduled__2026-01-{day:02d}T03:00:00+00:00" for day in range(1, 29)]
    ids += [f"manual__2026-07-01T10:11:12.123456+00:00_{suffix}" for suffix in ("AbCdEfGh", "abcdefgh", "AbCdEfGi")]
    assert len({run_slug(run_id) for run_id in ids}) == len(ids)


def test_it_works_as_a_jinja_filter():
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["run_slug"] = run_slug
    rendered = env.from_string("runs/{{ run_id | run_slug }}/").render(run_id="manual__2026-07-01T10:11:12+00:00_Q")
    assert rendered == "runs/manual__2026-07-01T10-11-12-00-00_Q/"
