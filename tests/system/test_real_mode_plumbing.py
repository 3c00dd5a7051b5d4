"""The real-mode code path of the system tests, proven with the simulator standing in for real Brev.

No real token exists in CI, so these run the path ``BREV_SYSTEM_TEST=real`` takes (credentials from the
environment, the ``brev`` on PATH, the cost line, the cleanup) against the simulator's ``brev`` and a token it
accepts, or in a child pytest in real mode. Skipped in real mode itself, which must not touch the simulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_calls, task_states

from airflow_provider_brev.core.protocol.names import parse_managed_name
from system.system_support import REAL, SystemInstance, provision, real_target

pytestmark = pytest.mark.skipif(REAL, reason="simulator stand-in for real mode: not run with BREV_SYSTEM_TEST=real")

ROOT = Path(__file__).resolve().parents[2]
CREDENTIALS = (
    "BREV_API_TOKEN",
    "AIRFLOW_CONN_BREV_DEFAULT",
    "FAKE_BREV_STATE",
    "BREV_SYSTEM_GPU",
    "BREV_SYSTEM_MAX_PRICE",
)


def test_cost_is_printed_before_create_and_a_forced_failure_still_deletes(
    brev_sim, monkeypatch, announce, run_system_dag
):
    # Real mode's credentials: BREV_API_TOKEN only (no brev_default connection); `brev` on PATH is the simulator.
    monkeypatch.delenv("AIRFLOW_CONN_BREV_DEFAULT", raising=False)
    monkeypatch.setenv("BREV_API_TOKEN", brev_sim.make_token(7200))
    target = real_target(os.environ)
    assert (target.label, target.connection) == ("real Brev", None)
    printed: list[tuple[str, int]] = []

    def record(line: str) -> None:
        printed.append((line, len(cli_calls(brev_sim, "create"))))  # creates issued when the line was printed
        announce(line)

    created: list[SystemInstance] = []

    def run_then_interrupt() -> None:
        with provision(target, "plumbing", announce=record) as instance:
            created.append(instance)
            # The DAG's teardown is marked success without running: the instance outlives the run...
            dag_run = run_system_dag(
                "brev_system_lifecycle", conf=instance.conf, mark_success_pattern="delete_instance"
            )
            assert task_states(dag_run)["gpu_name"] == "success", task_states(dag_run)
            assert brev_sim.instance(instance.name)["status"] == "RUNNING"
            raise KeyboardInterrupt  # ...and the test is interrupted (Ctrl-C) while it runs.

    with pytest.raises(KeyboardInterrupt):
        run_then_interrupt()
    (instance,) = created
    cost_line, creates_before = printed[0]
    assert creates_before == 0
    assert "creating 1 x g4dn.xlarge (1x T4) at $0.63/h for about 15 min: estimated cost $0.16" in cost_line
    (create,) = cli_calls(brev_sim, "create")
    assert instance.name in create["argv"]
    managed = parse_managed_name(instance.name)  # what the janitor sweeps once it has expired
    assert managed is not None
    assert (managed.prefix, managed.slug) == ("afbrev", "brev-system-plumbing")
    assert instance.cleanup.outcome == "deleted"
    assert [call["argv"] for call in cli_calls(brev_sim, "delete")] == [["delete", instance.name]]
    assert brev_sim.instance(instance.name) is None
    assert printed[1][0].startswith(f"[brev system test] deleting leftover instance {instance.name} (RUNNING)")


def run_real_mode(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``make system-test`` in a child pytest, with no credentials but those in ``env``."""
    child_env = {k: v for k, v in os.environ.items() if k not in CREDENTIALS}
    child_env.update(BREV_SYSTEM_TEST="real", **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/system/test_system_dags.py", "-rs", "--setup-show", *args],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_real_mode_without_credentials_skips_loudly():
    result = run_real_mode()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 skipped" in result.stdout
    assert "REAL BREV SYSTEM TESTS NOT RUN: BREV_SYSTEM_TEST=real but neither BREV_API_TOKEN nor" in result.stdout
    assert "brev_sim" not in result.stdout  # the simulator fixture was never set up


def test_real_mode_searches_with_the_brev_on_path_never_the_simulator(tmp_path):
    calls = tmp_path / "calls.jsonl"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "brev"  # stands in for the real CLI: records its argv, offers no instance type
    stub.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "print('Current Version: v0.6.327' if sys.argv[1:2] == ['--version'] else '[]')\n"
    )
    stub.chmod(0o755)
    result = run_real_mode(
        tmp_path,
        "-k",
        "lifecycle",
        BREV_API_TOKEN="not-a-real-token",
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
    assert "REAL BREV SYSTEM TESTS NOT RUN: `brev search` lists no 1-GPU instance type" in result.stdout
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert ["search", "--json"] in argvs
    assert not any(argv[:1] == ["create"] for argv in argvs)
    assert "brev_sim" not in result.stdout
