"""Unit tests of ``airflow_provider_brev/triggers/brev.py``."""

from __future__ import annotations

from airflow_provider_brev.core.jobs.follower import FollowPolicy
from unit.job_runner_helpers import JOB, NAME, START


def test_the_trigger_follows_with_the_policy_the_worker_uses():
    from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger

    policy = FollowPolicy(
        poll_interval=0.5,
        max_bytes=1234,
        max_poll_failures=7,
        deadline=START,
        progress_regex="x",
        sync_interval=30.0,
        checkpoint_regex="ckpt",
    )
    trigger = BrevRemoteJobTrigger.for_policy(instance_name=NAME, job=JOB.to_dict(), policy=policy)
    assert trigger.policy == policy
    _, kwargs = trigger.serialize()
    assert BrevRemoteJobTrigger(**kwargs).policy == policy
