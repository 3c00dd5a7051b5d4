"""docs/simulator.md's by-hand set-up, run as written: the set-up block of "By hand, in any Airflow" runs in bash with
the test's own PATH (where ``python`` has the provider) and a HOME of its own, and an instance becomes ready there
within twice the time it takes with the pytest fixture, measured in the same test on the same simulated timings.
The only change to the block: the root ``/srv/brev-sim`` becomes a temporary directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook
from airflow_provider_brev.testing.simulator import BrevSimulator

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"
DOC_ROOT = "/srv/brev-sim"
#: the same simulated boot for both set-ups, long enough that the boot, not process start-up, is what is measured
TIMINGS = {"deploy": 1.0, "build": 0.5, "ssh": 1.0}


def by_hand_blocks(markdown: str) -> list[str]:
    """The ``bash`` blocks of the section "By hand, in any Airflow" before its interactive-shell paragraph."""
    section = markdown.split("### By hand, in any Airflow", 1)[1].split("\n#", 1)[0]
    setup = section.split("For a shell in which", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", setup, re.MULTILINE | re.DOTALL)


def test_the_by_hand_section_has_one_runnable_set_up_block():
    (block,) = by_hand_blocks(GUIDE.read_text(encoding="utf-8"))
    assert "install --root /srv/brev-sim" in block and "AIRFLOW_CONN_BREV_DEFAULT" in block
    assert "PATH" not in block and "HOME" not in block  # PATH and HOME stay as they are


def time_to_ready(name: str) -> float:
    """Seconds from ``brev create`` to ready, as an ephemeral step waits for it in a fresh worker process (its
    first readiness check: nothing learned earlier in the process)."""
    _reset_process_caches()
    hook = BrevHook(log_cli_output=False)
    started = time.monotonic()
    hook.create_instance(name, gpu="L40S:1")
    hook.wait_until_ready(name, timeout=120, poll_interval=0.2)
    took = time.monotonic() - started
    hook.delete_instance(name)
    return took


def test_an_instance_set_up_by_hand_is_ready_within_twice_the_fixtures_time(brev_sim, tmp_path, monkeypatch):
    fixture_env = {key: os.environ[key] for key in ("PATH", "HOME", "FAKE_BREV_STATE")}
    user_path = os.pathsep.join(p for p in fixture_env["PATH"].split(os.pathsep) if p != str(brev_sim.bin_dir))
    user_path = f"{Path(sys.executable).parent}{os.pathsep}{user_path}"  # the `python` that has the provider
    root = tmp_path / "srv-brev-sim"
    (block,) = by_hand_blocks(GUIDE.read_text(encoding="utf-8"))
    env = {k: v for k, v in os.environ.items() if k not in ("FAKE_BREV_STATE", "AIRFLOW_CONN_BREV_DEFAULT")}
    env.update(PATH=user_path, HOME=str(tmp_path / "user-home"))
    script = "set -eu\n" + block.replace(DOC_ROOT, str(root)) + 'printf "%s" "$AIRFLOW_CONN_BREV_DEFAULT"\n'
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False, timeout=120)
    assert ran.returncode == 0, ran.stderr
    by_hand_conn = ran.stdout
    assert json.loads(by_hand_conn)["extra"]["cli_path"] == f"{root}/bin/brev"
    by_hand = BrevSimulator(root)
    for sim in (by_hand, brev_sim):
        sim.set_timings(**TIMINGS)
    brev_sim.login()

    def as_fixture() -> None:
        for key, value in fixture_env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())

    def as_by_hand() -> None:
        monkeypatch.setenv("PATH", user_path)
        monkeypatch.setenv("HOME", env["HOME"])
        monkeypatch.delenv("FAKE_BREV_STATE")
        monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", by_hand_conn)

    times: dict[str, list[float]] = {"fixture": [], "by hand": []}
    try:
        for attempt in range(2):  # alternated, the best of two: a busy machine slows both alike
            as_fixture()
            times["fixture"].append(time_to_ready(f"fx-{attempt}"))
            as_by_hand()
            times["by hand"].append(time_to_ready(f"bh-{attempt}"))
    finally:
        as_fixture()
        by_hand.kill_all()
        _reset_process_caches()
    ratio = min(times["by hand"]) / min(times["fixture"])
    assert ratio <= 2.0, times
    # by hand, the machine's own ssh went through the entries' proxy (no 10.x address was dialled), and the
    # readiness probe that passed ran through brev exec
    assert by_hand.ssh_calls() and all(c.get("via") == "proxy" for c in by_hand.ssh_calls())
    assert any(r["command"].startswith("echo brev-ready-") for r in by_hand.runs())


@pytest.fixture(autouse=True)
def _no_leftover_connection(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_BREV_DEFAULT", raising=False)
