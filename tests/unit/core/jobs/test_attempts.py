"""Which job a try follows: the pure rules of :mod:`airflow_provider_brev.core.jobs.attempts`.

A retry never runs again what an earlier try of the same generation finished successfully or still runs; a task a
user cleared runs its command again. End to end (the simulator, real retries): tests/integration/test_retry_safety.py.
"""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.jobs.attempts import (
    COLLECT,
    IGNORE,
    REATTACH,
    RELAUNCH,
    SUPERSEDED,
    EarlierJob,
    earlier_job_verdict,
    earlier_jobs,
    generation_start,
    try_job_ids,
)
from airflow_provider_brev.core.jobs.remote import FINISHED, LOST, MISSING, RUNNING, PollResult
from unit.core.jobs.follower_helpers import _poll

IDS = {"dag_id": "d", "task_id": "t", "run_id": "r"}


def test_try_job_ids_are_this_try_then_earlier_ones():
    ids = try_job_ids(try_number=3, **IDS)
    assert [i.rsplit("-t", 1)[1] for i in ids] == ["3", "2", "1"]
    assert len({i.rsplit("-t", 1)[0] for i in ids}) == 1


@pytest.mark.parametrize(
    ("try_number", "max_tries", "retries", "first"),
    [
        (1, 2, 2, 1),  # never cleared: max_tries == retries
        (3, 2, 2, 1),  # the last retry of the first generation
        (4, 5, 2, 4),  # cleared after try 3 (max_tries = 3 + 2): tries 4.. are the new generation
        (5, 5, 2, 4),  # ... and its retry still collects try 4's work
        (2, 1, 0, 2),  # cleared after try 1 with no retries: try 2 stands alone
        (1, 0, 0, 1),
        (3, None, 2, 1),  # unknown max_tries: every try counts as one generation
        (3, 2, None, 1),
        (3, -1, 2, 1),  # the server default of max_tries
        (2, 9, 0, 2),  # never later than this try
    ],
)
def test_the_generation_starts_where_airflow_last_cleared_the_task(try_number, max_tries, retries, first):
    assert generation_start(try_number=try_number, max_tries=max_tries, retries=retries) == first


def test_earlier_jobs_are_newest_first_and_collectable_only_in_this_generation():
    jobs = earlier_jobs(try_number=5, first_try=4, **IDS)
    ids = try_job_ids(try_number=5, **IDS)
    assert jobs == [
        EarlierJob(ids[1], 4, collectable=True),
        EarlierJob(ids[2], 3, collectable=False),
        EarlierJob(ids[3], 2, collectable=False),
        EarlierJob(ids[4], 1, collectable=False),
    ]
    assert earlier_jobs(try_number=1, first_try=1, **IDS) == []


@pytest.mark.parametrize(
    ("poll", "verdict"),
    [
        (_poll("running"), REATTACH),
        (_poll("finished", rc=0), COLLECT),
        (_poll("finished", rc=2), RELAUNCH),
        (_poll("lost"), RELAUNCH),
        (_poll("missing", rc=0), IGNORE),
    ],
)
def test_what_an_earlier_try_means(poll, verdict):
    assert earlier_job_verdict(poll) == verdict


@pytest.mark.parametrize(
    ("state", "exit_code", "collectable", "verdict"),
    [
        (RUNNING, None, True, REATTACH),
        (RUNNING, None, False, REATTACH),  # a running job is never started a second time, whatever generation
        (FINISHED, 0, True, COLLECT),
        (FINISHED, 0, False, SUPERSEDED),  # the task was cleared since: run the command again
        (FINISHED, 1, True, RELAUNCH),
        (FINISHED, 1, False, RELAUNCH),
        (FINISHED, None, True, RELAUNCH),
        (LOST, None, True, RELAUNCH),
        (MISSING, None, True, IGNORE),
        (MISSING, None, False, IGNORE),
    ],
)
def test_earlier_job_verdicts(state, exit_code, collectable, verdict):
    poll = PollResult(state=state, exit_code=exit_code, log_size=0, pid=None)
    assert earlier_job_verdict(poll, collectable=collectable) == verdict
