"""The pure rules of Lepton steps (airflow_provider_brev/core/lepton/): names, phases, the job body, what an API
answer means, and the follower machine run through the sync driver with scripted answers."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_brev.core.jobs.attempts import COLLECT, IGNORE, REATTACH, RELAUNCH, SUPERSEDED
from airflow_provider_brev.core.lepton import agent, names, report, spec, states
from airflow_provider_brev.core.lepton.errors import api_error
from airflow_provider_brev.core.lepton.follower import (
    TIMED_OUT,
    LeptonFollowPolicy,
    LeptonJobFollower,
    LeptonJobPoll,
    PollLeptonJob,
    StopLeptonJob,
    outcome_error,
)
from airflow_provider_brev.exceptions import (
    BrevInvalidInputError,
    BrevTimeoutError,
    LeptonAuthError,
    LeptonJobExistsError,
    LeptonJobFailedError,
    LeptonJobLostError,
    LeptonNotFoundError,
    LeptonRejectedError,
    LeptonResourcesUnavailableError,
    LeptonTransientError,
    retry_policy,
)
from airflow_provider_brev.hooks.driver import drive

IDS = {"dag_id": "d", "task_id": "t", "run_id": "manual__x"}


def test_job_names_are_per_try_valid_and_stable():
    first, second = (names.job_name(try_number=n, **IDS) for n in (1, 2))
    assert first != second and first[:-1] == second[:-1]
    assert names.job_name(try_number=1, **IDS) == first  # deterministic
    for name in (first, names.job_name(try_number=10**9, **IDS)):
        assert len(name) <= names.MAX_JOB_NAME_LENGTH and name[0].isalpha() and name == name.lower()
    earlier = names.earlier_jobs(try_number=3, first_try=2, **IDS)
    assert [(job.try_number, job.collectable) for job in earlier] == [(2, True), (1, False)]
    assert names.secret_name(first).startswith(names.SECRET_PREFIX) and "-" not in names.secret_name(first)


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


def test_the_job_body_references_secrets_by_name_only():
    job = spec.lepton_job_spec(
        {
            "lepton_conn_id": "lepton_default",
            "resource_shape": "gpu.8xh100-sxm",
            "node_groups": ["h100-pool"],
            "priority": "high",
            "image_pull_secrets": "ngc",
            "secret_refs": {"HF_TOKEN": "MY_HF_TOKEN"},
            "queue_timeout": 60,
        }
    )
    body = job.body(
        name="af-x-t1", image="nvcr.io/x:1", command=["bash"], secret_env_refs={"PLAN": "S1"}, env={"A": "b"}
    )
    assert body["metadata"]["id"] == "af-x-t1"
    assert body["spec"]["affinity"] == {"allowed_dedicated_node_groups": ["h100-pool"]}
    assert body["spec"]["queue_config"] == {"priority_class": "high-7000"}
    assert body["spec"]["image_pull_secrets"] == ["ngc"]
    assert body["spec"]["envs"] == [
        {"name": "A", "value": "b"},
        {"name": "HF_TOKEN", "value_from": {"secret_name_ref": "MY_HF_TOKEN"}},
        {"name": "PLAN", "value_from": {"secret_name_ref": "S1"}},
    ]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"resource_shape": "H100"}, "resource_shape"),
        ({"resource_shape": "cpu.small", "priority": "urgent"}, "priority"),
        ({"resource_shape": "cpu.small", "priority": "high"}, "node_groups"),
        ({"resource_shape": "cpu.small", "max_failure_retry": -1}, "max_failure_retry"),
        ({"resource_shape": "cpu.small", "secret_refs": {"A": "bad name"}}, "secret_refs"),
    ],
)
def test_bad_platform_parameters_are_refused_by_name(params, words):
    with pytest.raises(BrevInvalidInputError, match=words):
        spec.lepton_job_spec({"lepton_conn_id": "lepton_default", **params})


@pytest.mark.parametrize(
    ("status", "body", "error", "policy"),
    [
        (None, "ConnectionError", LeptonTransientError, "hook"),
        (401, "", LeptonAuthError, "task"),
        (403, "forbidden", LeptonAuthError, "task"),
        (403, "workspace quota exceeded for gpu.8xh100-sxm", LeptonResourcesUnavailableError, "task"),
        (404, "not found", LeptonNotFoundError, "task"),
        (409, "exists", LeptonJobExistsError, "task"),
        (400, "unknown resource shape", LeptonRejectedError, "never"),
        (429, "slow down", LeptonTransientError, "hook"),
        (503, "unavailable", LeptonTransientError, "hook"),
    ],
)
def test_api_answers_become_typed_errors(status, body, error, policy):
    err = api_error(status, body, what="create job j", workspace="ws")
    assert type(err) is error and retry_policy(err) == policy
    secret_body = api_error(400, "echo s3cr3t", what="create secret S", workspace="ws", quotable=False)
    assert "s3cr3t" not in str(secret_body)


def test_the_agent_and_the_reader_share_the_result_marker():
    assert f'RESULT_MARKER = "{report.RESULT_MARKER}"' in agent.agent_source()
    line = report.render_result(report.JobReport(exit_code=3, uploaded=2, report=["BREV_TAO_END"]))
    assert report.parse_result(line) == report.JobReport(exit_code=3, uploaded=2, report=["BREV_TAO_END"])
    assert report.parse_result(report.RESULT_MARKER + "!!") is None
    plan = {"inputs": [{"url": "u", "path": "p", "size": 1}]}
    assert agent.decode_plan(agent.encode_plan(plan)) == plan
    with pytest.raises(BrevInvalidInputError, match="relative"):
        agent.job_directory("inputs", "/etc")


def job(state):
    return {"status": {"state": state}}


class Script:
    """Answers for the follower's calls, in order; records the calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, action):
        self.calls.append(action)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def follow(script, policy=None, clock=None, **kwargs):
    machine = LeptonJobFollower(policy or LeptonFollowPolicy(poll_interval=1.0), job="j", since_ns=100, **kwargs)
    now = [1000.0]

    def sleep(seconds):
        now[0] += seconds

    log = logging.getLogger("test-lepton")
    return machine, drive(machine, script, log=log, clock=clock or (lambda: now[0]), sleep=sleep)


def test_the_follower_shows_each_line_once_and_reads_the_result():
    done = report.render_result(report.JobReport(exit_code=0))
    script = Script(
        LeptonJobPoll(job("Running"), [(100, "a"), (100, "b")]),
        LeptonJobPoll(job("Running"), [(100, "a"), (100, "b"), (100, "c"), (200, "d")]),
        LeptonJobPoll(job("Completed"), [(200, "d"), (300, done)]),
    )
    _machine, outcome = follow(script)
    assert outcome.phase == states.SUCCEEDED and outcome.report == report.JobReport(exit_code=0)
    assert outcome.tail == ["a", "b", "c", "d"] and outcome.last_line == "d"
    assert [call.since_ns for call in script.calls] == [100, 100, 200]
    assert outcome_error(outcome, "j") is None


def test_a_job_queued_past_its_limit_is_stopped_and_fails_typed():
    script = Script(*[LeptonJobPoll(job("Queueing"))] * 4, True)
    with pytest.raises(LeptonResourcesUnavailableError, match="queue_timeout"):
        follow(script, LeptonFollowPolicy(poll_interval=1.0, queue_timeout=2.5))
    assert isinstance(script.calls[-1], StopLeptonJob) and len(script.calls) == 5


def test_the_deadline_stops_the_job_and_times_out():
    running = [LeptonJobPoll(job("Running"))] * 3  # at 1000, 1001 and at the deadline (the wait is clamped to it)
    script = Script(*running, True, *[LeptonJobPoll(job("Stopped"))] * 4)
    _machine, outcome = follow(script, LeptonFollowPolicy(poll_interval=1.0, deadline=1001.5))
    assert isinstance(script.calls[3], StopLeptonJob)
    assert outcome.phase == TIMED_OUT and isinstance(outcome_error(outcome, "j"), BrevTimeoutError)


def test_transient_failures_have_a_budget_and_auth_errors_end_at_once():
    flaky = LeptonTransientError("503")
    done = report.render_result(report.JobReport(exit_code=0))
    _m, outcome = follow(Script(flaky, flaky, LeptonJobPoll(job("Completed"), [(101, done)])))
    assert outcome.phase == states.SUCCEEDED
    with pytest.raises(LeptonTransientError):
        follow(Script(flaky, flaky), LeptonFollowPolicy(poll_interval=1.0, max_poll_failures=1))
    with pytest.raises(LeptonAuthError):
        follow(Script(LeptonAuthError("401")))


def test_ends_without_a_result_are_typed():
    _m, failed = follow(Script(*[LeptonJobPoll(job("Failed"), [(101, "Error: image pull")])] * 4))
    assert isinstance(outcome_error(failed, "j"), LeptonJobFailedError) and "image pull" in str(
        outcome_error(failed, "j")
    )
    _m, gone = follow(Script(LeptonJobPoll(None)))
    assert isinstance(outcome_error(gone, "j"), LeptonJobLostError)
    assert isinstance(PollLeptonJob(1), PollLeptonJob)


def test_the_trigger_serialises_declaratively_with_its_absolute_deadline():
    import json

    from airflow_provider_brev.triggers.lepton import LeptonJobTrigger

    trigger = LeptonJobTrigger(
        job="af-x-t1", since_ns=5, deadline=100.0, queue_timeout=60, try_number=2, secret="S1", not_before=1.0
    )
    path, kwargs = trigger.serialize()
    assert path == "airflow_provider_brev.triggers.lepton.LeptonJobTrigger"
    assert LeptonJobTrigger(**kwargs).serialize() == (path, kwargs)  # a restarted triggerer resumes the same follow
    assert kwargs["deadline"] == 100.0 and kwargs["since_ns"] == 5
    assert set(json.loads(json.dumps(kwargs))) == {*LeptonJobTrigger.serialized_fields, "not_before"}
