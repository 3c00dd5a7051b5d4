"""Pure shell-building for S3 <-> Brev transfers: plan files and scripts (no process is run here).

The worker presigns S3 URLs; the instance only runs ``curl`` with them, so no AWS credential reaches it.
Presigned URLs are short-lived credentials themselves, so they travel in a *plan file* (mode 0600, shipped
with ``brev copy``), never on a command line:

* :func:`build_plan` writes one file per transfer round: ``T`` lines (one per task: a file to download, a file
  to upload in one ``PUT``, or one part of a multipart upload) and ``U`` lines (the task's presigned URL), then
  an ``N <count>`` trailer that proves the file arrived whole.
* :func:`build_transfer_script` (``airflow_provider_brev/remote/transfer.sh``) reads the plan into memory and deletes it before the first ``curl`` starts.
  Each URL reaches ``curl`` as a config file on a pipe (``curl -K <(printf 'url = "%s"' ...)``; ``printf`` is a
  bash builtin), so it is on no process's command line and in no file. Downloads go *in one batch* when the
  instance's curl is 7.75 or newer: one ``curl --parallel --parallel-max <concurrency>`` process reads every
  ``url``/``output`` pair from such a pipe and writes each file into a private staging directory next to its
  destination (``<dir>/.airflow-brev-part-<round id>/``); then one ``find`` (sizes), one ``md5sum`` and one
  ``mv -t`` per destination directory (atomic renames) settle every file, each still verified and reported on
  its own. Older curls get the per-file pool below (one ``curl`` per file, ``concurrency`` at a time), as
  uploads always do. The script's stderr goes to
  ``/dev/null`` (curl messages can quote URLs); results travel as marker lines on stdout:

  - ``BREV_XFER_OK <task> <bytes> <md5|-> <etag|->`` -- downloads: size and md5 verified, file moved into
    place atomically; uploads: the ETag S3 answered (parts also report the part's md5);
  - ``BREV_XFER_FAIL <task> <code> <detail>`` -- ``code`` is one of :data:`FAIL_CODES`; an upload whose file
    no longer has the size, times and inode the listing saw fails with :data:`CHANGED`;
  - ``BREV_XFER_ERROR <reason>`` -- nothing could run (plan missing or truncated, no ``curl``);
  - ``BREV_XFER_DONE <count>`` -- the script got to its end.

  A private temp dir (0700) holds part files and response headers; a trap removes it and the plan on exit,
  hang-up or termination. The script always exits 0 (the released CLI re-runs commands that exit non-zero).
* the listing of a directory (relative path, size, md5, signature) is
  :mod:`airflow_provider_brev.core.staging.listing`.

The output of the transfer script is parsed by :mod:`airflow_provider_brev.core.staging.reports`. Every
value reaches the script through the quoted header of :func:`~airflow_provider_brev.core.protocol.remote_scripts.render_script`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.markers import (
    XFER_CLEANED,
    XFER_DONE,
    XFER_ERROR,
    XFER_FAIL,
    XFER_OK,
    marker_word,
)
from airflow_provider_brev.core.protocol.remote_scripts import HomePath, Value, render_script
from airflow_provider_brev.core.staging.checksums import SIGNATURE_FORMAT, SIGNATURE_RE, is_md5, md5_hex_to_base64
from airflow_provider_brev.core.staging.paths import remote_path_value, validate_relpath

if TYPE_CHECKING:
    from collections.abc import Sequence

OK_MARKER = marker_word(XFER_OK)
FAIL_MARKER = marker_word(XFER_FAIL)
ERROR_MARKER = marker_word(XFER_ERROR)
DONE_MARKER = marker_word(XFER_DONE)
CLEANED_MARKER = marker_word(XFER_CLEANED)

#: Failure codes reported by the transfer script.
#: The failure code of a file that changed while it was read (still being written).
CHANGED = "changed"
FAIL_CODES = ("curl", "size", "md5", "mkdir", "move", "read", CHANGED, "etag", "nourl")

OP_GET = "G"  # download one object to <remote_dir>/<relpath>
OP_PUT = "S"  # upload one file with a single PUT
OP_PART = "P"  # upload one part of a multipart upload

#: Suffix (then ``-<round id>``) of a download in progress: next to its destination, so the final ``mv`` is
#: atomic; unique per round, so a killed round's leftover can never mix with a later round's download.
PART_SUFFIX = ".airflow-brev-part"
#: Where the private per-round temp directories live (relative to the remote ``$HOME``).
XFER_BASE = ".airflow-brev/xfer"
#: Linux limits one execve argument to 128 KiB; the script travels as one argument.
MAX_SCRIPT_LENGTH = 100 * 1024

#: A task key in a plan and in the markers: ``<n>`` or, for parts, ``<n>.<part number>``.
TASK_KEY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_XFER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_URL_RE = re.compile(r"^https?://[^\s\"\\'\x00-\x1f\x7f]+$")


def plan_path(xfer_id: str) -> str:
    """Where a round's plan file goes on the instance (relative to ``$HOME``, as ``brev copy`` takes it)."""
    _check_xfer_id(xfer_id)
    return f".airflow-brev-xfer-{xfer_id}.plan"


def _check_xfer_id(xfer_id: str) -> None:
    if not isinstance(xfer_id, str) or not _XFER_ID_RE.match(xfer_id):
        raise ValueError(f"Invalid transfer id {xfer_id!r}")


# --------------------------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class TransferTask:
    """One unit of work of a transfer round.

    :param key: task id in the plan and in the markers: ``<n>`` or, for parts, ``<n>.<part number>``.
    :param op: :data:`OP_GET`, :data:`OP_PUT` or :data:`OP_PART`.
    :param relpath: path relative to the remote directory.
    :param file_size: size of the whole file (downloads: expected size; uploads: size when listed).
    :param url: the presigned URL (a secret: it goes only into the plan file).
    :param md5: downloads: expected md5 hex (or ``None``: size only); single uploads: md5 hex sent as
        ``Content-MD5`` (S3 rejects a body that does not match; presign with the same ``ContentMD5``);
        parts: unused (computed on the instance).
    :param offset: parts: first byte of the part.
    :param length: parts: bytes in the part.
    :param content_md5: parts: send the part's md5 as ``Content-MD5`` (only when the URL does not sign that
        header, i.e. SigV4 URLs, which sign ``host`` only).
    :param signature: uploads: the file's :data:`SIGNATURE_FORMAT` when it was listed (``None``: size only).
    """

    key: str
    op: str
    relpath: str
    file_size: int
    url: str
    md5: str | None = None
    offset: int = 0
    length: int = 0
    content_md5: bool = False
    signature: str | None = None

    def __post_init__(self) -> None:
        if not TASK_KEY_RE.match(self.key):
            raise ValueError(f"Invalid task key {self.key!r}")
        if self.op not in (OP_GET, OP_PUT, OP_PART):
            raise ValueError(f"Invalid task op {self.op!r}")
        validate_relpath(self.relpath)
        for name in ("file_size", "offset", "length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        if not isinstance(self.url, str) or not _URL_RE.match(self.url):
            raise ValueError("A presigned URL must be an http(s) URL without spaces, quotes or backslashes.")
        if self.md5 is not None and not is_md5(self.md5):
            raise ValueError(f"Invalid md5 {self.md5!r}")
        if self.signature is not None and not SIGNATURE_RE.match(self.signature):
            raise ValueError(f"Invalid file signature {self.signature!r}")
        if self.op == OP_PART and (self.length <= 0 and self.file_size > 0):
            raise ValueError("A part must have a positive length")

    def plan_md5_field(self) -> str:
        if self.op == OP_PART:
            return "+" if self.content_md5 else "-"
        if self.md5 is None:
            return "-"
        return self.md5 if self.op == OP_GET else md5_hex_to_base64(self.md5)


def build_plan(tasks: Sequence[TransferTask]) -> str:
    """The plan file of one round (contains the presigned URLs: ship it only with a 0600 file copy)."""
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("Task keys must be unique")
    lines = []
    for t in tasks:
        length = t.length if t.op == OP_PART else t.file_size
        lines.append(
            "\t".join(
                [
                    *("T", t.key, t.op, str(t.file_size), str(t.offset), str(length), t.plan_md5_field()),
                    *(t.signature or "-", t.relpath),
                ]
            )
        )
    lines.extend(f"U\t{t.key}\t{t.url}" for t in tasks)
    lines.append(f"N\t{len(tasks)}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------- scripts

# The round's script is airflow_provider_brev/remote/transfer.sh (rendered by core/protocol/remote_scripts.py).


def _check_int(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_script_length(script: str) -> str:
    if len(script.encode("utf-8")) > MAX_SCRIPT_LENGTH:
        raise ValueError(f"The transfer script is longer than {MAX_SCRIPT_LENGTH} bytes.")
    return script


def build_transfer_script(
    *,
    xfer_id: str,
    remote_dir: str,
    concurrency: int = 4,
    curl_retries: int = 3,
    connect_timeout: int = 30,
    stall_seconds: int = 120,
    parallel_downloads: bool = True,
) -> str:
    """The script of one transfer round (reads the plan :func:`plan_path` ``(xfer_id)``; see the module doc).

    :param remote_dir: downloads land in / uploads are read from this directory (``~/``, relative = ``$HOME``).
    :param concurrency: tasks run in parallel.
    :param curl_retries: ``curl --retry`` count of each task (transient errors and, where supported, all
        errors); the worker retries failed tasks again in later rounds with fresh URLs.
    :param stall_seconds: abort a transfer slower than 1 KiB/s for this long (then it is retried).
    :param parallel_downloads: fetch every download of the round with one ``curl --parallel`` process (when the
        instance's curl is 7.75 or newer; else, or when false, one ``curl`` per file, ``concurrency`` at a time).
    """
    _check_xfer_id(xfer_id)
    _check_int("concurrency", concurrency, 1)
    _check_int("curl_retries", curl_retries, 0)
    _check_int("connect_timeout", connect_timeout, 1)
    _check_int("stall_seconds", stall_seconds, 1)
    values: dict[str, Value] = {
        "__X_D": remote_path_value(remote_dir),
        "__X_F": HomePath(plan_path(xfer_id)),
        "__X_BASE": HomePath(XFER_BASE),
        "__X_T": HomePath(f"{XFER_BASE}/{xfer_id}"),
        "__X_PS": PART_SUFFIX + "-" + xfer_id,
        "__X_P": concurrency,
        "__X_SF": SIGNATURE_FORMAT,
        "__X_BATCH": 1 if parallel_downloads else 0,
        "__X_RETRIES": curl_retries,
        "__X_CONNECT_TIMEOUT": connect_timeout,
        "__X_STALL": stall_seconds,
    }
    title = f"airflow-provider-brev transfer round {xfer_id}: presigned URLs come from the plan file only."
    return check_script_length(render_script("transfer", values, title=title))


def build_cleanup_script(xfer_id: str) -> str:
    """Remove a round's plan file and temp directory (after an exec that failed part-way); prints
    ``BREV_XFER_CLEANED``."""
    _check_xfer_id(xfer_id)
    return render_script(
        "transfer_cleanup", {"__X_F": HomePath(plan_path(xfer_id)), "__X_T": HomePath(f"{XFER_BASE}/{xfer_id}")}
    )
