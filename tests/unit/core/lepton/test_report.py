"""Unit tests of ``airflow_provider_brev/core/lepton/report.py``."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.lepton import agent, report, states
from airflow_provider_brev.core.lepton.follower import LeptonFollowPolicy, LeptonJobPoll
from airflow_provider_brev.core.protocol.machine import Done
from airflow_provider_brev.exceptions import BrevInvalidInputError, LeptonAuthError, LeptonTransientError
from unit.core.lepton.follower_helpers import DONE, logs, poll, run
from unit.core.lepton.script_helpers import Script, follow, job


# -- the log: each line once, the result line read, not shown ----------------------------------------------------
@pytest.mark.parametrize(
    ("answers", "shown", "cursor"),
    [
        ([poll("Completed", [(100, "a"), (100, "b"), (100, DONE)])], ["a", "b"], (100, 3)),
        (
            [poll("Running", [(100, "a"), (200, "b")]), poll("Completed", [(200, "b"), (200, "c"), (300, DONE)])],
            ["a", "b", "c"],
            (300, 1),
        ),
        (
            [
                poll("Running", [(100, "a"), (200, "b"), (200, "c")]),
                poll("Completed", [(200, "b"), (200, "c"), (200, "d"), (300, DONE)]),
            ],
            ["a", "b", "c", "d"],
            (300, 1),
        ),
        ([poll("Running", [(50, "old"), (100, "a")]), poll("Completed", [(100, "a"), (100, DONE)])], ["a"], (100, 2)),
        ([poll("Completed", [(100, "a\n"), (100, ""), (100, DONE)])], ["a", ""], (100, 3)),
    ],
)
def test_each_log_line_is_shown_once(answers, shown, cursor):
    machine, trace, end = run(answers)
    assert [m.removeprefix("[j] ") for m in logs(trace, "INFO")] == shown
    assert (machine.cursor_ns, machine.skip) == cursor
    assert isinstance(end, Done) and end.result.tail == shown and end.result.report == report.JobReport(exit_code=0)
    assert end.result.last_line == [line for line in shown if line][-1]  # an empty line is no last line


# -- report: the agent's result line -----------------------------------------------------------------------------
FULL = report.JobReport(exit_code=2, downloaded=4, uploaded=3, upload_failures=["a.txt"], report=["BREV_TAO_END"])


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (report.render_result(FULL), FULL),
        (report.render_result(FULL) + "\n", FULL),
        (report.render_result(report.JobReport(exit_code=0)), report.JobReport(exit_code=0)),
        ("AIRFLOW_LEPTON_RESULT eyJleGl0X2NvZGUiOiAxfQ==", report.JobReport(exit_code=1)),  # {"exit_code": 1}
        ("AIRFLOW_LEPTON_RESULTeyJleGl0X2NvZGUiOiAxfQ==", None),  # near miss: the marker ends with a space
        (" AIRFLOW_LEPTON_RESULT eyJleGl0X2NvZGUiOiAxfQ==", None),  # near miss: not at the line's start
        ("AIRFLOW_LEPTON_RESULT !!", None),  # not base64
        ("AIRFLOW_LEPTON_RESULT eyJleGl0X2Nv!ZGUiOiAxfQ==", None),  # damaged: base64 with a foreign character
        ("AIRFLOW_LEPTON_RESULT e30=", None),  # {}: no exit code
        ("AIRFLOW_LEPTON_RESULT WzFd", None),  # [1]: not an object
        ("AIRFLOW_LEPTON_RESULT bnVsbA==", None),  # null
        ("AIRFLOW_LEPTON_RESULT eyJleGl0X2NvZGUiOiAieCJ9", None),  # {"exit_code": "x"}
        ("AIRFLOW_LEPTON_RESULT //79", None),  # not UTF-8 JSON
        ("[airflow-lepton] downloaded 3 inputs", None),
    ],
)
def test_result_lines(line, parsed):
    assert report.parse_result(line) == parsed


def test_a_report_round_trips_through_a_trigger_event():
    assert report.report_from_dict(FULL.to_dict()) == FULL
    assert FULL.to_dict() == {
        "exit_code": 2,
        "downloaded": 4,
        "uploaded": 3,
        "upload_failures": ["a.txt"],
        "report": ["BREV_TAO_END"],
    }
    assert report.report_from_dict({"exit_code": "5"}) == report.JobReport(exit_code=5)
    assert report.report_from_dict({"downloaded": 1}) is None
    assert report.report_from_dict(None) is None
    assert report.report_from_dict([("exit_code", 1)]) is None  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        FULL.exit_code = 0  # type: ignore[misc]


def test_the_agent_and_the_reader_share_the_result_marker():
    assert f'RESULT_MARKER = "{report.RESULT_MARKER}"' in agent.agent_source()
    line = report.render_result(report.JobReport(exit_code=3, uploaded=2, report=["BREV_TAO_END"]))
    assert report.parse_result(line) == report.JobReport(exit_code=3, uploaded=2, report=["BREV_TAO_END"])
    assert report.parse_result(report.RESULT_MARKER + "!!") is None
    plan = {"inputs": [{"url": "u", "path": "p", "size": 1}]}
    assert agent.decode_plan(agent.encode_plan(plan)) == plan
    with pytest.raises(BrevInvalidInputError, match="relative"):
        agent.job_directory("inputs", "/etc")


def test_transient_failures_have_a_budget_and_auth_errors_end_at_once():
    flaky = LeptonTransientError("503")
    done = report.render_result(report.JobReport(exit_code=0))
    _m, outcome = follow(Script(flaky, flaky, LeptonJobPoll(job("Completed"), [(101, done)])))
    assert outcome.phase == states.SUCCEEDED
    with pytest.raises(LeptonTransientError):
        follow(Script(flaky, flaky), LeptonFollowPolicy(poll_interval=1.0, max_poll_failures=1))
    with pytest.raises(LeptonAuthError):
        follow(Script(LeptonAuthError("401")))
