"""The README's lifecycle DAG is the example the suite runs (as a manual run, no logical date): they cannot drift.
And what the README tells a newcomer to type exists: the two set-up commands, the make targets, the install steps."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def lifecycle_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## A minimal DAG: the lifecycle pattern\n\n```python\n") + len(
        "## A minimal DAG: the lifecycle pattern\n\n```python\n"
    )
    return readme[start : readme.index("```\n", start)]


def dag_id_of(source: str) -> str:
    [dag_id] = re.findall(r'^    dag_id="([^"]+)",$', source, flags=re.MULTILINE)
    return dag_id


def test_readme_lifecycle_snippet_is_the_tested_example_under_its_own_dag_id():
    """The snippet is the example the suite runs, but for its ``dag_id``: copied into a dags folder beside the
    examples, it must not replace ``example_brev_lifecycle`` (nor any other example)."""
    snippet = lifecycle_snippet()
    example = (ROOT / "dags_examples" / "example_brev_lifecycle.py").read_text()
    head = example[example.index("from datetime import datetime") : example.index("    # [START howto_brev_lifecycle]")]
    body = example[
        example.index("    # [START howto_brev_lifecycle]\n")
        + len("    # [START howto_brev_lifecycle]\n") : example.index("    # [END howto_brev_lifecycle]")
    ]
    own, theirs = dag_id_of(snippet), dag_id_of(example)
    assert snippet.replace(f'dag_id="{own}"', f'dag_id="{theirs}"') == head + body
    examples = {dag_id_of(path.read_text()) for path in (ROOT / "dags_examples").glob("*.py")}
    assert own not in examples, own


def section(readme: str, heading: str) -> str:
    start = readme.index(f"\n## {heading}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end != -1 else len(readme)]


def test_quick_start_has_exactly_two_set_up_commands_and_names_make_airflow_to_look_around():
    quick = section((ROOT / "README.md").read_text(), "Quick start (two commands)")
    block = quick[quick.index("```bash\n") + len("```bash\n") : quick.index("```\n", quick.index("```bash\n"))]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    assert commands == ["make demo", "make test"]
    assert "**To look around, `make airflow`**: a local Airflow UI at http://127.0.0.1:8080" in quick


def test_every_make_target_the_readme_names_exists():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    named = set(re.findall(r"`(?:PORT=\d+ )?make ([a-z][a-z-]*)", readme))
    assert {"demo", "test", "airflow", "docs", "system-test"} <= named
    defined = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.MULTILINE))
    assert sorted(named - defined) == []


def test_install_section_installs_from_a_checkout_or_a_built_wheel():
    install = section((ROOT / "README.md").read_text(), "Install")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wheel_prefix = project["name"].replace("-", "_")
    assert "pip install .  " in install
    assert f"pip install dist/{wheel_prefix}-*.whl" in install
    assert "Once it is published, `pip install airflow-provider-brev` will do the same." in install


def test_benchmark_rows_are_those_of_the_latest_results():
    """The README's headline benchmark rows are lines of benchmarks/results.md, which `make bench` rewrites."""
    rows = [line for line in section((ROOT / "README.md").read_text(), "Benchmarks").splitlines() if line[:2] == "| "]
    results = set((ROOT / "benchmarks" / "results.md").read_text().splitlines())
    measured = rows[2:]  # below the header and its rule
    assert len(measured) >= 10
    assert [row for row in measured if row not in results] == []
