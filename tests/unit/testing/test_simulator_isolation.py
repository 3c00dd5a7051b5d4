"""The simulator stays out of the real user's files and out of pytest runs that did not ask for it.

* The pytest plugin is opt-in: no ``pytest11`` entry point of this distribution.
* The simulator's command line and the connection it hands out point the CLI at the simulator's own home:
  with ``HOME`` set to an empty directory, installing, minting a token, and logging in + listing through
  :class:`~airflow_provider_brev.hooks.brev.BrevHook` leave that directory empty.
* A session whose stored access token is not a JWT prints ``no oauth found for token`` on stdout on every
  invocation, in both profiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from airflow_provider_brev.testing import BrevSimulator


def test_no_pytest11_entry_point_of_this_provider() -> None:
    values = [ep.value for ep in entry_points(group="pytest11")]
    assert not [v for v in values if v.startswith("airflow_provider_brev")]


def _simulator_cli(*args: str, env: dict[str, str]) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "airflow_provider_brev.testing.simulator", *args],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )
    return res.stdout


def test_simulator_never_touches_the_real_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.testing import BrevSimulator

    fake_home = tmp_path / "real-home"
    fake_home.mkdir()
    root = tmp_path / "sim"
    monkeypatch.setenv("HOME", str(fake_home))
    env = {**os.environ, "HOME": str(fake_home)}
    exports = _simulator_cli("install", "--root", str(root), env=env)
    assert f"export HOME={root / 'home'}\n" in exports
    token = _simulator_cli("token", "--root", str(root), env=env).strip()
    assert token.count(".") == 2
    sim = BrevSimulator(root)
    conn = json.loads(sim.connection_json(token))
    assert conn["extra"]["brev_home"] == str(root / "home")
    sim.create_instance_directly("box")
    monkeypatch.setenv("AIRFLOW_CONN_BREV_ISOLATED", sim.connection_json(token))
    hook = BrevHook(brev_conn_id="brev_isolated", retry_delay=0.05)
    assert [i.name for i in hook.list_instances()] == ["box"]
    assert sim.calls("login"), "the hook logged in through the simulator"
    homes = {c["home"] for c in sim.calls()}  # the login ran in a scratch HOME inside ~/.brev
    assert str(root / "home") in homes and all(Path(home).is_relative_to(root / "home") for home in homes), homes
    assert (root / "home" / ".brev" / "credentials.json").exists()
    assert list(fake_home.iterdir()) == []


def test_non_jwt_session_prints_no_oauth_breadcrumb(brev_sim_both: BrevSimulator) -> None:
    brev_sim_both.login(token="opaque-session-token")
    for argv in (["ls"], ["ls", "--json"], ["search", "--json"]):
        res = subprocess.run(
            [str(brev_sim_both.brev_path), *argv],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        assert res.stdout.startswith("no oauth found for token\n"), (argv, res.stdout)
