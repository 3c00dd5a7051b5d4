"""Test helpers shared by ``core/lepton/test_follower.py``, ``core/lepton/test_report.py`` (one definition, imported by
each)."""

from __future__ import annotations

import logging

from airflow_provider_brev.core.lepton.follower import LeptonFollowPolicy, LeptonJobFollower
from airflow_provider_brev.hooks.driver import drive


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
