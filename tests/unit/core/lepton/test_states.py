"""Unit tests of ``airflow_provider_brev/core/lepton/states.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.jobs.attempts import COLLECT, IGNORE, REATTACH, RELAUNCH, SUPERSEDED
from airflow_provider_brev.core.lepton import states
from airflow_provider_brev.core.lepton.states import QUEUED


# -- states: every state of leptonai's LeptonJobState ------------------------------------------------------------
@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("Queueing", "queued"),
        ("Awaiting", "queued"),
        ("PendingRetry", "starting"),
        ("Starting", "starting"),
        ("Restarting", "starting"),
        ("Running", "running"),
        ("Completed", "succeeded"),
        ("Failed", "failed"),
        ("Stopped", "stopped"),
        ("Stopping", "stopped"),
        ("Deleting", "stopped"),
        ("Deleted", "stopped"),
        ("Terminating", "stopped"),
        ("Unknown", "unknown"),  # the SDK's own "Unknown": followed like a running job
        ("completed", "unknown"),  # near miss: states are case-sensitive
        ("Brand-New", "unknown"),
        ("", "starting"),  # no state yet: just submitted
    ],
)
def test_every_job_state_has_its_phase(state, phase):
    """The phase words are also what a trigger event and XCom carry (LeptonOutcome.to_dict)."""
    assert states.job_phase({"status": {"state": state}}) == phase


@pytest.mark.parametrize(
    ("job", "phase"),
    [
        (None, "missing"),
        ({}, "starting"),
        ({"status": None}, "starting"),
        ({"status": {}}, "starting"),
        ({"status": {"state": None}}, "starting"),
        ({"status": {"state": "Archived", "succeeded": 1}}, "succeeded"),  # completions default to 1
        ({"status": {"state": "Archived", "succeeded": 0}}, "failed"),
        ({"status": {"state": "Archived"}}, "failed"),  # no succeeded count: none succeeded
        ({"status": {"state": "Archived", "succeeded": None}, "spec": None}, "failed"),
        ({"status": {"state": "Archived", "succeeded": 1}, "spec": {"completions": None}}, "succeeded"),
        ({"status": {"state": "Archived", "succeeded": 1}, "spec": {"completions": 2}}, "failed"),
        ({"status": {"state": "Archived", "succeeded": 2}, "spec": {"completions": 2}}, "succeeded"),
        ({"status": {"state": "Archived", "succeeded": 3}, "spec": {"completions": 2}}, "succeeded"),
        ({"status": {"state": "archived", "succeeded": 1}}, "unknown"),  # near miss
    ],
)
def test_absent_and_archived_jobs(job, phase):
    assert states.job_phase(job) == phase


@pytest.mark.parametrize(
    ("phase", "collectable", "verdict"),
    [
        (QUEUED, True, REATTACH),
        (states.STARTING, True, REATTACH),
        (states.RUNNING, True, REATTACH),
        (states.UNKNOWN, True, REATTACH),
        (states.RUNNING, False, REATTACH),  # alive: never a second job, whatever its generation
        (states.SUCCEEDED, True, COLLECT),
        (states.SUCCEEDED, False, SUPERSEDED),
        (states.FAILED, True, RELAUNCH),
        (states.STOPPED, True, RELAUNCH),
        (states.MISSING, True, IGNORE),
    ],
)
def test_what_a_try_does_about_an_earlier_job(phase, collectable, verdict):
    assert states.earlier_job_verdict(phase, collectable=collectable) == verdict


def test_an_earlier_success_is_collected_by_default():
    assert states.earlier_job_verdict(states.SUCCEEDED) == COLLECT


@pytest.mark.parametrize(
    ("phase", "ended", "alive"),
    [
        (states.QUEUED, False, True),
        (states.STARTING, False, True),
        (states.RUNNING, False, True),
        (states.UNKNOWN, False, True),
        (states.SUCCEEDED, True, False),
        (states.FAILED, True, False),
        (states.STOPPED, True, False),
        (states.MISSING, True, False),
    ],
)
def test_a_phase_is_either_ended_or_alive(phase, ended, alive):
    assert (phase in states.ENDED, phase in states.ALIVE) == (ended, alive)


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("Queueing", states.QUEUED),
        ("Starting", states.STARTING),
        ("Running", states.RUNNING),
        ("Completed", states.SUCCEEDED),
        ("Failed", states.FAILED),
        ("Stopped", states.STOPPED),
        ("Deleted", states.STOPPED),
        ("Brand-New", states.UNKNOWN),
    ],
)
def test_job_phases(state, phase):
    assert states.job_phase({"status": {"state": state}}) == phase


def test_archived_jobs_and_earlier_try_verdicts():
    assert states.job_phase(None) == states.MISSING
    assert states.job_phase({"status": {"state": "Archived", "succeeded": 1}}) == states.SUCCEEDED
    assert states.job_phase({"status": {"state": "Archived", "succeeded": 0}}) == states.FAILED
    assert states.earlier_job_verdict(states.QUEUED) == REATTACH
    assert states.earlier_job_verdict(states.SUCCEEDED) == COLLECT
    assert states.earlier_job_verdict(states.SUCCEEDED, collectable=False) == SUPERSEDED
    assert states.earlier_job_verdict(states.FAILED) == RELAUNCH
    assert states.earlier_job_verdict(states.MISSING) == IGNORE
