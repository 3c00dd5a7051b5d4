"""Recording ``brev`` calls into a transcript (the I/O half of :mod:`airflow_provider_brev.core.protocol.transcript`).

Off unless the environment variable ``AIRFLOW_PROVIDER_BREV_TRANSCRIPT`` names a file (``make system-test`` sets it);
then every call the hook makes of ``brev`` -- the capability probes, the login, every sub-command -- is appended to
it as one JSON line, secrets scrubbed, in one ``write`` on an ``O_APPEND`` descriptor (tasks running in parallel do
not interleave their records). The file is readable by its owner only: created so, or made so before the first
record goes into a file that existed.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.transcript import TRANSCRIPT_VARIABLE, transcript_record

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from airflow_provider_brev.core.protocol.lines import ProcessResult

__all__ = ["record_call", "transcript_path"]


def transcript_path() -> str:
    """The transcript file calls are recorded into (``""``: recording is off)."""
    return os.environ.get(TRANSCRIPT_VARIABLE, "").strip()


def record_call(
    argv: Sequence[str], result: ProcessResult, *, secrets: Iterable[str | None], cli_version: Callable[[], str]
) -> None:
    """Append one call to the transcript, when recording is on.

    :param argv: the arguments after ``brev``.
    :param result: what the call produced.
    :param secrets: the connection's secret values (``None`` for those it does not hold).
    :param cli_version: the CLI's version text (asked only when recording).
    """
    path = transcript_path()
    if not path:
        return
    record = transcript_record(argv, result, secrets=[s for s in secrets if s], cli_version=cli_version())
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:  # a file made beforehand (``touch``) others may read: private first
            os.fchmod(fd, 0o600)
        os.write(fd, line)
    finally:
        os.close(fd)
