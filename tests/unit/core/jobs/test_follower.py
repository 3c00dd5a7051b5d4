"""The follower's first poll (core/jobs/follower.py): read at once on a worker, wait on the instance in the
triggerer (one poll at the start, not two); and a process that could not start never spends the failure budget."""

from __future__ import annotations

import errno

from airflow_provider_brev.core.jobs.follower import FollowPolicy, JobFollower, PollJob
from airflow_provider_brev.core.jobs.remote import PollResult
from airflow_provider_brev.core.protocol.machine import Failed, Sleep
from airflow_provider_brev.core.protocol.spawn import start_error


def test_the_first_poll_reads_at_once_unless_it_holds_like_the_later_ones():
    policy = FollowPolicy(poll_interval=5.0)
    assert JobFollower(policy, instance_name="box", job_id="j").next_action(100.0) == PollJob(0, policy.max_bytes, 0.0)
    held = JobFollower(policy, instance_name="box", job_id="j", hold_first=True)
    assert held.next_action(100.0) == PollJob(0, policy.max_bytes, 5.0)
    long = JobFollower(FollowPolicy(poll_interval=60.0), instance_name="box", job_id="j", hold_first=True)
    assert long.next_action(100.0).wait == 10.0  # MAX_POLL_WAIT: the rest on the driver, as later


def test_the_held_first_poll_is_cut_short_by_the_deadline():
    policy = FollowPolicy(poll_interval=5.0, deadline=102.0)
    follower = JobFollower(policy, instance_name="box", job_id="j", hold_first=True)
    assert follower.next_action(100.0).wait == 2.0


def test_start_failures_back_off_and_never_spend_the_budget():
    follower = JobFollower(FollowPolicy(poll_interval=2.0, max_poll_failures=0), instance_name="box", job_id="j")
    error = start_error("/usr/bin/brev", errno.EMFILE, "Too many open files")
    waits = []
    for _ in range(3):
        assert isinstance(follower.next_action(0.0), PollJob)
        follower.receive(Failed(error), 0.0)
        while not isinstance(action := follower.next_action(0.0), Sleep):
            pass  # the warning
        waits.append(action.seconds)
    assert waits == [2.0, 4.0, 6.0] and follower.failures == 0
    follower.next_action(0.0)
    follower.receive(PollResult(state="finished", exit_code=0, log_size=0, pid=None), 0.0)
    assert follower.start_failures == 0
