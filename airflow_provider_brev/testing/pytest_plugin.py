"""pytest fixtures for the Brev simulator. Opt-in (the provider registers no ``pytest11`` entry point): add
``pytest_plugins = ["airflow_provider_brev.testing.pytest_plugin"]`` to a ``conftest.py``, or run
``pytest -p airflow_provider_brev.testing.pytest_plugin``. Only pytest is imported at module level; the
simulator itself is imported inside the fixtures.

Fixtures:

* ``brev_sim_profile`` -- ``"released"`` by default; override with
  ``@pytest.mark.parametrize("brev_sim_profile", ["documented"])``.
* ``brev_sim`` -- a fresh, installed :class:`~airflow_provider_brev.testing.simulator.BrevSimulator`
  under ``tmp_path``; ``PATH``/``FAKE_BREV_STATE`` point at it and ``HOME`` is a fresh
  ``tmp_path / "worker-home"`` (exposed as ``brev_sim.home``). Sandbox processes are killed on teardown.
* ``brev_sim_both`` -- the same, parametrized over both profiles (ids ``released`` and ``documented``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from airflow_provider_brev.testing.simulator import BrevSimulator

BREV_SIM_PROFILES = ("released", "documented")


def _start_simulator(base: Path, monkeypatch: pytest.MonkeyPatch, profile: str) -> BrevSimulator:
    from airflow_provider_brev.testing.simulator import BrevSimulator

    sim = BrevSimulator(base / "brev-sim", profile=profile).install()
    for key, value in sim.env().items():
        monkeypatch.setenv(key, value)
    home = base / "worker-home"
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    sim.home = home
    return sim


@pytest.fixture
def brev_sim_profile() -> str:
    """The simulator profile used by ``brev_sim`` (``released`` = brev-cli v0.6.327)."""
    return "released"


@pytest.fixture
def brev_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, brev_sim_profile: str) -> Iterator[BrevSimulator]:
    """A fresh Brev simulator with ``brev`` on PATH and an isolated ``HOME``."""
    sim = _start_simulator(tmp_path, monkeypatch, brev_sim_profile)
    try:
        yield sim
    finally:
        sim.kill_all()


@pytest.fixture(params=BREV_SIM_PROFILES, ids=list(BREV_SIM_PROFILES))
def brev_sim_both(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[BrevSimulator]:
    """Like ``brev_sim``, once per profile (``released`` and ``documented``)."""
    sim = _start_simulator(tmp_path / "both", monkeypatch, request.param)
    try:
        yield sim
    finally:
        sim.kill_all()
