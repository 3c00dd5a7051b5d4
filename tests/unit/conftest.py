"""Fixtures of the unit tests of several packages: a fake instance that runs the remote scripts in a real bash, a
fake ``ssh-agent``."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.core.staging.scripts import PART_SUFFIX, TransferTask, build_plan, plan_path

if TYPE_CHECKING:
    from pathlib import Path

RECORDING_CURL = """#!/bin/bash
printf '%s\\n' "$*" >> {log}
{pre}
exec /usr/bin/curl "$@"
"""


@pytest.fixture
def instance(tmp_path):
    """A fake instance: HOME, a PATH whose ``curl`` records its argv, and a runner for scripts."""
    home = tmp_path / "home"
    home.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "curl-argv.log"
    log.touch()

    class Instance:
        def __init__(self) -> None:
            self.home, self.bindir, self.curl_log = home, bindir, log
            self.set_curl()

        def set_curl(self, pre: str = "") -> None:
            path = bindir / "curl"
            path.write_text(RECORDING_CURL.format(log=log, pre=pre))
            path.chmod(0o755)

        def env(self) -> dict[str, str]:
            return {"HOME": str(home), "PATH": f"{bindir}:/usr/bin:/bin", "LANG": "C.UTF-8"}

        def run(self, script: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                ["bash", "-c", script],
                env=self.env(),
                cwd=home,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert done.stderr == ""  # the scripts send nothing to stderr (curl messages may quote URLs)
            return done

        def ship(self, xfer_id: str, tasks: list[TransferTask]) -> None:
            path = home / plan_path(xfer_id)
            path.write_text(build_plan(tasks))
            path.chmod(0o600)

        def leftovers(self) -> list[str]:
            return sorted(
                str(p.relative_to(home))
                for p in home.rglob("*")
                if p.name.startswith(".airflow-brev-xfer-") or PART_SUFFIX in p.name or p.parent.name == "xfer"
            )

    return Instance()


@pytest.fixture
def fake_agent(tmp_path: Path) -> str:
    """An executable named ``ssh-agent`` (``sleep`` under that name): the agent ``core/protocol/environment.py``
    recognises and ``hooks/process.py`` stops."""
    link = tmp_path / "ssh-agent"
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    return str(link)
