"""What printed-secret redaction hides: the one rule for every compute's output (pure).

A command that prints a ``secret_env`` value (a debugging ``env``, a library echoing its config) must not carry it
into a log, XCom, a trigger event or a file the provider writes. Output is redacted line by line, so:

* a value without a newline is redacted whole, wherever it appears in a line;
* a multi-line value (a PEM key, pretty-printed JSON) never appears whole within one line, so each of its lines is
  redacted instead -- stripped of surrounding whitespace, and only when it has at least
  :data:`MIN_SECRET_LINE_BYTES` bytes and one character that is neither ASCII punctuation nor whitespace (``{``,
  ``},``, ``-----`` or an empty line would otherwise turn all output into ``***``).

:func:`secret_fragments` says it for one value, :func:`redaction_fragments` for a set of them in the order they are
replaced (longest first: a fragment inside a longer one must not leave the rest of the longer one visible), and
:func:`redact` applies them to a line. Brev steps apply the same rule on the instance in awk
(:data:`~airflow_provider_brev.core.jobs.shell.REDACT_AWK`), Lepton steps in the job's agent (which receives the
fragments of :func:`redaction_fragments` in its plan), Airflow's masker knows the same fragments
(:func:`~airflow_provider_brev._compat.mask_secret`); tests prove they agree. What no rule of this kind can hide: a
value printed in another form (base64, URL-encoded, reversed), a part of a value, or the lines of a multi-line
value split differently.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "MIN_SECRET_LINE_BYTES",
    "NOT_CONTENT",
    "REDACTED",
    "TRIMMED",
    "redact",
    "redaction_fragments",
    "secret_fragments",
]

#: A line of a multi-line secret is redacted when, without its surrounding whitespace, it has at least this many
#: bytes (Airflow's default ``[logging] min_length_masked_secret``) and one character that is neither ASCII
#: punctuation nor whitespace.
MIN_SECRET_LINE_BYTES = 5
#: What replaces a fragment.
REDACTED = "***"
#: The whitespace stripped from the lines of a multi-line value.
TRIMMED = " \t\r\f\v"
#: Characters that are no content of their own (a line of only these is never redacted).
NOT_CONTENT = string.punctuation + TRIMMED


def secret_fragments(value: str) -> list[str]:
    """What is redacted of one secret value (and what the Airflow masker must know): the value itself when it has
    no newline, else each of its non-trivial lines, stripped (see the module docstring).

    :param value: the secret value.
    """
    if "\n" not in value:
        return [value] if value else []
    fragments: list[str] = []
    for line in value.split("\n"):
        text = line.strip(TRIMMED)
        if len(text.encode("utf-8")) >= MIN_SECRET_LINE_BYTES and any(ch not in NOT_CONTENT for ch in text):
            fragments.append(text)
    return fragments


def redaction_fragments(secret_env: Mapping[str, str]) -> list[str]:
    """The fragments of every value of ``secret_env``, in the order they are replaced: by variable name, then by
    line, stably sorted longest first (in UTF-8 bytes) -- the order of the Brev instance's awk filter.

    :param secret_env: secret environment variables (name -> value).
    """
    fragments = [fragment for name in sorted(secret_env) for fragment in secret_fragments(str(secret_env[name]))]
    return sorted(fragments, key=lambda fragment: len(fragment.encode("utf-8")), reverse=True)


def redact(text: str, fragments: Iterable[str]) -> str:
    """``text`` with every occurrence of each fragment, in the given order, replaced by :data:`REDACTED`.

    :param text: one line of output.
    :param fragments: what :func:`redaction_fragments` returns.
    """
    for fragment in fragments:
        text = text.replace(fragment, REDACTED)
    return text
