"""Deterministic names of a task's Lepton jobs and secrets, one per try (pure).

A retry finds the jobs of every earlier try by name, whatever Airflow lost in between (XCom cleared on a retry, a
worker killed while its job ran): the rules of :mod:`airflow_provider_brev.core.jobs.attempts` (generations,
collect versus relaunch) apply to Lepton jobs as to Brev's detached jobs. A Lepton job name is at most 36
characters of ``[a-z0-9-]``, starting with a letter (the SDK's ``validate_job_name``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: The longest job name Lepton accepts.
MAX_JOB_NAME_LENGTH = 36
#: Every job the provider submits starts with it (and its secrets with :data:`SECRET_PREFIX`).
JOB_PREFIX = "af-"
SECRET_PREFIX = "AIRFLOW_LEPTON_"


@dataclass(frozen=True)
class TryJob:
    """A job a try of the task submits or submitted.

    :param name: its deterministic name (and id).
    :param try_number: the try that submits it.
    :param collectable: its success may stand for the current try's (the same generation).
    """

    name: str
    try_number: int
    collectable: bool


def task_key(*, dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """20 hex digits naming one task instance (the same for all its tries)."""
    text = "\x00".join((dag_id, task_id, run_id, str(map_index)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def job_name(*, dag_id: str, task_id: str, run_id: str, try_number: int, map_index: int = -1) -> str:
    """The job of one try: ``af-<task key>-t<try>`` (at most 36 characters for tries up to 10**10)."""
    number = int(try_number)
    if number < 1:
        raise ValueError(f"try_number must be at least 1, got {try_number!r}")
    name = f"{JOB_PREFIX}{task_key(dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)}-t{number}"
    if len(name) > MAX_JOB_NAME_LENGTH:
        raise ValueError(f"try_number {try_number} is too large for a Lepton job name")
    return name


def earlier_jobs(
    *, dag_id: str, task_id: str, run_id: str, try_number: int, first_try: int, map_index: int = -1
) -> list[TryJob]:
    """The jobs of every earlier try, newest first; those from ``first_try`` on (this generation, see
    :func:`~airflow_provider_brev.core.jobs.attempts.generation_start`) are collectable."""
    ids = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "map_index": map_index}
    return [
        TryJob(job_name(try_number=number, **ids), number, collectable=number >= first_try)  # type: ignore[arg-type]
        for number in range(int(try_number) - 1, 0, -1)
    ]


def secret_name(name: str) -> str:
    """The workspace secret that carries one job's plan (presigned URLs and secret values): upper case, ``_``."""
    return SECRET_PREFIX + name[len(JOB_PREFIX) :].upper().replace("-", "_")
