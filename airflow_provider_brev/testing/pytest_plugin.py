"""pytest fixtures for the Brev simulator. Opt-in (the provider registers no ``pytest11`` entry point): add
``pytest_plugins = ["airflow_provider_brev.testing.pytest_plugin"]`` to a ``conftest.py``, or run
``pytest -p airflow_provider_brev.testing.pytest_plugin``. Only pytest is imported at module level; the
simulator itself is imported inside the fixtures.

Fixtures:

* ``brev_sim_profile`` -- ``"released"`` by default; override with
  ``@pytest.mark.parametrize("brev_sim_profile", ["documented"])``.
* ``brev_sim`` -- a fresh, installed :class:`~airflow_provider_brev.testing.simulator.BrevSimulator`
  under ``tmp_path``; ``PATH``/``FAKE_BREV_STATE`` point at it and ``HOME`` is a fresh
  ``tmp_path / "worker-home"`` (exposed as ``brev_sim.home``) and, as on an Airflow worker, ``SSH_AUTH_SOCK`` is
  unset. Sandbox processes and the ``ssh-agent`` processes the CLI left are killed on teardown.
* ``brev_sim_both`` -- the same, parametrized over both profiles (ids ``released`` and ``documented``).
* ``lepton_fake`` -- a fresh fake DGX Cloud Lepton workspace (:mod:`~airflow_provider_brev.testing.fake_lepton`)
  under ``tmp_path``, serving the real ``leptonai`` SDK on 127.0.0.1; ``AIRFLOW_CONN_LEPTON_DEFAULT`` points at it.
  Skipped when the SDK is not installed (``pip install 'airflow-provider-brev[lepton]'``).
* ``brev_s3`` -- a fresh, empty bucket in a real local S3 (a moto server on 127.0.0.1,
  :mod:`~airflow_provider_brev.testing.local_s3`), with ``AIRFLOW_CONN_AWS_DEFAULT`` pointing at it (dummy keys,
  ``endpoint_url``) and the machine's own AWS credentials and profiles out of reach; yields a
  :class:`~airflow_provider_brev.testing.local_s3.LocalS3Bucket` (``bucket``, ``client``, ``put``, ``get``,
  ``keys``, ``uri``). Needs moto's server: the ``testing`` extra (``pip install '.[testing]'`` in a checkout).
* ``brev_s3_server`` -- the moto server ``brev_s3`` uses: one per session, stopped when the session ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from airflow_provider_brev.testing.fake_lepton import FakeLepton
    from airflow_provider_brev.testing.local_s3 import LocalS3Bucket, LocalS3Server
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
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # like an Airflow worker or triggerer: no login session
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


@pytest.fixture
def lepton_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLepton]:
    """A fake Lepton workspace; ``lepton_default`` points at it (skipped without the ``leptonai`` SDK)."""
    pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")
    from airflow_provider_brev.testing.fake_lepton import FakeLepton

    fake = FakeLepton(tmp_path / "lepton").start()
    monkeypatch.setenv("AIRFLOW_CONN_LEPTON_DEFAULT", fake.connection_json())
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture(scope="session")
def brev_s3_server() -> Iterator[LocalS3Server]:
    """A moto S3 server on 127.0.0.1 for the whole session (fails saying what to install without moto)."""
    from airflow_provider_brev.testing.local_s3 import LocalS3Server

    try:
        server = LocalS3Server().start()
    except ImportError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def brev_s3(brev_s3_server: LocalS3Server, monkeypatch: pytest.MonkeyPatch) -> LocalS3Bucket:
    """A fresh bucket in the local S3; ``aws_default`` points at the server."""
    from airflow_provider_brev.testing.local_s3 import isolated_aws_environment

    env, removed = isolated_aws_environment(brev_s3_server.endpoint)
    for name in removed:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return brev_s3_server.new_bucket()
