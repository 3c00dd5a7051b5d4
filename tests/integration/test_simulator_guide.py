"""docs/simulator.md's pytest examples pass as written: every titled ``python`` code block of the page is written,
verbatim, to the path its title names in a fresh project directory (plus what the page says to copy from the
repository), and a pytest of its own runs there with the installed provider and its opt-in plugin."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "simulator.md"
#: what the page tells users to copy from the repository into their project
COPIED = {"dags/example_brev_lifecycle.py": ROOT / "dags_examples" / "example_brev_lifecycle.py"}
#: a fenced block: its info string (language and attributes) and its body
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'\btitle="([^"]+)"')
#: this suite's own settings, which a user's project does not have
FOREIGN_ENV = ("AIRFLOW", "BREV_", "FAKE_BREV", "AWS_", "PYTEST_", "COV_CORE_", "COVERAGE_")


def python_blocks(markdown: str) -> list[tuple[str | None, str]]:
    """``(title or None, code)`` of every ``python`` code block, in page order."""
    blocks = []
    for info, body in FENCE.findall(markdown):
        words = info.split()
        if words and words[0] == "python":
            title = TITLE.search(info)
            blocks.append((title.group(1) if title else None, body))
    return blocks


def test_the_guide_parser_reads_titles_and_verbatim_bodies():
    page = 'x\n```python title="a/b.py"\nprint(1)\n\n  y = 2\n```\n```bash\nls\n```\n```python\nz = 3\n```\n'
    assert python_blocks(page) == [("a/b.py", "print(1)\n\n  y = 2\n"), (None, "z = 3\n")]


def user_environment() -> dict[str, str]:
    """This process's environment without this suite's Airflow, simulator, AWS and pytest settings."""
    return {key: value for key, value in os.environ.items() if not key.startswith(FOREIGN_ENV)}


@pytest.mark.timeout(900)
def test_every_python_example_of_the_simulator_guide_passes_in_a_project_of_its_own(tmp_path):
    blocks = python_blocks(GUIDE.read_text(encoding="utf-8"))
    files = {title: code for title, code in blocks if title}
    assert {"tests/conftest.py", "tests/test_my_dags.py", "dags/count_lines.py", "tests/test_count_lines.py"} <= set(
        files
    )
    conftest = files["tests/conftest.py"]
    untitled = [code for title, code in blocks if not title]
    assert all(code in conftest for code in untitled), untitled  # snippets only repeat what the conftest has
    project = tmp_path / "project"
    for title, code in files.items():
        path = project / title
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
    for title, source in COPIED.items():
        assert f"`{title}` copied from the repository" in GUIDE.read_text(encoding="utf-8")
        shutil.copy(source, project / title)
    expected = sum(code.count("\ndef test_") for code in files.values())
    assert expected >= 4

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "tests"],
        cwd=project,
        env=user_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert re.search(rf"\b{expected} passed\b", output), output[-3000:]
    assert not re.search(r"\b(failed|error|skipped)\b", output.splitlines()[-1]), output[-3000:]
