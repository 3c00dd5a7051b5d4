"""Following a Lepton job (airflow_provider_brev/core/lepton/follower.py), one scenario per row: the machine is run
by a driver that records every call, sleep and log record against a fake clock, so each row pins what the worker
and the triggerer do -- when they poll, how long they wait, when they stop the job and how the follow ends."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.lepton import follower, report, states
from airflow_provider_brev.core.lepton.follower import (
    TIMED_OUT,
    LeptonFollowPolicy,
    LeptonJobPoll,
    LeptonOutcome,
    PollLeptonJob,
    StopLeptonJob,
    outcome_error,
)
from airflow_provider_brev.core.lepton.report import JobReport
from airflow_provider_brev.core.protocol.machine import Done, Fail
from airflow_provider_brev.exceptions import (
    BrevTimeoutError,
    LeptonAuthError,
    LeptonJobFailedError,
    LeptonJobLostError,
    LeptonNotFoundError,
    LeptonResourcesUnavailableError,
    LeptonTransientError,
    LeptonTTLTooShortError,
)
from unit.core.lepton.follower_helpers import DONE, logs, poll, run
from unit.core.lepton.script_helpers import Script, follow, job

FLAKY = LeptonTransientError("503")


def calls(trace):
    """The trace without its log records."""
    return [step for step in trace if step[0] in ("poll", "stop", "sleep")]


def test_a_resumed_follower_skips_the_lines_it_showed_and_keeps_its_tail():
    answers = [poll("Completed", [(100, "a"), (100, "b"), (100, "c"), (200, DONE)])]
    _machine, trace, end = run(answers, skip=2, last_line="b", tail=["a", "b"])
    assert logs(trace, "INFO") == ["[j] c"]
    assert end.result.tail == ["a", "b", "c"] and end.result.last_line == "c"


def test_the_tail_keeps_the_last_40_lines():
    lines = [(100 + n, f"line {n}") for n in range(45)]
    _m, _t, end = run([poll("Completed", [*lines, (999, DONE)])])
    assert end.result.tail == [f"line {n}" for n in range(5, 45)]


def test_progress_bars_are_squashed_and_known_secret_fragments_redacted():
    """As a Brev job's lines: a progress bar's ``\\r`` updates shown as a terminal ends them; the worker's fragments
    redacted before (a trigger knows none: the job's agent redacted them)."""
    lines = [(100, "epoch 1: 10%\repoch 1: 50%\repoch 1: 100%"), (101, "key=s3cr3t-value\r"), (102, "tail s3cr3t")]
    _m, trace, end = run([poll("Completed", [*lines, (200, DONE)])], redact_fragments=["s3cr3t-value", "s3cr3t"])
    assert logs(trace, "INFO") == ["[j] epoch 1: 100%", "[j] key=***", "[j] tail ***"]
    assert end.result.tail == ["epoch 1: 100%", "key=***", "tail ***"] and end.result.last_line == "tail ***"


def test_an_outcome_is_redacted_for_xcom_and_errors():
    outcome = LeptonOutcome(
        "failed", "Failed", "pem line ABCDEFG", ["x", "pem line ABCDEFG"], report.JobReport(3, report=["k ABCDEFG"])
    )
    redacted = outcome.redacted(["ABCDEFG"])
    assert (redacted.last_line, redacted.tail, redacted.report.report) == (
        "pem line ***",
        ["x", "pem line ***"],
        ["k ***"],
    )
    assert outcome.last_line == "pem line ABCDEFG"  # a copy


@pytest.mark.parametrize(
    ("poll_interval", "settle", "floor"),
    [(5.0, 0.0, 71), (5.0, 10.0, 81), (0.2, 0.0, 61), (1.0, 0.0, 64), (30.0, 10.0, 106), (600.0, 0.0, 666)],
)
def test_the_ttl_floor_covers_a_poll_the_log_drain_the_deferral_and_a_margin(poll_interval, settle, floor):
    assert follower.ttl_floor(poll_interval, deferral_settle=settle) == floor
    follower.check_ttl(floor, poll_interval=poll_interval, deferral_settle=settle)  # the floor itself is enough
    with pytest.raises(LeptonTTLTooShortError, match=f"at least {floor} ") as refused:
        follower.check_ttl(floor - 1, poll_interval=poll_interval, deferral_settle=settle)
    assert ("settling time" in str(refused.value)) == bool(settle)


def test_resume_state_is_what_a_trigger_needs():
    machine, _t, _e = run([poll("Queueing", [(100, "a"), (300, "b")]), poll(None)])
    assert machine.resume_state() == {
        "since_ns": 300,
        "skip": 1,
        "last_line": "b",
        "tail": ["a", "b"],
        "queued_since": 1000.0,
    }


# -- polling, the incomplete log, the drain after the end ---------------------------------------------------------
@pytest.mark.parametrize(
    ("answers", "policy", "expected"),
    [
        pytest.param(
            [poll("Running", [(100, "a")], complete=False), poll("Completed", [(100, "a"), (200, DONE)])],
            LeptonFollowPolicy(poll_interval=5.0),
            [("poll", 100), ("poll", 100)],
            id="a capped log answer is read on at once",
        ),
        pytest.param(
            [poll("Completed", complete=False), poll("Completed", [(200, DONE)])],
            LeptonFollowPolicy(poll_interval=5.0),
            [("poll", 100), ("poll", 100)],
            id="a capped answer of an ended job too",
        ),
        pytest.param(
            [poll("Starting"), poll("Running"), poll("Completed", [(200, DONE)])],
            LeptonFollowPolicy(poll_interval=5.0),
            [("poll", 100), ("sleep", 5.0), ("poll", 100), ("sleep", 5.0), ("poll", 100)],
            id="polls every poll_interval",
        ),
        pytest.param(
            [poll("Completed")] * 4,
            LeptonFollowPolicy(poll_interval=5.0),
            [
                ("poll", 100),
                ("sleep", 2.0),
                ("poll", 100),
                ("sleep", 2.0),
                ("poll", 100),
                ("sleep", 2.0),
                ("poll", 100),
            ],
            id="an end without the result line is read 3 more times, at most 2 s apart",
        ),
        pytest.param(
            [poll("Failed"), poll("Failed"), poll("Failed", [(200, DONE)])],
            LeptonFollowPolicy(poll_interval=1.0),
            [("poll", 100), ("sleep", 1.0), ("poll", 100), ("sleep", 1.0), ("poll", 100)],
            id="the drain ends with the result line",
        ),
        pytest.param(
            [poll(None)],
            LeptonFollowPolicy(poll_interval=1.0),
            [("poll", 100)],
            id="a missing job has no log to wait for",
        ),
    ],
)
def test_polls_and_waits(answers, policy, expected):
    _m, trace, end = run(answers, policy)
    assert calls(trace) == expected and isinstance(end, Done)


@pytest.mark.parametrize(
    ("state", "phase"),
    [("Completed", "succeeded"), ("Failed", "failed"), ("Stopped", "stopped"), ("Deleted", "stopped")],
)
def test_every_end_is_followed_to_its_outcome(state, phase):
    _m, trace, end = run([poll(state)] * 4)
    assert end.result.phase == phase and end.result.state == state and end.result.report is None
    assert len(calls(trace)) == 7


def test_a_missing_job_ends_at_once_with_no_state():
    _m, _t, end = run([poll(None)])
    assert (end.result.phase, end.result.state, end.result.last_line, end.result.tail) == ("missing", "", "", [])


def test_a_job_without_status_is_starting():
    _m, _t, end = run([LeptonJobPoll({"status": None}), LeptonJobPoll({}), poll("Completed", [(200, DONE)])])
    assert end.result.phase == "succeeded" and end.result.state == "Completed"


# -- transient failures: a budget, a growing back-off -------------------------------------------------------------
def test_transient_failures_back_off_up_to_30_s_and_reset_on_success():
    policy = LeptonFollowPolicy(poll_interval=12.0, max_poll_failures=3)
    answers = [FLAKY, FLAKY, FLAKY, poll("Running"), FLAKY, poll("Completed", [(200, DONE)])]
    _m, trace, end = run(answers, policy)
    assert calls(trace) == [
        ("poll", 100),
        ("sleep", 12.0),
        ("poll", 100),
        ("sleep", 24.0),
        ("poll", 100),
        ("sleep", 30.0),
        ("poll", 100),
        ("sleep", 12.0),
        ("poll", 100),
        ("sleep", 12.0),
        ("poll", 100),
    ]
    assert ("WARNING", "Following Lepton job j: transient failure 1/3 (503); retrying in 12.0 s.") in trace
    assert isinstance(end, Done)


@pytest.mark.parametrize(
    ("failures", "budget", "ends"),
    [(1, 1, Done), (2, 1, Fail), (3, 3, Done), (4, 3, Fail), (30, None, Done), (31, None, Fail)],
)
def test_the_budget_of_consecutive_transient_failures(failures, budget, ends):
    policy = LeptonFollowPolicy(poll_interval=0.5) if budget is None else LeptonFollowPolicy(0.5, budget)
    answers = [FLAKY] * failures + ([poll("Completed", [(200, DONE)])] if ends is Done else [])
    _m, trace, end = run(answers, policy)
    assert isinstance(end, ends)
    if ends is Fail:
        assert end.error is FLAKY and trace[-1][0] == "poll"  # no back-off after the last straw


def test_a_failure_that_is_not_transient_ends_the_follow_at_once():
    _m, trace, end = run([poll("Running"), LeptonAuthError("401")])
    assert isinstance(end, Fail) and isinstance(end.error, LeptonAuthError) and trace[-1] == ("poll", 100)


def test_the_default_policy_polls_every_5_s():
    assert (LeptonFollowPolicy().poll_interval, LeptonFollowPolicy().max_poll_failures) == (5.0, 30)
    _m, trace, _e = run([poll("Running"), poll("Completed", [(200, DONE)])], LeptonFollowPolicy())
    assert ("sleep", 5.0) in trace


# -- the deadline ------------------------------------------------------------------------------------------------
def test_the_deadline_clamps_the_wait_stops_the_job_and_times_out():
    policy = LeptonFollowPolicy(poll_interval=1.0, deadline=1002.5)
    answers = [poll("Running")] * 4 + [True] + [poll("Running"), poll("Stopped")] + [poll("Stopped")] * 3
    _m, trace, end = run(answers, policy)
    assert calls(trace) == [
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 0.5),
        ("poll", 100),
        ("stop",),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
    ]  # after the stop, no clamp to the deadline: the job is followed every poll_interval until it ended
    assert logs(trace, "WARNING") == [
        "Lepton job j reached its deadline: stopping it.",
        "Stopped Lepton job j (deadline).",
    ]
    assert end.result.phase == TIMED_OUT and end.result.state == "Stopped"


def test_a_deadline_already_past_waits_a_moment_at_least():
    policy = LeptonFollowPolicy(poll_interval=1.0, deadline=999.0)
    _m, trace, end = run([poll("Running"), LeptonAuthError("403")], policy)
    assert calls(trace) == [("poll", 100), ("stop",)] and end.result.phase == TIMED_OUT
    _m, trace, _e = run([poll("Starting"), poll("Completed", [(200, DONE)])], LeptonFollowPolicy(1.0, 30, 1000.01))
    assert calls(trace) == [("poll", 100), ("sleep", 0.05), ("poll", 100)]  # the clamp's floor


@pytest.mark.parametrize(
    ("stop_answer", "ends"),
    [
        pytest.param(LeptonAuthError("403"), TIMED_OUT, id="a stop the API refuses still times out"),
        pytest.param(False, TIMED_OUT, id="a job that ended before the stop"),
    ],
)
def test_a_stop_at_the_deadline(stop_answer, ends):
    policy = LeptonFollowPolicy(poll_interval=1.0, deadline=1000.0)
    answers = [poll("Running"), stop_answer] + ([poll("Stopped")] * 4 if stop_answer is False else [])
    _m, _t, end = run(answers, policy)
    assert isinstance(end, Done) and end.result.phase == ends


def test_a_refused_poll_after_the_deadline_stop_ends_the_follow():
    policy = LeptonFollowPolicy(poll_interval=1.0, deadline=1000.0)
    _m, _t, end = run([poll("Running"), True, LeptonNotFoundError("404")], policy)
    assert isinstance(end, Fail) and isinstance(end.error, LeptonNotFoundError)


def test_a_transient_stop_failure_is_retried():
    policy = LeptonFollowPolicy(poll_interval=1.0, deadline=1000.0)
    _m, trace, end = run([poll("Running"), FLAKY, True, *[poll("Stopped")] * 4], policy)
    assert calls(trace)[:4] == [("poll", 100), ("stop",), ("sleep", 1.0), ("stop",)]
    assert end.result.phase == TIMED_OUT


# -- the queue limit ---------------------------------------------------------------------------------------------
def test_a_job_queued_past_its_limit_is_stopped_and_fails_typed():
    policy = LeptonFollowPolicy(poll_interval=1.0, queue_timeout=2.5)
    _m, trace, end = run([poll("Queueing")] * 4 + [True], policy)
    assert calls(trace) == [
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 0.5),
        ("poll", 100),
        ("stop",),
    ]
    assert logs(trace, "INFO", "WARNING") == [
        "Lepton job j is queued, waiting for resources in its node group.",
        "Lepton job j waited 2 s in the queue: stopping it.",
        "Stopped Lepton job j (queue).",
    ]
    assert isinstance(end, Fail) and isinstance(end.error, LeptonResourcesUnavailableError)
    assert "queue_timeout (2 s)" in str(end.error)


def test_the_queue_clock_restarts_when_the_job_leaves_the_queue():
    policy = LeptonFollowPolicy(poll_interval=1.0, queue_timeout=1.5)
    answers = [poll("Queueing"), poll("Running"), poll("Awaiting"), poll("Completed", [(200, DONE)])]
    _m, trace, end = run(answers, policy)
    assert calls(trace) == [
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
    ]
    queued = "Lepton job j is queued, waiting for resources in its node group."
    assert logs(trace, "INFO").count(queued) == 2 and isinstance(end, Done)


def test_a_job_queued_without_a_limit_waits():
    answers = [poll("Queueing")] * 3 + [poll("Completed", [(200, DONE)])]
    _m, trace, end = run(answers, LeptonFollowPolicy(poll_interval=1.0, queue_timeout=None))
    assert (
        isinstance(end, Done)
        and logs(trace, "INFO").count("Lepton job j is queued, waiting for resources in its node group.") == 1
    )


def test_a_resumed_follower_keeps_its_queue_clock():
    policy = LeptonFollowPolicy(poll_interval=1.0, queue_timeout=10.0)
    _m, trace, end = run([poll("Queueing"), True], policy, queued_since=990.0)
    assert calls(trace) == [("poll", 100), ("stop",)] and isinstance(end, Fail)


def test_a_deadline_stop_stays_one_when_the_queue_limit_passes_later():
    policy = LeptonFollowPolicy(poll_interval=1.0, deadline=1001.0, queue_timeout=1.5)
    answers = [poll("Queueing"), poll("Queueing"), True, poll("Queueing"), poll("Queueing")] + [poll("Stopped")] * 4
    _m, trace, end = run(answers, policy)
    assert calls(trace) == [
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("stop",),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
        ("sleep", 1.0),
        ("poll", 100),
    ]  # once stopped, neither the deadline nor the queue limit shortens a wait
    assert isinstance(end, Done) and end.result.phase == TIMED_OUT


def test_a_refused_stop_at_the_queue_limit_fails_with_the_refusal():
    policy = LeptonFollowPolicy(poll_interval=1.0, queue_timeout=0.0)
    _m, trace, end = run([poll("Queueing"), LeptonAuthError("403")], policy)
    assert calls(trace) == [("poll", 100), ("stop",)]
    assert isinstance(end, Fail) and isinstance(end.error, LeptonAuthError)


# -- outcomes ----------------------------------------------------------------------------------------------------
TAIL = [f"l{n}" for n in range(12)]


@pytest.mark.parametrize(
    ("outcome", "error", "words"),
    [
        (LeptonOutcome(TIMED_OUT, "Stopped", "", [], None), BrevTimeoutError, "did not finish within its timeout"),
        (LeptonOutcome(TIMED_OUT, "Stopped", "", [], report.JobReport(0)), BrevTimeoutError, "was stopped"),
        (LeptonOutcome("failed", "Failed", "x", ["x"], report.JobReport(1)), None, ""),  # the workload judges
        (LeptonOutcome("succeeded", "Completed", "", [], report.JobReport(0)), None, ""),
        (LeptonOutcome("missing", "", "", [], None), LeptonJobLostError, "is gone"),
        (LeptonOutcome("stopped", "Stopped", "", [], None), LeptonJobLostError, "stopped by someone else (Stopped)"),
        (LeptonOutcome("failed", "Failed", "", [], None), LeptonJobFailedError, "exit code (Failed)."),
        (
            LeptonOutcome("failed", "Failed", "l11", TAIL, None),
            LeptonJobFailedError,
            "its log:\n" + "\n".join(TAIL[2:]),
        ),
        (LeptonOutcome("succeeded", "Completed", "", [], None), LeptonJobLostError, "without its result line"),
    ],
)
def test_what_an_outcome_means(outcome, error, words):
    err = outcome_error(outcome, "j")
    assert type(err) is error if error else err is None
    if error:
        assert words in str(err) and "l1\n" not in str(err)


@pytest.mark.parametrize(
    "outcome",
    [
        LeptonOutcome(
            "failed", "Failed", "boom", ["a", "boom"], report.JobReport(exit_code=3, uploaded=1), {"work": 2.5}
        ),
        LeptonOutcome("missing", "", "", [], None),
    ],
)
def test_an_outcome_round_trips_through_a_trigger_event(outcome):
    data = outcome.to_dict()
    assert set(data) == {"phase", "state", "last_line", "tail", "report", "seconds"}
    assert data["phase"] == outcome.phase and data["tail"] == outcome.tail and data["state"] == outcome.state
    assert data["last_line"] == outcome.last_line
    assert data["report"] == (outcome.report.to_dict() if outcome.report else None)
    assert LeptonOutcome.from_dict(data) == outcome
    assert outcome.exit_code == (outcome.report.exit_code if outcome.report else None)


def test_an_outcome_from_a_sparse_event():
    assert LeptonOutcome.from_dict({"phase": "missing"}) == LeptonOutcome("missing", "", "", [], None)


def test_polls_and_policies_are_frozen_values():
    for value, name in ((LeptonJobPoll(None), "complete"), (LeptonFollowPolicy(), "poll_interval")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, 1)
    assert follower.NS == 10**9 and follower.MAX_BACKOFF == 30.0
    assert {follower.SUCCEEDED} <= states.ENDED


# -- billed time: as the follower saw the job --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answers", "seconds"),
    [
        # queued (not billed), starting, running twice, ended: boot until running, work until ended
        (
            [poll("Queueing"), poll("Starting"), poll("Running"), poll("Running"), poll("Completed", [(200, DONE)])],
            {"boot": 1.0, "work": 2.0},
        ),
        ([poll("Running"), poll("Completed", [(200, DONE)])], {"work": 1.0}),
        ([poll("Starting"), poll("Failed", [(200, DONE)])], {"boot": 1.0}),
        ([poll("Completed", [(200, DONE)])], {}),  # first seen ended (an earlier try's job collected): none
    ],
)
def test_the_billed_time_is_what_the_follower_saw_starting_and_running(answers, seconds):
    _machine, _trace, end = run(answers, LeptonFollowPolicy(poll_interval=1.0))
    assert end.result.seconds == seconds
    assert LeptonOutcome.from_dict(end.result.to_dict()) == end.result  # it crosses a deferral


@pytest.mark.parametrize(
    ("outcome", "line"),
    [
        (
            LeptonOutcome("succeeded", "Completed", "", [], JobReport(0, 2, 3), {"boot": 1.25, "work": 60}),
            "Lepton job j ended (Completed, exit code 0) after 1.2 s starting, 60.0 s running; 2 input file(s) "
            "downloaded, 3 output file(s) uploaded.",
        ),
        (
            LeptonOutcome("failed", "Failed", "", [], JobReport(3, 0, 1, ["a.bin"]), {"work": 5}),
            "Lepton job j ended (Failed, exit code 3) after 5.0 s running; 0 input file(s) downloaded, 1 output "
            "file(s) uploaded, 1 failed.",
        ),
        (LeptonOutcome("missing", "", "", [], None), "Lepton job j ended (missing, no exit code reported)."),
        (LeptonOutcome("succeeded", "Completed", "", [], JobReport(0)), "Lepton job j ended (Completed, exit code 0)."),
    ],
)
def test_the_completion_line_says_how_the_job_ended(outcome, line):
    assert outcome.summary("j") == line


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


def test_a_job_queued_past_its_limit_is_stopped_and_fails_typed_when_followed():
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


def test_ends_without_a_result_are_typed():
    _m, failed = follow(Script(*[LeptonJobPoll(job("Failed"), [(101, "Error: image pull")])] * 4))
    assert isinstance(outcome_error(failed, "j"), LeptonJobFailedError) and "image pull" in str(
        outcome_error(failed, "j")
    )
    _m, gone = follow(Script(LeptonJobPoll(None)))
    assert isinstance(outcome_error(gone, "j"), LeptonJobLostError)
    assert isinstance(PollLeptonJob(1), PollLeptonJob)
