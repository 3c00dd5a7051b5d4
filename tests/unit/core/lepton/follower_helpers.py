"""Test helpers shared by ``core/lepton/test_follower.py``, ``core/lepton/test_report.py`` (one definition, imported by
each)."""

from __future__ import annotations

import logging

from airflow_provider_brev.core.lepton import report
from airflow_provider_brev.core.lepton.follower import (
    LeptonFollowPolicy,
    LeptonJobFollower,
    LeptonJobPoll,
    PollLeptonJob,
    StopLeptonJob,
)
from airflow_provider_brev.core.protocol.machine import Emit, Failed, Sleep

DONE = report.render_result(report.JobReport(exit_code=0))


def job(state: str | None) -> dict[str, object]:
    return {"status": {"state": state}}


def poll(state: str | None = "Running", entries=(), complete: bool = True) -> LeptonJobPoll:
    return LeptonJobPoll(None if state is None else job(state), list(entries), complete)


def run(answers, policy: LeptonFollowPolicy | None = None, **kwargs):
    """Drive a follower (started at t=1000) with ``answers``; returns the trace and the end."""
    machine = LeptonJobFollower(policy or LeptonFollowPolicy(poll_interval=1.0), job="j", since_ns=100, **kwargs)
    answers, trace, now = list(answers), [], 1000.0
    while True:
        action = machine.next_action(now)
        if isinstance(action, Sleep):
            trace.append(("sleep", round(action.seconds, 3)))
            now += action.seconds
        elif isinstance(action, Emit):
            trace.append((logging.getLevelName(action.level), action.message))
        elif isinstance(action, PollLeptonJob | StopLeptonJob):
            trace.append(("poll", action.since_ns) if isinstance(action, PollLeptonJob) else ("stop",))
            answer = answers.pop(0)
            machine.receive(Failed(answer) if isinstance(answer, BaseException) else answer, now)
        else:
            assert answers == [], "the follow ended before every scripted answer was used"
            return machine, trace, action


def logs(trace, *levels):
    """The messages of the trace's log records of ``levels``."""
    return [step[1] for step in trace if step[0] in levels]
