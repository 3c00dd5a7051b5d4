"""Which remote job a try of a task follows: its own, or one an earlier try left on the instance (pure).

Job ids are deterministic per try (:func:`~airflow_provider_brev.core.jobs.handle.generate_job_id`), so a try can
look on the instance for the jobs of every earlier try, whatever Airflow lost in between (XCom is cleared on a retry,
the task state store can fail, a scheduler race can fail a try whose job succeeded). What an earlier try's job means
for this one is :func:`earlier_job_verdict`:

* still running: re-attach, never launch a second one -- whichever try started it;
* finished successfully: collect its result instead of running the command again, **if** the earlier try belongs
  to this try's *generation* (the tries since the task instance was last cleared: :func:`generation_start`). A user
  who clears a task wants its command to run again; a retry wants the work that already succeeded;
* failed or lost: clean it up and launch this try's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.core.jobs.handle import FINISHED, LOST, RUNNING, generate_job_id

if TYPE_CHECKING:
    from airflow_provider_brev.core.jobs.remote import PollResult

#: What an earlier try's job means for this try (:func:`earlier_job_verdict`).
REATTACH = "reattach"
COLLECT = "collect"
RELAUNCH = "relaunch"
#: It succeeded in an earlier generation (before the task was cleared): clean it up and run the command again.
SUPERSEDED = "superseded"
IGNORE = "ignore"


@dataclass(frozen=True)
class EarlierJob:
    """A job an earlier try of this task instance may have left on the instance.

    :param job_id: its deterministic id.
    :param try_number: the try that launched it (``None`` when unknown: a handle from the task state store).
    :param collectable: its success may stand for this try's (same generation, see :func:`generation_start`).
    """

    job_id: str
    try_number: int | None
    collectable: bool


def generation_start(*, try_number: int, max_tries: int | None, retries: int | None) -> int:
    """The first try of this task instance since it was last cleared.

    Airflow sets ``max_tries = try_number + retries`` when a task instance is cleared, so the current generation
    starts at ``max_tries - retries + 1`` (the rule Airflow's own task runner uses for reschedules). Unknown values
    (an Airflow that does not expose them) count every try as one generation.

    :param try_number: this try (1-based).
    :param max_tries: the task instance's ``max_tries``.
    :param retries: the task's ``retries``.
    """
    if not isinstance(max_tries, int) or not isinstance(retries, int) or max_tries < 0 or retries < 0:
        return 1
    return min(max(max_tries - retries + 1, 1), max(int(try_number), 1))


def try_job_ids(*, dag_id: str, task_id: str, run_id: str, try_number: int, map_index: int = -1) -> list[str]:
    """Job ids of this try first, then of every earlier try, newest first."""
    return [
        generate_job_id(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number=number, map_index=map_index)
        for number in range(int(try_number), 0, -1)
    ]


def earlier_jobs(
    *, dag_id: str, task_id: str, run_id: str, try_number: int, first_try: int, map_index: int = -1
) -> list[EarlierJob]:
    """The jobs of every earlier try, newest first; those from ``first_try`` on (this generation) are collectable."""
    ids = try_job_ids(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number=try_number, map_index=map_index)
    numbers = range(int(try_number), 0, -1)
    return [
        EarlierJob(job_id, number, collectable=number >= first_try)
        for job_id, number in zip(ids, numbers, strict=True)
        if number != int(try_number)
    ]


def earlier_job_verdict(poll: PollResult, *, collectable: bool = True) -> str:
    """What to do about an earlier try's job, given a poll of it.

    :data:`REATTACH` while it runs (never launch twice); :data:`COLLECT` when it finished successfully and its try
    belongs to this generation; :data:`SUPERSEDED` when it finished successfully before the task was cleared (run
    the command again); :data:`RELAUNCH` when it failed or was lost (clean it up, launch this try's job);
    :data:`IGNORE` when it never existed.

    :param poll: a poll of the job.
    :param collectable: the job's try belongs to this try's generation (:func:`generation_start`).
    """
    if poll.state == RUNNING:
        return REATTACH
    if poll.state == FINISHED and poll.exit_code == 0:
        return COLLECT if collectable else SUPERSEDED
    if poll.state in (FINISHED, LOST):
        return RELAUNCH
    return IGNORE
