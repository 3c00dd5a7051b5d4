"""The README's lifecycle DAG is the example the suite runs (as a manual run, no logical date): they cannot drift."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_lifecycle_snippet_is_the_tested_example():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## A minimal DAG: the lifecycle pattern\n\n```python\n") + len(
        "## A minimal DAG: the lifecycle pattern\n\n```python\n"
    )
    snippet = readme[start : readme.index("```\n", start)]
    example = (ROOT / "dags_examples" / "example_brev_lifecycle.py").read_text()
    head = example[example.index("from datetime import datetime") : example.index("    # [START howto_brev_lifecycle]")]
    body = example[
        example.index("    # [START howto_brev_lifecycle]\n")
        + len("    # [START howto_brev_lifecycle]\n") : example.index("    # [END howto_brev_lifecycle]")
    ]
    assert snippet == head + body
