"""Pure parsing of what the transfer and list scripts (:mod:`airflow_provider_brev.cli.transfer.scripts`,
:mod:`airflow_provider_brev.cli.transfer.listing`) print (marker lines on stdout), and redaction of presigned URLs from any text bound for a log or an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_brev.cli.transfer.checksums import SIGNATURE_RE, is_md5
from airflow_provider_brev.cli.transfer.listing import (
    FILE_MARKER,
    LISTED_MARKER,
    MANIFEST_MARKER,
    NODIR_MARKER,
    UNREADABLE_MARKER,
)
from airflow_provider_brev.cli.transfer.scripts import DONE_MARKER, ERROR_MARKER, FAIL_MARKER, OK_MARKER, TASK_KEY_RE

if TYPE_CHECKING:
    from collections.abc import Iterable

_ETAG_RE = re.compile(r"^[0-9A-Za-z_-]{1,200}$")


@dataclass(frozen=True)
class TaskResult:
    """What the script reported for one successful task."""

    size: int
    md5: str | None
    etag: str | None


@dataclass
class TransferReport:
    """Parsed output of :func:`build_transfer_script`.

    ``complete`` is true when the script reached its end; tasks with neither an ``ok`` nor a ``failed``
    entry were not reported (connection lost, script killed) and must be treated as failed.
    """

    ok: dict[str, TaskResult] = field(default_factory=dict)
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)
    error: str | None = None
    complete: bool = False

    def outcome(self, key: str) -> tuple[str, str] | None:
        """``None`` if the task succeeded, else ``(code, detail)``."""
        if key in self.ok:
            return None
        if key in self.failed:
            return self.failed[key]
        if self.error:
            return ("error", self.error)
        return ("unreported", "no report from the instance (connection lost or script interrupted)")


def parse_transfer_output(lines: Iterable[str]) -> TransferReport:
    report = TransferReport()
    for raw in lines:
        line = raw.rstrip("\r")
        if line.startswith(OK_MARKER + " "):
            parts = line.split()
            if len(parts) != 5 or not TASK_KEY_RE.match(parts[1]) or not parts[2].isdigit():
                continue
            md5 = parts[3] if is_md5(parts[3]) else None
            etag = parts[4] if parts[4] != "-" and _ETAG_RE.match(parts[4]) else None
            report.ok[parts[1]] = TaskResult(size=int(parts[2]), md5=md5, etag=etag)
            report.failed.pop(parts[1], None)
        elif line.startswith(FAIL_MARKER + " "):
            parts = line.split(" ", 3)
            if len(parts) < 3 or not TASK_KEY_RE.match(parts[1]):
                continue
            if parts[1] not in report.ok:
                report.failed[parts[1]] = (parts[2], redact(parts[3] if len(parts) > 3 else ""))
        elif line.startswith(ERROR_MARKER + " "):
            report.error = redact(line[len(ERROR_MARKER) + 1 :].strip())
        elif line.startswith(DONE_MARKER):
            report.complete = True
    return report


@dataclass(frozen=True)
class RemoteFile:
    """A listed file.

    :param relpath: its path relative to the listed directory.
    :param size: its size in bytes.
    :param md5: its md5 (``None``: listed without checksums).
    :param signature: its size, times and inode when listed
        (:data:`~airflow_provider_brev.cli.transfer.checksums.SIGNATURE_FORMAT`).
    """

    relpath: str
    size: int
    md5: str | None
    signature: str | None = None


@dataclass
class ListReport:
    """Parsed output of :func:`build_list_script`."""

    files: list[RemoteFile] = field(default_factory=list)
    manifest_lines: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    skipped_names: int = 0
    missing_dir: bool = False
    complete: bool = False


def parse_list_output(lines: Iterable[str]) -> ListReport:
    report = ListReport()
    for raw in lines:
        line = raw[:-1] if raw.endswith("\r") else raw
        if line.startswith(FILE_MARKER + " "):
            parts = line.split(" ", 4)
            if len(parts) != 5 or not parts[1].isdigit() or not SIGNATURE_RE.match(parts[3]):
                continue
            if "\ufffd" in parts[4]:  # not UTF-8 (decoded with replacement): no S3 key can name it; skip it
                report.skipped_names += 1
                continue
            md5 = parts[2] if is_md5(parts[2]) else None
            report.files.append(RemoteFile(relpath=parts[4], size=int(parts[1]), md5=md5, signature=parts[3]))
        elif line.startswith(MANIFEST_MARKER + " "):
            report.manifest_lines.append(line[len(MANIFEST_MARKER) + 1 :])
        elif line.startswith(UNREADABLE_MARKER + " "):
            report.unreadable.append(line[len(UNREADABLE_MARKER) + 1 :])
        elif line.startswith(LISTED_MARKER):
            parts = line.split()
            report.complete = True
            if len(parts) >= 3 and parts[2].isdigit():
                report.skipped_names += int(parts[2])
        elif line.strip() == NODIR_MARKER:
            report.missing_dir = True
            report.complete = True
    report.files.sort(key=lambda f: f.relpath)
    return report


# ------------------------------------------------------------------------------------------------ redaction

_URL_TEXT_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_AMZ_PARAM_RE = re.compile(r"(X-Amz-[A-Za-z-]+|Signature|AWSAccessKeyId|Expires)=[^&\s\"']*", re.IGNORECASE)


def redact(text: str) -> str:
    """Remove URLs and presigned-URL query parameters from a text that goes to a log or an error."""
    text = _URL_TEXT_RE.sub("<url>", text or "")
    return _AMZ_PARAM_RE.sub(lambda m: m.group(1) + "=***", text)
