"""The documentation site (mkdocs.yml, docs/) cannot drift from the code it documents.

* the troubleshooting page has a section for every public exception class, stating the retry rule that
  ``retry_policy`` really applies to it;
* every ``{{ example(...) }}`` directive in the pages names an existing ``# [START x]``/``# [END x]`` section of
  an example DAG, and every how-to section of the examples is shown somewhere;
* the build hook (docs/hooks.py) turns a missing marker into a failed ``mkdocs build`` and a present one into
  the example's code on the page (a real build of a throwaway site).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev import exceptions

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
TROUBLESHOOTING = DOCS / "troubleshooting.md"

#: how the troubleshooting page words each retry policy (``**Retried:** ...`` in every section)
RETRY_WORDING = {
    "hook": "**Retried:** in the hook, then by the task's retries",
    "task": "**Retried:** by the task's retries only",
    "never": "**Retried:** never (fails at once)",
}


@pytest.fixture(scope="module")
def docs_hooks() -> ModuleType:
    """docs/hooks.py, the build hook (it imports mkdocs: the docs toolchain is in the dev environment that
    ``make test`` uses, not in the floor venv of ``make test-floor``, where these tests are skipped)."""
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("brev_docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exception_classes() -> list[type[BaseException]]:
    return [
        obj
        for name in exceptions.__all__
        if inspect.isclass(obj := getattr(exceptions, name)) and issubclass(obj, BaseException)
    ]


def _section(text: str, name: str) -> str:
    """The troubleshooting section headed ``## `name` `` or ``### `name` `` (up to the next heading)."""
    match = re.search(rf"^#{{2,3}} `{name}`\n(?P<body>.*?)(?=^#{{1,3}} |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match is not None, f"no section for {name} in {TROUBLESHOOTING.relative_to(ROOT)}"
    return match["body"]


def _pages() -> list[Path]:
    return [p for p in sorted(DOCS.rglob("*.md")) if p.name != "NOTES.md"]


def test_every_public_exception_class_has_a_troubleshooting_section():
    classes = _exception_classes()
    text = TROUBLESHOOTING.read_text()

    assert len(classes) >= 27
    missing = [cls.__name__ for cls in classes if not re.search(rf"^#{{2,3}} `{cls.__name__}`$", text, re.MULTILINE)]
    assert missing == []


@pytest.mark.parametrize("cls", _exception_classes(), ids=lambda cls: cls.__name__)
def test_each_troubleshooting_section_states_the_retry_rule_of_its_class(cls):
    policy = exceptions.retry_policy(cls.__new__(cls))  # the rule looks at the type alone
    section = _section(TROUBLESHOOTING.read_text(), cls.__name__)

    assert RETRY_WORDING[policy] in section
    assert [w for p, w in RETRY_WORDING.items() if p != policy and w in section] == []


def test_every_example_directive_in_the_docs_names_an_existing_marker(docs_hooks):
    used = [(page, path, name) for page in _pages() for path, name in docs_hooks.directives(page.read_text())]

    assert len(used) >= 5
    for page, path, name in used:
        code = docs_hooks.extract_section(ROOT, path, name)
        assert code.strip(), f"{page.relative_to(ROOT)}: {path}:{name} is empty"


def test_every_howto_section_of_the_examples_is_shown_in_the_docs(docs_hooks):
    markers = {
        name
        for example in sorted((ROOT / "dags_examples").glob("*.py"))
        for name in re.findall(r"^\s*# \[START (howto_\w+)\]$", example.read_text(), re.MULTILINE)
    }
    shown = {name for page in _pages() for _, name in docs_hooks.directives(page.read_text())}

    assert "howto_brev_lifecycle" in markers
    assert sorted(markers - shown) == []


def _throwaway_site(tmp_path: Path, marker: str) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict --quiet`` of a one-page site using docs/hooks.py, including ``marker``."""
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "example.py").write_text(
        "with dag:\n    # [START howto_present]\n    answer = 42\n    # [END howto_present]\n"
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(f'# Example\n\n{{{{ example("dags/example.py", "{marker}") }}}}\n')
    (tmp_path / "mkdocs.yml").write_text(
        f"site_name: t\ntheme: mkdocs\nhooks:\n  - {DOCS / 'hooks.py'}\n"
        "markdown_extensions:\n  - pymdownx.superfences\n  - pymdownx.highlight\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_build_hook_puts_the_marked_example_code_on_the_page(docs_hooks, tmp_path):
    result = _throwaway_site(tmp_path, "howto_present")

    assert result.returncode == 0, result.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert "answer" in html and "42" in html
    assert "{{ example" not in html


def test_a_missing_marker_fails_the_docs_build(docs_hooks, tmp_path):
    result = _throwaway_site(tmp_path, "howto_missing")

    assert "expected exactly one '# [START howto_missing]' and one '# [END howto_missing]' marker" in result.stderr
    assert result.returncode != 0
    assert not (tmp_path / "site" / "index.html").exists()


# --- the API reference (docs/reference/, rendered by mkdocstrings from the docstrings) -----------------------------
def _reference_objects():
    """Every object a reference page renders (``::: path``), loaded by griffe as mkdocstrings loads it, with the
    functions it shows (a class: its public methods and ``__init__``, merged into the class)."""
    griffe = pytest.importorskip("griffe")
    package = griffe.load("airflow_provider_brev", search_paths=[str(ROOT)], resolve_aliases=True)
    for page in sorted((DOCS / "reference").glob("*.md")):
        for path in re.findall(r"^::: (\S+)", page.read_text(), re.MULTILINE):
            obj = package[path.removeprefix("airflow_provider_brev.")]
            shown = [obj]
            if obj.is_class:
                shown += [m for name, m in obj.all_members.items() if not name.startswith("_") or name == "__init__"]
            yield page.name, package, obj, shown


def test_every_constant_a_reference_signature_names_is_documented_with_its_value():
    """A signature such as ``ready_timeout: float = DEFAULT_READY_TIMEOUT`` shows the name, not the value: every
    such name must be rendered on docs/reference/defaults.md (its signature link lands there, showing the value)."""
    documented = set(re.findall(r"^::: (\S+)", (DOCS / "reference" / "defaults.md").read_text(), re.MULTILINE))
    missing = {}
    for page, package, _obj, shown in _reference_objects():
        for member in shown:
            if not getattr(member, "is_function", False) and not member.is_class:
                continue
            parameters = member.parameters if member.is_function else []
            for parameter in parameters:
                name = str(parameter.default)
                if re.fullmatch(r"[A-Z][A-Z0-9_]+", name):
                    target = package[f"{member.module.path}.{name}".removeprefix("airflow_provider_brev.")]
                    chain = [target.path]  # the name where the signature uses it, then each module it comes from
                    while target.is_alias:
                        target = target.target
                        chain.append(target.path)
                    if not documented & set(chain):
                        missing[chain[-1]] = page
    assert missing == {}, f"add these to docs/reference/defaults.md: {missing}"


def test_no_reference_docstring_uses_rst_literal_blocks():
    """``text::`` + an indented block is reStructuredText; the reference is Markdown, which prints the ``::``
    (a stray "work::") and may not show the block as code. Use a fenced code block."""
    offenders = []
    for page, _package, _obj, shown in _reference_objects():
        for member in shown:
            docstring = member.docstring.value if member.docstring else ""
            offenders += [(page, member.path, line) for line in docstring.splitlines() if line.rstrip().endswith("::")]
    assert offenders == []
