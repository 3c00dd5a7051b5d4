"""Pure parsing of what the transfer and list scripts (:mod:`airflow_provider_brev.core.staging.scripts`,
:mod:`airflow_provider_brev.core.staging.listing`) print (marker lines on stdout), and redaction of presigned URLs from any text bound for a log or an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.markers import (
    XFER_DONE,
    XFER_ERROR,
    XFER_FAIL,
    XFER_FILE,
    XFER_LISTED,
    XFER_MANIFEST,
    XFER_NODIR,
    XFER_OK,
    XFER_UNREADABLE,
    iter_markers,
)
from airflow_provider_brev.core.staging.checksums import SIGNATURE_RE, is_md5
from airflow_provider_brev.core.staging.scripts import TASK_KEY_RE

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
    """Read the markers of :func:`~airflow_provider_brev.core.staging.scripts.build_transfer_script`
    (:func:`~airflow_provider_brev.core.protocol.markers.parse_marker`); a task's ``OK`` wins over its ``FAIL``."""
    report = TransferReport()
    for marker in iter_markers(lines):
        if marker.kind == XFER_OK:
            key, size, md5, etag = marker["task"], marker["bytes"], marker["md5"], marker["etag"]
            if not TASK_KEY_RE.match(key) or not size.isdigit():
                continue
            report.ok[key] = TaskResult(
                size=int(size),
                md5=md5 if is_md5(md5) else None,
                etag=etag if etag != "-" and _ETAG_RE.match(etag) else None,
            )
            report.failed.pop(key, None)
        elif marker.kind == XFER_FAIL:
            key = marker["task"]
            if TASK_KEY_RE.match(key) and key not in report.ok:
                report.failed[key] = (marker["code"], redact(marker["detail"]))
        elif marker.kind == XFER_ERROR:
            report.error = redact(marker["reason"].strip())
        elif marker.kind == XFER_DONE:
            report.complete = True
    return report


@dataclass(frozen=True)
class RemoteFile:
    """A listed file.

    :param relpath: its path relative to the listed directory.
    :param size: its size in bytes.
    :param md5: its md5 (``None``: listed without checksums).
    :param signature: its size, times and inode when listed
        (:data:`~airflow_provider_brev.core.staging.checksums.SIGNATURE_FORMAT`).
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
    """Read the markers of :func:`~airflow_provider_brev.core.staging.listing.build_list_script`
    (:func:`~airflow_provider_brev.core.protocol.markers.parse_marker`)."""
    report = ListReport()
    for marker in iter_markers(lines):
        if marker.kind == XFER_FILE:
            size, md5, signature = marker["size"], marker["md5"], marker["signature"]
            relpath = marker["relpath"]
            if not size.isdigit() or not SIGNATURE_RE.match(signature) or not relpath:
                continue
            if "\ufffd" in relpath:  # not UTF-8 (decoded with replacement): no S3 key can name it; skip it
                report.skipped_names += 1
                continue
            report.files.append(
                RemoteFile(relpath=relpath, size=int(size), md5=md5 if is_md5(md5) else None, signature=signature)
            )
        elif marker.kind == XFER_MANIFEST:
            report.manifest_lines.append(marker["line"])
        elif marker.kind == XFER_UNREADABLE:
            report.unreadable.append(marker["relpath"])
        elif marker.kind == XFER_LISTED:
            report.complete = True
            if marker["skipped"].isdigit():
                report.skipped_names += int(marker["skipped"])
        elif marker.kind == XFER_NODIR:
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
