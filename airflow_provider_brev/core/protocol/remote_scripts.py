"""The one renderer of the bash scripts the provider runs on an instance (package data, pure).

The scripts live as files in ``airflow_provider_brev/remote/*.sh`` (shellchecked by ``make lint``), one per thing
they do. :func:`render_script` turns one of them into the command string of one ``brev exec``: a header of
``NAME=<value>`` assignments, then the shared helpers of ``remote/lib.sh`` (the marker printer of
:mod:`airflow_provider_brev.core.protocol.markers`), then the script's body (:func:`script_body`: the file less its
comment lines). Every value is ``shlex.quote``-d in the header; nothing is ever formatted into a body, so a body
is the file that shellcheck saw. A path
below the remote home is a :class:`HomePath`: its header line is ``NAME="$HOME"/'<rest>'``, the one expansion a
header makes.

The files are read with :mod:`importlib.resources`, so they work from a wheel, a zip or a source tree.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: The package that holds the scripts (package data).
SCRIPTS_PACKAGE = "airflow_provider_brev.remote"
#: The helpers every rendered script gets (``remote/lib.sh``).
LIBRARY = "lib"

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCRIPT_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class HomePath:
    """A path below the remote ``$HOME``: rendered ``"$HOME"/'<rest>'`` (``rest`` empty: ``"$HOME"`` itself).

    :param rest: the path relative to ``$HOME`` (no NUL).
    """

    rest: str = ""


Value = str | int | HomePath


@cache
def load_script(name: str) -> str:
    """The text of ``remote/<name>.sh``, as shipped in the package.

    :param name: the script's name (lower case, digits, ``_``).
    :raises ValueError: a name that is not a script name.
    """
    if not _SCRIPT_RE.match(name):
        raise ValueError(f"Invalid remote script name {name!r}")
    return resources.files(SCRIPTS_PACKAGE).joinpath(f"{name}.sh").read_text(encoding="utf-8")


@cache
def script_body(name: str) -> str:
    """``remote/<name>.sh`` as it travels: without its comment lines (a line whose first non-blank character is
    ``#``), which are for readers and shellcheck only; every command string counts against
    ``MAX_COMMAND_LENGTH``. A script therefore holds no heredoc and no string that spans lines
    (``tests/unit/core/protocol/test_markers.py`` checks both)."""
    return "".join(line for line in load_script(name).splitlines(keepends=True) if not line.lstrip().startswith("#"))


def shell_value(value: Value) -> str:
    """The right-hand side of one header assignment: always a quoted shell word.

    :raises ValueError: a boolean, another type, or a NUL character (bash cannot hold one).
    """
    if isinstance(value, HomePath):
        return '"$HOME"/' + _quote(value.rest) if value.rest else '"$HOME"'
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"A remote script value must be a string or an integer, got {value!r}")
    return _quote(str(value))


def _quote(text: str) -> str:
    if "\x00" in text:
        raise ValueError("A remote script value must not contain NUL characters")
    return shlex.quote(text)


def render_header(values: Mapping[str, Value]) -> str:
    """``NAME=<quoted value>`` lines, in the order given.

    :raises ValueError: a name that is not a shell variable name, or a value :func:`shell_value` refuses.
    """
    lines = []
    for name, value in values.items():
        if not _NAME_RE.match(name):
            raise ValueError(f"Invalid shell variable name {name!r}")
        lines.append(f"{name}={shell_value(value)}\n")
    return "".join(lines)


def render_script(
    name: str,
    values: Mapping[str, Value] | None = None,
    *,
    helpers: bool = True,
    include: Sequence[str] = (),
    title: str | None = None,
) -> str:
    """The command string of ``remote/<name>.sh``: header, the shared helpers (unless ``helpers`` is false), the
    ``include`` libraries, body.

    :param name: the script (see ``airflow_provider_brev/remote/``).
    :param values: the variables the script reads, set by the header.
    :param helpers: prepend ``remote/lib.sh`` (a script that prints no marker, such as a job's own script, can
        leave it out).
    :param include: more scripts of functions the body uses, in order (``job_lib`` for the job scripts).
    :param title: a first comment line that says what the command is (``ps``, the simulator's records and the
        tests that pick a transfer round out of them read it); one line.
    :raises ValueError: a title with a line break.
    """
    if title is not None and any(c in title for c in "\n\r\x00"):
        raise ValueError(f"A remote script title must be one line, got {title!r}")
    parts = [f"# {title}\n" if title is not None else "", render_header(values or {})]
    if helpers:
        parts.append(script_body(LIBRARY))
    parts.extend(script_body(lib) for lib in include)
    parts.append(script_body(name))
    return "".join(parts)
