"""The pure rules of Lepton steps, one row per case (airflow_provider_brev/core/lepton/): what every job state of
the leptonai API means, what every API answer means, the names of a task's jobs and secrets, the container's command
and plan, a TAO action's command and the agent's result line. Each rule has a row that meets it and a near miss."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.lepton import names

IDS = {"dag_id": "d", "task_id": "t", "run_id": "manual__x"}


# -- names: one job and one secret per try -----------------------------------------------------------------------
def test_a_task_key_is_stable_across_releases():
    """A retry after an upgrade finds the earlier try's job by this name: the key never changes."""
    assert names.task_key(**IDS) == "863c2170134f4797b07d"
    assert names.task_key(**IDS, map_index=-1) == "863c2170134f4797b07d"
    assert names.task_key(**IDS, map_index=3) == "af01dc1f53fa3bd4476d"


@pytest.mark.parametrize(
    ("try_number", "name"),
    [
        (1, "af-863c2170134f4797b07d-t1"),
        ("2", "af-863c2170134f4797b07d-t2"),
        (10**10, "af-863c2170134f4797b07d-t10000000000"),  # 36 characters: the longest Lepton accepts
    ],
)
def test_job_names(try_number, name):
    assert names.job_name(**IDS, try_number=try_number) == name
    assert names.job_name(**IDS, try_number=try_number, map_index=-1) == name


@pytest.mark.parametrize(("try_number", "words"), [(0, "at least 1"), (-1, "at least 1"), (10**11, "too large")])
def test_impossible_job_names_are_refused(try_number, words):
    with pytest.raises(ValueError, match=words):
        names.job_name(**IDS, try_number=try_number)


def test_the_longest_job_name_is_36():
    assert names.MAX_JOB_NAME_LENGTH == 36  # the SDK's validate_job_name


@pytest.mark.parametrize(
    ("try_number", "first_try", "earlier"),
    [
        (1, 1, []),
        (2, 1, [(1, True)]),
        (3, 2, [(2, True), (1, False)]),
        (4, 4, [(3, False), (2, False), (1, False)]),
        (3, 1, [(2, True), (1, True)]),
    ],
)
def test_earlier_jobs_newest_first_with_their_generation(try_number, first_try, earlier):
    jobs = names.earlier_jobs(**IDS, try_number=try_number, first_try=first_try)
    assert [(job.try_number, job.collectable) for job in jobs] == earlier
    assert [job.name for job in jobs] == [names.job_name(**IDS, try_number=n, map_index=-1) for n, _ in earlier]


def test_earlier_jobs_of_a_mapped_task_are_its_own():
    [job] = names.earlier_jobs(**IDS, try_number=2, first_try=1, map_index=3)
    assert job.name == "af-af01dc1f53fa3bd4476d-t1"


def test_a_try_job_is_a_frozen_value():
    job = names.TryJob("af-x-t1", 1, collectable=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("job", "secret"),
    [
        ("af-863c2170134f4797b07d-t1", "AIRFLOW_LEPTON_863C2170134F4797B07D_T1"),
        ("af-ab-t12", "AIRFLOW_LEPTON_AB_T12"),
    ],
)
def test_a_jobs_secret_name(job, secret):
    assert names.secret_name(job) == secret


def test_job_names_are_per_try_valid_and_stable():
    first, second = (names.job_name(try_number=n, **IDS) for n in (1, 2))
    assert first != second and first[:-1] == second[:-1]
    assert names.job_name(try_number=1, **IDS) == first  # deterministic
    for name in (first, names.job_name(try_number=10**9, **IDS)):
        assert len(name) <= names.MAX_JOB_NAME_LENGTH and name[0].isalpha() and name == name.lower()
    earlier = names.earlier_jobs(try_number=3, first_try=2, **IDS)
    assert [(job.try_number, job.collectable) for job in earlier] == [(2, True), (1, False)]
    assert names.secret_name(first).startswith(names.SECRET_PREFIX) and "-" not in names.secret_name(first)
