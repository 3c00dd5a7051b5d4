"""The durable handle of a detached job on a Brev instance: its id, its directory, its states and markers.

Job ids are deterministic per try (:func:`generate_job_id`), so a retried worker finds the job its try started.
The remote layout and the design are described in :mod:`airflow_provider_brev.core.jobs.remote`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_brev.core.protocol.markers import (
    JOB_CLEANED,
    JOB_EXISTS,
    JOB_KILLED,
    JOB_LAUNCH_FAILED,
    JOB_LAUNCHED,
    JOB_LOG_BEGIN,
    JOB_LOG_END,
    JOB_STATUS,
    marker_word,
)
from airflow_provider_brev.core.protocol.remote_scripts import HomePath, shell_value

DEFAULT_BASE_DIR = ".airflow-brev/jobs"
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
#: The longest a poll waits on the instance for its job to end (seconds): a poll interval longer than this sleeps the
#: rest on the worker, so one ``brev exec`` never holds a connection open for long.
MAX_POLL_WAIT = 10.0
#: Linux limits one execve argument to 128 KiB; the whole command travels as one argument of ``bash -c``.
MAX_COMMAND_LENGTH = 100 * 1024
MAX_JOB_ID_LENGTH = 80
#: Exit code of a job whose set-up failed (secret file not loadable, ``cwd`` missing); the command did not run.
SETUP_FAILED_EXIT_CODE = 125
#: Exit code written by the kill command: the job ended on SIGTERM / needed SIGKILL.
TERMINATED_EXIT_CODE = 143
KILLED_EXIT_CODE = 137

RUNNING = "running"
FINISHED = "finished"
LOST = "lost"
MISSING = "missing"
STATES = (RUNNING, FINISHED, LOST, MISSING)

STATUS_MARKER = marker_word(JOB_STATUS)
LOG_BEGIN_MARKER = marker_word(JOB_LOG_BEGIN)
LOG_END_MARKER = marker_word(JOB_LOG_END)
LAUNCHED_MARKER = marker_word(JOB_LAUNCHED)
EXISTS_MARKER = marker_word(JOB_EXISTS)
LAUNCH_FAILED_MARKER = marker_word(JOB_LAUNCH_FAILED)
KILLED_MARKER = marker_word(JOB_KILLED)
CLEANED_MARKER = marker_word(JOB_CLEANED)

_JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_SLUG_MAX = 56
_HASH_LENGTH = 10
_FORBIDDEN_PATH_CHARS = ("'", '"', "\n", "\r", "\x00")


# --------------------------------------------------------------------------------------------------- job ids


def _slug(value: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


def job_id_prefix(*, dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The try-independent part of :func:`generate_job_id`: ``<dag-task slug>-<hash>``.

    Jobs of every try of one task instance start with ``job_id_prefix(...) + "-t"``.
    """
    slug = _slug(f"{dag_id}-{task_id}")[:_SLUG_MAX].strip("-") or "job"
    key = json.dumps([dag_id, run_id, task_id, int(map_index)], separators=(",", ":"))
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:_HASH_LENGTH]
    return f"{slug}-{digest}"


def generate_job_id(*, dag_id: str, task_id: str, run_id: str, try_number: int, map_index: int = -1) -> str:
    """A deterministic job id for one try of one task instance: ``<dag-task slug>-<hash>-t<try>``.

    The same try always gets the same id (a crashed worker's retry of that try finds its job); a new try gets a
    new id. Only ``[a-z0-9-]``, at most :data:`MAX_JOB_ID_LENGTH` characters.
    """
    if isinstance(try_number, bool) or not isinstance(try_number, int) or not 0 <= try_number < 10**10:
        raise ValueError(f"try_number must be a non-negative integer, got {try_number!r}")
    job_id = f"{job_id_prefix(dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)}-t{try_number}"
    assert len(job_id) <= MAX_JOB_ID_LENGTH
    return job_id


# ---------------------------------------------------------------------------------------------------- paths


def check_path(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if any(char in value for char in _FORBIDDEN_PATH_CHARS):
        raise ValueError(f"{what} {value!r} must not contain quotes, newlines or NUL characters")
    return value


def path_value(path: str, *, relative_to_home: bool) -> str | HomePath:
    """A remote script's value for ``path``: ``~``/``~/x`` and (optionally) relative paths are a
    :class:`~airflow_provider_brev.core.protocol.remote_scripts.HomePath` (they resolve against ``$HOME``)."""
    if path == "~":
        return HomePath()
    if path.startswith("~/"):
        return HomePath(path[2:].lstrip("/"))
    if path.startswith("/") or not relative_to_home:
        return path
    return HomePath(path)


def shell_path(path: str, *, relative_to_home: bool) -> str:
    """A shell word for ``path``: ``~``/``~/x`` and (optionally) relative paths resolve against ``$HOME``."""
    return shell_value(path_value(path, relative_to_home=relative_to_home))


@dataclass(frozen=True)
class RemoteJob:
    """The durable handle of one detached job (stored in XCom via :meth:`to_dict`).

    :param job_id: letters, digits, ``_ . -`` (see :func:`generate_job_id`).
    :param base_dir: directory holding the job directories; relative to the remote ``$HOME`` unless absolute
        (``~/`` is accepted). No quotes, newlines or ``..``.
    """

    job_id: str
    base_dir: str = DEFAULT_BASE_DIR

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, str) or not _JOB_ID_RE.match(self.job_id):
            raise ValueError(f"Invalid job id {self.job_id!r}: use letters, digits, '_', '.', '-' (max 128).")
        base = check_path(self.base_dir, "base_dir")
        if ".." in base:
            raise ValueError(f"base_dir {base!r} must not contain '..'")
        if base.startswith("~/"):
            base = base[2:]
        base = base.rstrip("/") if base.strip("/") else ""
        if not base or base in (".", "~"):
            raise ValueError(f"base_dir {self.base_dir!r} must name a directory below $HOME or / (not the root)")
        object.__setattr__(self, "base_dir", base)

    # Paths: relative to the remote $HOME unless ``base_dir`` is absolute.
    @property
    def job_dir(self) -> str:
        return f"{self.base_dir}/{self.job_id}"

    @property
    def log_path(self) -> str:
        return f"{self.job_dir}/log"

    @property
    def pid_path(self) -> str:
        return f"{self.job_dir}/pid"

    @property
    def exit_code_path(self) -> str:
        return f"{self.job_dir}/exit_code"

    @property
    def script_path(self) -> str:
        return f"{self.job_dir}/job.sh"

    @property
    def launched_path(self) -> str:
        return f"{self.job_dir}/launched"

    @property
    def killed_path(self) -> str:
        return f"{self.job_dir}/killed"

    def shell_path(self, path: str) -> str:
        """Shell word for one of this job's paths (``"$HOME"/'...'`` when relative)."""
        return shell_path(path, relative_to_home=True)

    def to_dict(self) -> dict[str, str]:
        """JSON-serialisable handle; the path keys are informative (``from_dict`` derives them again)."""
        return {
            "job_id": self.job_id,
            "base_dir": self.base_dir,
            "job_dir": self.job_dir,
            "log_path": self.log_path,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemoteJob:
        if not isinstance(data, Mapping) or "job_id" not in data:
            raise ValueError(f"Not a remote job handle: {data!r}")
        return cls(job_id=str(data["job_id"]), base_dir=str(data.get("base_dir") or DEFAULT_BASE_DIR))
