"""Helpers for Jinja templates in DAGs that use this provider.

Airflow 3 creates manual runs (UI, CLI, REST API) without a logical date by default, so ``{{ ds }}``,
``{{ ds_nodash }}``, ``{{ ts }}``, ``{{ logical_date }}`` and ``{{ data_interval_start }}`` are undefined or ``None``
in them. ``run_id`` is always defined and unique per DAG run, but contains ``:``, ``+`` and ``.``
(``manual__2026-07-01T10:11:12.123456+00:00_AbCdEfGh``). :func:`run_slug` turns it into one safe path segment for
S3 prefixes, directory names and job names. Register it as a filter on the DAG::

    from airflow_provider_brev.utils.templates import run_slug

    with DAG(..., user_defined_filters={"run_slug": run_slug}):
        BrevToS3Operator(..., s3_prefix="runs/{{ run_id | run_slug }}/")

The slug is deterministic: every try of a task, and every task of the run, renders the same prefix.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def run_slug(run_id: object) -> str:
    """``run_id`` as a single path segment of letters, digits, ``_`` and ``-`` (never empty, never ``.``/``..``).

    Every run of characters outside that set (``:``, ``+``, ``.``, ``/``, spaces ...) becomes one ``-``; leading
    and trailing ``-`` are dropped; case is kept (Airflow's random run-id suffixes are mixed case). Run ids
    Airflow generates stay distinct (a timestamp, plus a random suffix when there is no logical date); two
    hand-written run ids that differ only in punctuation map to the same slug. A run id with no letter or digit
    at all becomes ``run-`` and 12 hex digits of its SHA-256.

    :param run_id: the DAG run's id (``{{ run_id }}``); anything else is converted with ``str()``.
    """
    text = str(run_id)
    slug = _UNSAFE.sub("-", text).strip("-")
    if not slug.strip("_"):
        return f"run-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return slug
