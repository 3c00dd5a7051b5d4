"""A transcript of ``brev`` calls: one record per call, secrets scrubbed, and what the provider reads from it (pure).

A transcript is a JSON Lines file, one session in call order (``tests/system/transcripts/*.jsonl``). Each record says
what the call was and what it printed: ``argv`` (after ``brev``), ``stdout``, ``stderr``, ``exit_code``,
``timed_out``, the CLI's ``cli_version``, and its ``source``: ``recorded`` (a real ``brev``, written by the hook
while :data:`TRANSCRIPT_VARIABLE` names a file, which ``make system-test`` sets) or ``reference`` (built from the
outputs ``shared/reference/brev-cli.md`` quotes, ``ref`` naming the section). :func:`transcript_record` scrubs a
call's secrets with the one redaction rule (:mod:`airflow_provider_brev.core.secrets`: the connection's token or
API key, line by line) and, whatever the connection, anything shaped or named like a credential (:func:`scrub`).

What the provider makes of a record, the same way it does of a live call: :func:`call_outcome` (the classified
failure's type, ``ok`` or ``timeout``) and :func:`answer_shape` (the JSON answer's keys and value types,
read past breadcrumb lines as the parsers read it). The simulator's replay of a transcript
(:mod:`airflow_provider_brev.testing.transcripts`) compares both with its own answer to the same call.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.classify import classify_failure
from airflow_provider_brev.core.protocol.output import first_json_document
from airflow_provider_brev.core.secrets import REDACTED, redact, redaction_fragments

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from airflow_provider_brev.core.protocol.lines import ProcessResult

__all__ = [
    "SOURCES",
    "TRANSCRIPT_VARIABLE",
    "answer_shape",
    "call_outcome",
    "json_shape",
    "scrub",
    "subcommand",
    "transcript_record",
]

#: The environment variable naming the transcript file the hook appends every ``brev`` call to (unset: none).
TRANSCRIPT_VARIABLE = "AIRFLOW_PROVIDER_BREV_TRANSCRIPT"
#: Where a record's output came from.
SOURCES = ("recorded", "reference")
#: Credentials by their shape, scrubbed whatever the connection holds: a JWT (console token), a Brev API key, an AWS
#: access key id and an NGC API key.
_CREDENTIAL_SHAPES = re.compile(
    r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|\bbak-[A-Za-z0-9_-]{6,}"
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b|\bnvapi-[A-Za-z0-9_-]{20,}"
)
#: Credentials by what names them, their value scrubbed and the name kept: a presigned URL's credential, session
#: token and signature (SigV4 and SigV2), and the variables of an AWS secret key, session token and NGC API key.
_NAMED_CREDENTIALS = re.compile(
    r"(?i)(\b(?:X-Amz-(?:Signature|Credential|Security-Token)|Signature|AWSAccessKeyId)=)[^&\s\"'<>]+"
    r"|(\b(?:AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|NGC_API_KEY)[\"']?\s*[=:]\s*)\S+"
)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` without the ``secrets`` (line by line, :func:`~airflow_provider_brev.core.secrets.redact`) and
    without anything shaped like a credential (a JWT, a ``bak-`` or ``nvapi-`` API key, an AWS access key id) or
    named as one (a presigned URL's ``X-Amz-Credential``/``-Security-Token``/``-Signature`` or ``Signature``, an
    ``AWS_SECRET_ACCESS_KEY=``, ``AWS_SESSION_TOKEN=`` or ``NGC_API_KEY=`` value).

    :param text: an argument or an output.
    :param secrets: the secret values of the call (the connection's token, API key).
    """
    fragments = redaction_fragments({str(index): value for index, value in enumerate(secrets) if value})
    lines = [_scrub_shapes(redact(line, fragments)) for line in text.split("\n")]
    return "\n".join(lines)


def _scrub_shapes(line: str) -> str:
    named = _NAMED_CREDENTIALS.sub(lambda match: (match.group(1) or match.group(2)) + REDACTED, line)
    return _CREDENTIAL_SHAPES.sub(REDACTED, named)


def transcript_record(
    argv: Sequence[str], result: ProcessResult, *, secrets: Iterable[str], cli_version: str
) -> dict[str, Any]:
    """The transcript record of one finished call of a real ``brev`` (``source``: ``recorded``).

    :param argv: the arguments after ``brev``.
    :param result: what the call produced (``stdout`` is complete when the call captured it, else its tail).
    :param secrets: the secret values to scrub.
    :param cli_version: the CLI's ``--version`` text.
    """
    kept = [value for value in secrets if value]
    return {
        "source": "recorded",
        "cli_version": cli_version,
        "argv": [scrub(arg, kept) for arg in argv],
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "stdout": scrub(result.stdout, kept),
        "stderr": scrub(result.stderr, kept),
        # when the call started (epoch seconds): the replay keeps the recorded gaps between calls
        "started_at": round(result.started_at, 3),
    }


def subcommand(argv: Sequence[str]) -> str:
    """The sub-command of a ``brev`` argv (its first word that is not a flag; ``--version`` alone: ``--version``).

    :param argv: the arguments after ``brev``.
    """
    return next((arg for arg in argv if not arg.startswith("-")), argv[0] if argv else "")


def call_outcome(record: dict[str, Any]) -> str:
    """What the provider makes of a call: ``ok`` (exit 0), ``timeout``, or the type of the error it classifies the
    failure as (``BrevInstanceNotFoundError``, ``BrevInvalidInputError``, ``BrevAuthError`` ...).

    :param record: a transcript record.
    """
    if record.get("timed_out"):
        return "timeout"
    if record["exit_code"] == 0:
        return "ok"
    error = classify_failure(subcommand(record["argv"]), record["exit_code"], record["stdout"], record["stderr"])
    return type(error).__name__


def json_shape(value: Any) -> Any:
    """The shape of a JSON value: an object's keys (sorted: a parser reads keys, not their order) with their shapes,
    a list's distinct element shapes (sorted), and a scalar's type name (``string``, ``number``, ``bool``, ``null``).

    :param value: a parsed JSON value.
    """
    if isinstance(value, dict):
        return [[key, json_shape(value[key])] for key in sorted(value)]
    if isinstance(value, list):
        distinct = {repr(json_shape(item)): json_shape(item) for item in value}
        return ["list", *(distinct[key] for key in sorted(distinct))]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else "string"


def answer_shape(stdout: str) -> Any:
    """The shape (:func:`json_shape`) of the JSON answer on a call's stdout, read past breadcrumb lines as the
    parsers read it; ``None`` when stdout holds no JSON document.

    :param stdout: what the call printed on stdout.
    """
    try:
        return json_shape(first_json_document(stdout))
    except ValueError:
        return None
