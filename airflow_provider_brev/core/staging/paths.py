"""Pure path and pattern rules of S3 <-> Brev transfers: include/exclude globs, safe relative paths, S3
prefixes and remote directory words (no process is run here).

:func:`glob_to_regex` translates an include/exclude glob into one regular expression that means the same to
bash's ``[[ =~ ]]`` (POSIX ERE, used by :func:`airflow_provider_brev.core.staging.listing.build_list_script`)
and to Python's :mod:`re` (used for S3 keys), so a :class:`PathFilter` selects the same files on both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.remote_scripts import HomePath, shell_value
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

_BAD_PATH_CHARS = ("\n", "\r", "\t", "\x00")
_ERE_SPECIAL = set(".^$*+?()[]{}|\\")
_BRACKET_SAFE = re.compile(r"^[A-Za-z0-9 _.,:;/@%=+~#!-]*$")


# ------------------------------------------------------------------------------------------------ patterns


def glob_to_regex(pattern: str) -> str:
    """Translate a glob into a regex with the same meaning in POSIX ERE (bash ``=~``) and Python ``re``.

    ``*`` matches any characters *including* ``/`` (like :func:`fnmatch.fnmatchcase`, so ``*.pth`` matches at
    any depth); ``?`` one character; ``[abc]``, ``[a-z]``, ``[!abc]`` a set; a leading ``**/`` also matches
    zero directories (``**/x.json`` matches ``x.json`` and ``a/b/x.json``). Patterns match the path relative to
    the S3 prefix or the remote directory. Brackets may contain letters, digits and ``_.,:;/@%=+~#!-`` only.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("An include/exclude pattern must be a non-empty string.")
    if any(ch in pattern for ch in _BAD_PATH_CHARS):
        raise ValueError(f"Pattern {pattern!r} must not contain tabs, newlines or NUL characters.")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(.*/)?")
            i += 3
            continue
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
            while i + 1 < n and pattern[i + 1] == "*" and not pattern.startswith("**/", i + 1):
                i += 1
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i + 1
            negate = j < n and pattern[j] == "!"
            if negate:
                j += 1
            start = j
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal '['
                out.append("\\[")
            else:
                content = pattern[start:j]
                lead_bracket = content.startswith("]")
                body = content[1:] if lead_bracket else content
                if not body and not lead_bracket:
                    raise ValueError(f"Pattern {pattern!r} has an empty bracket expression.")
                if not _BRACKET_SAFE.match(body) or re.search(r"--|~~|&&|\|\|", body):
                    raise ValueError(
                        f"Pattern {pattern!r}: a bracket expression may only contain letters, digits and "
                        "'_.,:;/@%=+~#!-' (no doubled '-' or '~')."
                    )
                if body.startswith("^"):
                    raise ValueError(f"Pattern {pattern!r}: use '[!...]' to negate a bracket expression.")
                out.append("[" + ("^" if negate else "") + ("]" if lead_bracket else "") + body + "]")
                i = j
        elif ch in _ERE_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _alternation(patterns: Sequence[str]) -> str:
    return "|".join(f"({glob_to_regex(p)})" for p in patterns)


@dataclass(frozen=True)
class PathFilter:
    """Include/exclude globs (see :func:`glob_to_regex`); a path is selected when it matches at least one
    include pattern (or there are none) and no exclude pattern."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    include_regex: str = field(init=False, default="")
    exclude_regex: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "include_regex", _alternation(self.include) if self.include else "")
        object.__setattr__(self, "exclude_regex", _alternation(self.exclude) if self.exclude else "")

    @classmethod
    def create(
        cls, include: str | Iterable[str] | None = None, exclude: str | Iterable[str] | None = None
    ) -> PathFilter:
        return cls(include=normalize_patterns(include, "include"), exclude=normalize_patterns(exclude, "exclude"))

    @property
    def bash_include(self) -> str:
        """Anchored ERE for bash (empty = everything)."""
        return f"^({self.include_regex})$" if self.include_regex else ""

    @property
    def bash_exclude(self) -> str:
        return f"^({self.exclude_regex})$" if self.exclude_regex else ""

    def matches(self, relpath: str) -> bool:
        if self.include_regex and not re.fullmatch(self.include_regex, relpath, re.DOTALL):
            return False
        return not (self.exclude_regex and re.fullmatch(self.exclude_regex, relpath, re.DOTALL))


def normalize_patterns(value: str | Iterable[str] | None, what: str = "pattern") -> tuple[str, ...]:
    """``None``/``""`` -> ``()``; a string -> one pattern; an iterable of strings -> those patterns."""
    if value is None or value == "":
        return ()
    items = [value] if isinstance(value, str) else list(value)
    result = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"Every {what} pattern must be a non-empty string, got {item!r}.")
        glob_to_regex(item)  # validate early
        result.append(item)
    return tuple(result)


# --------------------------------------------------------------------------------------------------- paths

#: Characters a log line must not carry raw: C0 and C1 controls and DEL (a terminal runs escape sequences: an
#: ``ESC [2J`` in a file name clears the screen of whoever reads the log), and the bidirectional overrides and
#: isolates that make a name read differently from what it is.
_UNPRINTABLE = {
    code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    for code in (*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


def printable(name: str) -> str:
    """``name`` (a file name, an S3 key) safe for a log line or an error message: every control character and
    bidirectional override is written as its escape (``\\x1b``, ``\\u202e``); nothing else changes."""
    return name.translate(_UNPRINTABLE)


def validate_relpath(relpath: str) -> str:
    """A safe relative path: no leading ``/``, no empty, ``.`` or ``..`` component, no tab/newline/NUL."""
    if not isinstance(relpath, str) or not relpath:
        raise ValueError("empty relative path")
    if any(ch in relpath for ch in _BAD_PATH_CHARS):
        raise ValueError(f"{relpath!r} contains a tab, newline or NUL character")
    if "\ufffd" in relpath:
        raise ValueError(f"{relpath!r} is not valid UTF-8")
    if relpath.startswith("/"):
        raise ValueError(f"{relpath!r} is absolute")
    parts = relpath.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{relpath!r} has an empty, '.' or '..' component")
    return relpath


def find_path_conflicts(relpaths: Iterable[str]) -> list[str]:
    """Paths that are also a parent directory of another path (``a`` and ``a/b`` cannot both be files)."""
    paths = set(relpaths)
    parents = set()
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parents.add("/".join(parts[:i]))
    return sorted(paths & parents)


def normalize_prefix(prefix: str | None) -> str:
    """An S3 "directory" prefix: ``""`` (whole bucket) or ending in exactly one ``/``."""
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise ValueError(f"The S3 prefix must be a string, got {prefix!r}")
    prefix = prefix.lstrip("/")
    if any(ch in prefix for ch in ("\n", "\r", "\x00")):
        raise ValueError(f"Invalid S3 prefix {prefix!r}")
    return prefix.rstrip("/") + "/" if prefix.strip("/") else ""


#: Names of the provider's own working state on an instance (job directories, md5 caches, secret and plan files,
#: downloads in progress): never a step or transfer directory, and never listed for upload.
STATE_NAME = ".airflow-brev"
#: Absolute directories that are, or hold, a login's home (the remote home's own path is not known before the
#: first ``brev`` call): ``/root``, ``/home`` and ``/home/<user>``.
_HOMES = (("root",), ("home",))


def _is_state_name(part: str) -> bool:
    return part == STATE_NAME or part.startswith(STATE_NAME + "-")


def _refuse(directory: str, why: str) -> BrevInvalidInputError:
    return BrevInvalidInputError(f"The directory {directory!r} {why}")


def normalize_directory(directory: Any) -> str:
    """A directory on the instance for a step's ``inputs``/``outputs``, a transfer's ``remote_dir`` or TAO's
    ``results_dir``: relative (to the remote home), ``~/...`` or absolute, and *below* the home. Returned without
    its trailing ``/``; raises :class:`BrevInvalidInputError` saying what to write instead.

    Refused, because syncing them reads or overwrites what is not the step's (shell and ssh configuration,
    ``~/.docker/config.json`` with the NGC login, the provider's job state): empty, ``.``/``..``/empty components,
    the home itself (``~``, ``~/``, ``.``, ``./``), ``/``, ``/home``, ``/home/<user>``, ``/root``; ``$HOME`` and
    other variables (never expanded: ``'$HOME/x'`` would be a directory named ``$HOME``); ``~user``; any
    component named ``.airflow-brev`` or ``.airflow-brev-*`` (:data:`STATE_NAME`); tabs, newlines and NUL.
    """
    if not isinstance(directory, str) or not directory.strip():
        raise BrevInvalidInputError(f"A directory on the instance must be a non-empty path, got {directory!r}.")
    if any(ch in directory for ch in _BAD_PATH_CHARS):
        raise _refuse(directory, "contains a tab, newline or NUL character.")
    lead = "/" if directory.startswith("/") else "~/" if directory.startswith("~/") else ""
    rest = directory[len(lead) :].strip("/")
    parts = rest.split("/")
    below = "e.g. 'work/out' (a relative path is under the remote home) or '~/work/out'"
    if (not lead and parts[0] == "~") or (lead != "/" and rest in ("", ".")):
        raise _refuse(directory, f"is the remote home itself: name a directory below it, {below}.")
    if not rest:
        raise _refuse(directory, f"is the root directory: name a directory below it, {below}.")
    if not lead and parts[0].startswith("~"):
        raise _refuse(directory, f"names another user's home ('~user' is not supported): use {below}.")
    if not lead and parts[0].startswith("$"):
        raise _refuse(
            directory, f"starts with a variable, which is never expanded: drop it, {below} (not '$HOME/work/out')."
        )
    if not rest or any(part in ("", ".", "..") for part in parts):
        raise _refuse(
            directory,
            f"must name a directory below the home or '/', without empty, '.' or '..' components: {below}.",
        )
    if lead == "/" and (tuple(parts) in _HOMES or (parts[0] == "home" and len(parts) == 2)):
        raise _refuse(directory, f"is, or holds, a home directory: name a directory below it, {below}.")
    if any(_is_state_name(part) for part in parts):
        raise _refuse(
            directory, f"is the provider's own working state ({STATE_NAME}*) on the instance: use another one, {below}."
        )
    return lead + rest


def remote_path_value(path: str) -> str | HomePath:
    """A remote script's value for a remote directory: ``~``/``~/x``/relative paths are a
    :class:`~airflow_provider_brev.core.protocol.remote_scripts.HomePath` (they resolve against ``$HOME``)."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("The remote directory must be a non-empty path.")
    if any(ch in path for ch in ("\n", "\r", "\x00")):
        raise ValueError(f"The remote directory {path!r} must not contain newlines or NUL characters.")
    if path == "~":
        return HomePath()
    if path.startswith("~/"):
        return HomePath(path[2:].lstrip("/"))
    if path.startswith("/"):
        return path
    return HomePath(path)


def remote_path_word(path: str) -> str:
    """Shell word for a remote path: ``~``/``~/x``/relative paths resolve against ``$HOME``."""
    return shell_value(remote_path_value(path))
