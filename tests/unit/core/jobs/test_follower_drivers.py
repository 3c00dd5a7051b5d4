"""The one job runner: its sync (worker) and async (triggerer) drivers make the same decisions.

The subject is :class:`~airflow_provider_brev.jobs.runner.JobRunner` and the pure
:class:`~airflow_provider_brev.core.jobs.follower.JobFollower` behind it. The hook is replaced by a small model of
one remote job (its log grows per poll, it finishes, is lost or is killed, some polls drop the connection), and
the clock by a fake one that ``sleep`` advances, so deadlines are exact and nothing really sleeps. Each scenario
runs through both drivers against the same model; calls, sleeps, log records and outcome must be identical. The
end-to-end behaviour against the simulator is in tests/integration/test_exec_dags.py and tests/integration/chaos.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from airflow_provider_brev.core.jobs.follower import (
    MAX_BACKOFF,
    SYNC_DUE,
    TIMED_OUT,
    FollowPolicy,
    JobFollower,
    JobOutcome,
    KillJob,
    PollJob,
    Synced,
    SyncOutputs,
    outcome_error,
)
from airflow_provider_brev.core.jobs.remote import (
    FINISHED,
    LOST,
    MISSING,
    RUNNING,
    PollResult,
)
from airflow_provider_brev.core.protocol.machine import Failed, Sleep
from airflow_provider_brev.exceptions import (
    BrevConnectionLostError,
    BrevJobLostError,
    BrevTimeoutError,
)
from airflow_provider_brev.jobs.runner import JobRunner
from unit.job_runner_helpers import JOB, NAME, SCENARIOS, START, FakeClock, FakeJobHook, Records, drive, lines_of
from unit.machine_steps import step


def test_deadline_kills_once_at_the_deadline_then_drains():
    result = drive(SCENARIOS[5], "sync")
    kills = [call for call in result["calls"] if call[0] == "kill"]
    assert kills == [("kill", START + 7.5)]  # the wait before it was cut short to the deadline
    assert result["calls"][-1][0] == "poll"  # the log was read after the kill
    assert (logging.WARNING, f"Deadline passed: killing job {JOB.job_id} on {NAME}.") in result["records"]
    assert isinstance(outcome_error(result["outcome"], NAME, JOB.job_id), BrevTimeoutError)


def test_the_machine_refuses_answers_out_of_turn():
    machine = JobFollower(FollowPolicy(), instance_name=NAME, job_id=JOB.job_id)
    action = machine.next_action(START)
    assert action == PollJob(0, FollowPolicy().max_bytes)
    with pytest.raises(RuntimeError, match="still waiting"):
        machine.next_action(START)
    with pytest.raises(RuntimeError, match="KillJob"):
        machine.receive("killed", START)


def test_a_failed_kill_is_retried_within_the_budget():
    machine = JobFollower(FollowPolicy(deadline=START, poll_interval=1), instance_name=NAME, job_id=JOB.job_id)
    notes: list[tuple[int, str]] = []
    assert step(machine, START, notes) == KillJob()
    machine.receive(Failed(BrevConnectionLostError("drop")), START)
    assert step(machine, START, notes) == Sleep(0.0)  # the deadline already passed: no back-off wait
    assert step(machine, START, notes) == KillJob()
    assert [message.split(" of job")[0].split(":")[0] for _, message in notes] == [
        "Deadline passed",
        "Kill 1",
        "Deadline passed",
    ]


def test_backoff_is_capped():
    machine = JobFollower(FollowPolicy(poll_interval=50, max_poll_failures=5), instance_name=NAME, job_id="j")
    waits = []
    for _ in range(3):
        step(machine, START)
        machine.receive(Failed(BrevConnectionLostError("drop")), START)
        waits.append(step(machine, START).seconds)
    assert waits == [50.0, MAX_BACKOFF, MAX_BACKOFF]


@pytest.mark.parametrize(
    ("outcome", "error"),
    [
        (JobOutcome(FINISHED, 0, "", 0), None),
        (JobOutcome(FINISHED, 7, "", 0), None),
        (JobOutcome(TIMED_OUT, 143, "", 0), BrevTimeoutError),
        (JobOutcome(LOST, None, "", 0), BrevJobLostError),
        (JobOutcome(MISSING, None, "", 0), BrevJobLostError),
    ],
)
def test_outcome_errors(outcome, error):
    found = outcome_error(outcome, NAME, JOB.job_id)
    assert (type(found) if found else None) is error
    assert outcome.collected == (outcome.state in (FINISHED, TIMED_OUT))
    assert outcome.succeeded == (outcome.state == FINISHED and outcome.exit_code == 0)


# ------------------------------------------------------------------------------------------ output syncs


def follow_with_syncs(hook: FakeJobHook, policy: FollowPolicy, mode: str, clock: FakeClock) -> tuple:
    """Follow until the end (sync: ``on_sync`` records each sync) or the first ``sync_due`` (async)."""
    logger = logging.getLogger(f"test.job_runner.sync.{mode}")
    logger.handlers[:] = [Records()]
    logger.propagate = False
    runner = JobRunner(hook, NAME, JOB, policy, logger, clock=lambda: clock.now)
    synced: list[tuple[float, int]] = []
    if mode == "sync":
        outcome = runner.follow(sleep=clock.sleep, on_sync=lambda: synced.append((clock.now, runner.offset)))
    else:
        outcome = asyncio.run(runner.afollow(sleep=clock.asleep))
    return outcome, synced


def test_outputs_sync_every_interval_while_the_job_runs():
    clock = FakeClock()
    hook = FakeJobHook(log=lines_of(40), grow=8, ends_at_poll=20, clock=clock)
    outcome, synced = follow_with_syncs(hook, FollowPolicy(poll_interval=2.0, sync_interval=10.0), "sync", clock)
    assert outcome.state == FINISHED and outcome.offset == len(lines_of(40))
    assert [t - START for t, _ in synced] == [10.0, 20.0, 30.0]  # the waits were cut to the due time
    # a poll waits on the instance up to the due sync, and the first poll after a sync does not wait; the job ends
    # at its 20th poll (32 s) and no sync follows its end
    assert [call[-1] - START for call in hook.calls if call[-1] - START >= 28] == [28.0, 30.0, 30.0, 32.0]


def test_the_async_driver_stops_where_the_sync_driver_syncs():
    policy = FollowPolicy(poll_interval=2.0, sync_interval=10.0)
    clocks = FakeClock(), FakeClock()
    hooks = [FakeJobHook(log=lines_of(40), grow=8, ends_at_poll=20, clock=c) for c in clocks]
    _, synced = follow_with_syncs(hooks[0], policy, "sync", clocks[0])
    stopped, _ = follow_with_syncs(hooks[1], policy, "async", clocks[1])
    assert stopped.state == SYNC_DUE and stopped.exit_code is None and not stopped.collected
    assert (clocks[1].now, stopped.offset) == synced[0]
    assert hooks[1].calls == hooks[0].calls[: len(hooks[1].calls)]


def test_a_checkpoint_line_makes_a_sync_due_at_once():
    log = b"Epoch 1/3\nSaved checkpoint: /results/train/model_epoch_000_step_00010.pth\nEpoch 2/3\n"
    clock = FakeClock()
    hook = FakeJobHook(log=log, grow=74, ends_at_poll=4, clock=clock)  # poll 1 ends with the checkpoint line
    policy = FollowPolicy(poll_interval=2.0, sync_interval=3600.0, checkpoint_regex=r"Saved checkpoint")
    outcome, synced = follow_with_syncs(hook, policy, "sync", clock)
    assert outcome.state == FINISHED
    assert synced == [(START, 74)]  # right after the poll that showed the checkpoint, before any wait


@pytest.mark.parametrize(
    ("policy", "next_sync_at", "checkpoint_seen", "now", "due"),
    [
        ({}, START, True, START, False),  # no periodic sync configured
        ({"sync_interval": 10.0}, START + 10, False, START + 9.9, False),
        ({"sync_interval": 10.0}, START + 10, False, START + 10, True),
        ({"sync_interval": 10.0}, START + 10, True, START, True),  # a new checkpoint
        ({"sync_interval": 10.0, "deadline": START + 5}, START + 10, True, START + 5, False),  # being killed
    ],
)
def test_sync_due_decisions(policy, next_sync_at, checkpoint_seen, now, due):
    machine = JobFollower(FollowPolicy(**policy), instance_name=NAME, job_id="j", next_sync_at=next_sync_at)
    machine.checkpoint_seen = checkpoint_seen
    assert machine.sync_due(now) is due


def test_a_sync_is_answered_and_schedules_the_next():
    machine = JobFollower(FollowPolicy(sync_interval=10.0), instance_name=NAME, job_id="j", next_sync_at=START)
    assert machine.next_action(START) == SyncOutputs()
    with pytest.raises(RuntimeError, match="SyncOutputs"):
        machine.receive("killed", START + 3)
    machine = JobFollower(FollowPolicy(sync_interval=10.0), instance_name=NAME, job_id="j", next_sync_at=START)
    assert machine.next_action(START) == SyncOutputs()
    machine.receive(Synced(), START + 3)
    assert machine.next_sync_at == START + 13
    assert isinstance(machine.next_action(START + 3), PollJob)
    machine.receive(PollResult(state=RUNNING, exit_code=None, log_size=0, pid=1), START + 3)
    # the poll interval, waited on the instance and not cut: the sync is 9 s away
    assert machine.next_action(START + 4) == PollJob(0, FollowPolicy().max_bytes, 5.0)
