"""``run_cost``'s public home for DAG files (``from airflow_provider_brev.utils.cost import run_cost``); it lives in
:mod:`airflow_provider_brev.cost.report`."""

from __future__ import annotations

from airflow_provider_brev.cost.report import run_cost

__all__ = ["run_cost"]
