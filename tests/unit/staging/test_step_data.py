"""What a step's syncs did, in the task memory (airflow_provider_brev/staging/step_data.py ``SyncReports``), told and
read by a real task (tests/integration/dags/task_memory_cases.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers import succeeded, xcom_of

from airflow_provider_brev.exceptions import BrevInvalidInputError
from airflow_provider_brev.staging.step_data import sync_seconds


def test_the_sync_reports_are_told_as_given_and_read_back_in_their_shape(run_dag):
    dag_run = succeeded(run_dag("memory_sync_reports"))
    found = xcom_of(dag_run, "step")
    assert found["empty"] == {"inputs": [], "outputs": [], "output_syncs": 0}
    assert found["read"] == {"inputs": [{"files": 2}], "outputs": [], "output_syncs": 1}
    told = {"inputs": [{"files": 2}], "output_syncs": 1, "unknown": "dropped on read"}
    assert xcom_of(dag_run, "step", "brev_step_data") == told


@pytest.mark.parametrize(("value", "seconds"), [(300, 300.0), (0.5, 0.5), (timedelta(minutes=2), 120.0)])
def test_sync_interval(value, seconds):
    assert sync_seconds(value) == seconds


@pytest.mark.parametrize("value", [0, -5, timedelta(0), "soon", None])
def test_bad_sync_intervals_are_refused(value):
    with pytest.raises(BrevInvalidInputError, match="output_sync_interval"):
        sync_seconds(value)
