"""MkDocs hook (``hooks:`` in ``mkdocs.yml``): include the examples' code between Airflow's snippet markers.

The example DAGs in ``dags_examples/`` mark the part a how-to shows with Airflow's own convention,
``# [START howto_x]`` ... ``# [END howto_x]``, which ``pymdownx.snippets`` does not understand. A page writes, on a
line of its own::

    {{ example("dags_examples/example_brev_lifecycle.py", "howto_brev_lifecycle") }}

and the build replaces it with a fenced Python block holding the lines between the two markers (dedented), titled
with the file's path. A missing file, a missing or repeated marker, an empty section, or a line that starts like
a directive but is malformed fails the build (:class:`mkdocs.exceptions.PluginError`), so a renamed marker cannot
leave a page silently empty. ``tests/unit/project/test_docs.py`` checks the same through :func:`directives` and
:func:`extract_section`.
"""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkdocs.exceptions import PluginError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

#: ``{{ example("path", "marker") }}`` alone on its line (leading spaces kept, e.g. inside a list or a tab).
DIRECTIVE = re.compile(
    r'^(?P<indent>[ \t]*)\{\{\s*example\(\s*"(?P<path>[^"]+)"\s*,\s*"(?P<name>[^"]+)"\s*\)\s*\}\}[ \t]*$', re.MULTILINE
)
#: A ``pymdownx.snippets`` include of a whole file, ``--8<-- "path"`` (checked here for a readable error).
SNIPPET_INCLUDE = re.compile(r'^[ \t]*--8<--[ \t]+"(?P<path>[^":]+)"[ \t]*$', re.MULTILINE)
#: Anything that looks like an attempt at the directive (checked against :data:`DIRECTIVE`).
ATTEMPT = re.compile(r"\{\{\s*example\b")


def directives(markdown: str) -> list[tuple[str, str]]:
    """The ``(path, marker)`` pairs a page's Markdown includes; :class:`PluginError` for a malformed directive.

    :param markdown: the page's source.
    """
    found: list[tuple[str, str]] = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        match = DIRECTIVE.match(line)
        if match:
            found.append((match["path"], match["name"]))
        elif ATTEMPT.search(line):
            raise PluginError(
                f"line {number}: malformed example directive {line.strip()!r}; "
                'write {{ example("dags_examples/<file>.py", "<marker>") }} on a line of its own.'
            )
    return found


def extract_section(root: Path, path: str, name: str) -> str:
    """The dedented lines between ``# [START name]`` and ``# [END name]`` in ``root / path``.

    :param root: the project directory (where ``mkdocs.yml`` is).
    :param path: the example file, relative to ``root``.
    :param name: the marker name, e.g. ``howto_brev_lifecycle``.
    """
    source = root / path
    if not source.is_file():
        raise PluginError(f"example file {path!r} does not exist (relative to {root}).")
    lines = source.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"# [START {name}]"]
    ends = [i for i, line in enumerate(lines) if line.strip() == f"# [END {name}]"]
    if len(starts) != 1 or len(ends) != 1:
        raise PluginError(
            f"{path}: expected exactly one '# [START {name}]' and one '# [END {name}]' marker, "
            f"found {len(starts)} and {len(ends)}."
        )
    body = lines[starts[0] + 1 : ends[0]]
    if not any(line.strip() for line in body):
        raise PluginError(f"{path}: the section {name!r} is empty (or its END marker comes first).")
    return textwrap.dedent("\n".join(body)).strip("\n")


def expand(markdown: str, root: Path) -> str:
    """``markdown`` with every example directive replaced by its fenced code block.

    :param markdown: the page's source.
    :param root: the project directory.
    """
    directives(markdown)  # reject malformed directives before replacing the good ones

    def replace(match: re.Match[str]) -> str:
        indent, path, name = match["indent"], match["path"], match["name"]
        code = extract_section(root, path, name)
        block = f'```python title="{path}"\n{code}\n```'
        return textwrap.indent(block, indent, lambda _line: True)

    return DIRECTIVE.sub(replace, markdown)


def on_startup(*, command: str, dirty: bool) -> None:
    """Make ``mkdocs build --strict --quiet`` (``make docs``) strict again.

    ``--quiet`` sets the ``mkdocs`` logger to ERROR, so warnings are never emitted and the strict-mode counter,
    which counts emitted warnings, sees none: the build would pass with broken links or griffe warnings. Lowering
    the level back to WARNING keeps INFO quiet and lets every warning print and fail the build.
    """
    logger = logging.getLogger("mkdocs")
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Expand the example directives of every page (runs before Markdown, so the snippets are highlighted)."""
    root = _root(config)
    missing = [m["path"] for m in SNIPPET_INCLUDE.finditer(markdown) if not (root / m["path"]).is_file()]
    if missing:
        raise PluginError(f"{page.file.src_uri}: included file(s) missing: {', '.join(missing)} (relative to {root}).")
    try:
        return expand(markdown, root)
    except PluginError as err:
        raise PluginError(f"{page.file.src_uri}: {err}") from None


def on_serve(server: Any, *, config: MkDocsConfig, builder: Any) -> Any:
    """``mkdocs serve``: rebuild when an example or an included file changes."""
    root = _root(config)
    for included in ("dags_examples", "benchmarks/results.md", "CHANGELOG.md", "README.md"):
        if (root / included).exists():
            server.watch(str(root / included))
    return server
