"""``make demo`` (scripts/demo.py) runs the flagship end to end and prints no warning a user can do nothing
about: its Airflow has a Fernet key, and the in-process execution API's Starlette test-client notice is filtered.

It runs in a subprocess as ``make demo`` does, with ``httpx2`` made unimportable: that is what a user's
environment without it looks like (Starlette then warns that ``httpx`` is deprecated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_HTTPX2 = (
    "import runpy, sys; sys.modules['httpx2'] = None; sys.argv = ['scripts/demo.py'];"
    " runpy.run_path('scripts/demo.py', run_name='__main__')"
)


def test_demo_runs_without_noise(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "BREV_", "AWS_", "FAKE_BREV"))}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_HTTPX2],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "DAG tao_visual_changenet_retrain: success" in output, output[-4000:]
    assert "Instances left: 0" in output
    assert "empty cryptography key" not in output
    assert "starlette.testclient" not in output
    assert "[warning" not in output and "Warning:" not in output, output[-4000:]
