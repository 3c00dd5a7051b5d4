"""Fixtures of the chaos suite (helpers live in chaos_helpers.py)."""

from __future__ import annotations

import os

import pytest

from airflow_provider_brev.hooks.base import _reset_process_caches


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Each case starts with no remembered login or CLI capabilities, so login counts are its own."""
    _reset_process_caches()
    yield
    _reset_process_caches()


@pytest.fixture
def secret() -> str:
    """A ``secret_env`` value that must never leave the job's environment."""
    return "chaos-secret-" + os.urandom(8).hex()


@pytest.fixture
def hook(brev_sim, monkeypatch):
    """A hook on the simulator (the triggers build their own from the same ``brev_default`` connection)."""
    from airflow_provider_brev.hooks.brev import BrevHook

    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    return BrevHook(retry_delay=0.05)
