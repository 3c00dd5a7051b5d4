"""``make demo`` (scripts/demo.py) runs the flagship end to end and prints no warning a user can do nothing
about: its Airflow has a Fernet key, and the in-process execution API's Starlette test-client notice is filtered.
What it prints is the README's sample output, but for what changes from run to run (times, ids, ports, dollars).

It runs in a subprocess as ``make demo`` does, with ``httpx2`` made unimportable: that is what a user's
environment without it looks like (Starlette then warns that ``httpx`` is deprecated).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_HTTPX2 = (
    "import runpy, sys; sys.modules['httpx2'] = None; sys.argv = ['scripts/demo.py'];"
    " runpy.run_path('scripts/demo.py', run_name='__main__')"
)
#: What the README says before its sample of the demo's output (a fenced block follows).
README_INTRO = "`make demo` prints:\n\n```\n"
#: What differs between two runs of the demo, and what stands for it when the outputs are compared.
VOLATILE = (
    (re.compile(r"http://127\.0\.0\.1:\d+"), "http://127.0.0.1:<port>"),
    (re.compile(r"manual__[0-9T:.+-]+_[A-Za-z0-9]{8}"), "<run id>"),
    (re.compile(r"afbrev-[a-z0-9-]+-x\d{12}"), "<instance>"),
    (re.compile(r"\$\d+\.\d+"), "$<dollars>"),
    (re.compile(r"(?<!\S)\d+\.\d+(?!\S)"), "<number>"),  # durations and the cost table's cells
    (re.compile(r"invocations: \d+"), "invocations: <count>"),
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "BREV_", "AWS_", "FAKE_BREV"))}
    env["TMPDIR"] = str(tmp_path_factory.mktemp("demo"))
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_HTTPX2],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_demo_runs_without_noise(demo):
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output[-4000:]
    assert "DAG tao_visual_changenet_retrain: success" in output, output[-4000:]
    assert "Instances left: 0" in output
    assert "empty cryptography key" not in output
    assert "starlette.testclient" not in output
    assert "[warning" not in output and "Warning:" not in output, output[-4000:]


def stable(output: str) -> list[str]:
    """The lines of a demo output without what changes from run to run: :data:`VOLATILE` replaced, column padding
    collapsed, and the task lines of the run in name order (tasks that may run in either order, such as ``promote``
    and ``delete_instance``, are listed by start time)."""
    lines = [" ".join(line.split()) for line in output.strip("\n").splitlines()]
    for pattern, stands_for in VOLATILE:
        lines = [pattern.sub(stands_for, line) for line in lines]
    start = next(i for i, line in enumerate(lines) if line.startswith("DAG ")) + 1
    end = lines.index("", start)
    return [*lines[:start], *sorted(lines[start:end]), *lines[end:]]


def readme_sample() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index(README_INTRO) + len(README_INTRO)
    return readme[start : readme.index("```\n", start)]


def test_the_readmes_sample_output_is_what_the_demo_prints(demo):
    from airflow import __version__ as airflow_version

    if tuple(int(part) for part in airflow_version.split(".")[:2]) < (3, 1):  # the floor venv (make test-floor)
        pytest.skip(
            "the README shows what `make demo` prints in the dev environment; Airflow 3.0's dag.test() also "
            "prints its own debug lines"
        )
    assert demo.returncode == 0, (demo.stdout + demo.stderr)[-4000:]
    printed = stable(demo.stdout)
    assert stable(readme_sample()) == printed, (
        "README.md's sample of `make demo` drifted from what it prints; the demo printed:\n" + demo.stdout
    )


def test_stable_lines_keep_what_must_not_drift():
    """The comparison is not vacuous: it keeps the task names and states, object counts, KPIs and the verdict."""
    sample = stable(readme_sample())
    assert any(line.startswith("gap_analysis -> s3://tao-vcn-demo/runs/<run id>/gap_analysis/ (") for line in sample)
    assert any(line.startswith("KPIs (evaluate): {'test_acc': 0.") for line in sample)
    assert "train success <number> s" in sample and "Instances left: 0" in sample
    assert stable("DAG x\n  b 1.0 s\n  a 2.0 s\n\nrest 3") == ["DAG x", "a <number> s", "b <number> s", "", "rest 3"]
