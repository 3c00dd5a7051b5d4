"""Detached jobs in detail: the handle's paths and limits (``core/jobs/handle.py``), the follower's outcomes,
progress and sync decisions (``core/jobs/follower.py``), the scripts' argument checks (``core/jobs/scripts.py``), the
poll and launch parsers (``core/jobs/remote.py``), and which values of the pure core are immutable."""

from __future__ import annotations

import dataclasses
import errno
import logging

import pytest

from airflow_provider_brev.core.instances import readiness, recovery
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
from airflow_provider_brev.core.jobs.handle import (
    MAX_POLL_WAIT,
)
from airflow_provider_brev.core.jobs.remote import PollResult
from airflow_provider_brev.core.protocol import argv, classify, config, invocation, machine, names, output
from airflow_provider_brev.core.protocol.machine import Done, Fail, Failed, Sleep
from airflow_provider_brev.core.protocol.spawn import start_error
from airflow_provider_brev.core.staging import manifest
from airflow_provider_brev.core.staging import paths as transfer_paths
from airflow_provider_brev.core.staging import reports as transfer_reports
from airflow_provider_brev.core.staging import scripts as transfer_scripts
from airflow_provider_brev.core.staging import types as transfer_types
from airflow_provider_brev.core.tao import report as tao
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevConnectionLostError,
    BrevJobLostError,
    BrevTimeoutError,
    BrevTransientError,
)
from unit.core.jobs.follower_helpers import JOB, _poll
from unit.machine_steps import step

# ----------------------------------------------------------------------------------------------- handles


# ----------------------------------------------------------------------------------------------- scripts


# ----------------------------------------------------------------------------------------------- parsers


# ---------------------------------------------------------------------------------------------- follower


def test_outcomes_and_their_errors():
    assert (TIMED_OUT, SYNC_DUE, MAX_BACKOFF) == ("timeout", "sync_due", 60.0)
    outcome = JobOutcome("finished", 0, "last", 12)
    assert outcome.to_dict() == {"state": "finished", "exit_code": 0, "last_line": "last", "offset": 12}
    assert outcome.collected and JobOutcome(TIMED_OUT, None, "", 0).collected
    assert not JobOutcome("lost", None, "", 0).collected
    assert outcome_error(outcome, "w-1", "j") is None
    assert isinstance(outcome_error(JobOutcome(TIMED_OUT, None, "", 0), "w-1", "j"), BrevTimeoutError)
    for lost in (JobOutcome("lost", None, "", 0), JobOutcome("missing", 3, "", 0), JobOutcome("finished", None, "", 0)):
        error = outcome_error(lost, "w-1", "j")
        assert isinstance(error, BrevJobLostError)
        assert f"is {lost.state}" in error.message


def test_progress_lines_report_each_new_percentage():
    follower = JobFollower(FollowPolicy(progress_regex=r"(\d+)/(\d+)"), instance_name="w-1", job_id="j")
    follower.next_action(0.0)
    follower.receive(_poll(size=40, chunk=b"1/4\n1/4\n2/4\n9/0\nx/4\n4/3\n"), 0.0)
    notes: list[tuple[int, str]] = []
    step(follower, 0.0, notes)
    progress = [m for _, m in notes if "progress" in m]
    assert progress == ["Job j progress: 25% (1/4)", "Job j progress: 50% (2/4)", "Job j progress: 100% (4/3)"]
    single = JobFollower(FollowPolicy(progress_regex=r"(\d+)"), instance_name="w-1", job_id="j")
    single.next_action(0.0)
    single.receive(_poll(size=3, chunk=b"12\n"), 0.0)
    notes.clear()
    step(single, 0.0, notes)
    assert notes == [(logging.INFO, "[remote] 12")]  # one group: no (done, total)


def test_the_wait_is_capped_by_the_deadline_and_the_next_sync():
    policy = FollowPolicy(poll_interval=10.0, deadline=104.0, sync_interval=30.0)
    follower = JobFollower(policy, instance_name="w-1", job_id="j", next_sync_at=107.0)
    assert follower.next_action(100.0) == PollJob(0, policy.max_bytes, 0.0)  # the first poll does not wait
    follower.receive(_poll(), 100.0)
    assert follower.next_action(101.0) == PollJob(0, policy.max_bytes, 3.0)  # the deadline comes first
    follower = JobFollower(
        FollowPolicy(poll_interval=10.0, sync_interval=30.0), instance_name="w", job_id="j", next_sync_at=105.0
    )
    follower.next_action(100.0)
    follower.receive(_poll(), 100.0)
    assert follower.next_action(101.0) == PollJob(0, policy.max_bytes, 4.0)  # then the sync
    follower.receive(_poll(), 105.0)
    assert isinstance(follower.next_action(105.0), SyncOutputs)
    follower.receive(Synced(), 106.0)
    assert follower.next_sync_at == 136.0 and not follower.checkpoint_seen
    assert follower.next_action(106.0) == PollJob(0, policy.max_bytes, 0.0)  # a sync takes the place of the wait


@pytest.mark.parametrize(
    ("interval", "sleep", "wait"),
    [(2.0, None, 2.0), (MAX_POLL_WAIT, None, MAX_POLL_WAIT), (MAX_POLL_WAIT + 5.0, 5.0, MAX_POLL_WAIT)],
)
def test_a_poll_waits_on_the_instance_for_the_jobs_end_and_sleeps_only_what_is_beyond_the_longest_wait(
    interval, sleep, wait
):
    follower = JobFollower(FollowPolicy(poll_interval=interval), instance_name="w", job_id="j")
    follower.next_action(0.0)
    follower.receive(_poll(), 0.0)
    if sleep is not None:
        assert follower.next_action(0.0) == Sleep(sleep)
    assert follower.next_action(sleep or 0.0) == PollJob(0, FollowPolicy().max_bytes, wait)


def test_a_failed_poll_backs_off_on_the_driver_and_the_next_poll_does_not_wait():
    follower = JobFollower(FollowPolicy(poll_interval=2.0), instance_name="w", job_id="j")
    follower.next_action(0.0)
    follower.receive(_poll(), 0.0)
    assert follower.next_action(0.0) == PollJob(0, FollowPolicy().max_bytes, 2.0)
    follower.receive(Failed(BrevConnectionLostError("drop", command="exec")), 2.0)
    notes: list[tuple[int, str]] = []
    assert step(follower, 2.0, notes) == Sleep(2.0)
    assert [level for level, _ in notes] == [logging.WARNING]
    assert follower.next_action(4.0) == PollJob(0, FollowPolicy().max_bytes, 0.0)


def test_a_sync_the_driver_cannot_do_ends_following_where_it_can_resume():
    follower = JobFollower(
        FollowPolicy(sync_interval=5.0), instance_name="w", job_id="j", offset=7, last_line="l", next_sync_at=10.0
    )
    assert isinstance(follower.next_action(10.0), SyncOutputs)
    follower.receive(Synced(deferred=True), 10.5)
    assert follower.next_action(10.5) == Done(JobOutcome(SYNC_DUE, None, "l", 7))
    assert follower.next_sync_at == 10.0  # the worker syncs, then a new trigger starts from here


def test_a_sync_is_never_due_once_the_deadline_passed_or_without_an_interval():
    follower = JobFollower(
        FollowPolicy(sync_interval=5.0, deadline=50.0), instance_name="w", job_id="j", next_sync_at=10.0
    )
    assert follower.sync_due(10.0)
    assert not follower.sync_due(9.9)
    assert not follower.sync_due(50.0)
    assert not JobFollower(FollowPolicy(), instance_name="w", job_id="j", next_sync_at=1.0).sync_due(100.0)
    follower.timed_out = True
    assert not follower.sync_due(20.0)


def test_checkpoint_lines_make_a_sync_due_only_while_the_job_runs():
    policy = FollowPolicy(sync_interval=600.0, checkpoint_regex="saved ckpt")
    follower = JobFollower(policy, instance_name="w", job_id="j")
    follower.next_action(0.0)
    follower.receive(_poll(state="finished", size=11, chunk=b"saved ckpt\n", rc=0), 0.0)
    assert not follower.checkpoint_seen  # the final sync follows anyway
    follower = JobFollower(policy, instance_name="w", job_id="j")
    follower.next_action(0.0)
    follower.receive(_poll(size=11, chunk=b"saved ckpt\n"), 0.0)
    assert follower.checkpoint_seen and follower.sync_due(1.0)


def test_failed_calls_back_off_linearly_up_to_a_minute_and_then_give_up():
    follower = JobFollower(FollowPolicy(poll_interval=25.0, max_poll_failures=3), instance_name="w", job_id="j")
    waits = []
    notes: list[tuple[int, str]] = []
    for _ in range(3):
        step(follower, 0.0, notes)
        follower.receive(Failed(BrevTransientError("502")), 0.0)
        action = step(follower, 0.0, notes)
        assert isinstance(action, Sleep)
        waits.append(action.seconds)
    assert waits == [25.0, 50.0, 60.0]
    warnings = [m for level, m in notes if level == logging.WARNING]
    assert warnings[0] == "Poll 1 of job j failed (502); the job keeps running, retrying."
    follower.next_action(0.0)
    last = Failed(BrevTransientError("502"))
    follower.receive(last, 0.0)
    assert follower.next_action(0.0) == Fail(last.error)


def test_a_failed_kill_is_tried_again():
    follower = JobFollower(FollowPolicy(deadline=10.0, poll_interval=1.0), instance_name="w", job_id="j")
    notes: list[tuple[int, str]] = []
    assert isinstance(step(follower, 10.0, notes), KillJob)
    follower.receive(Failed(BrevTransientError("drop")), 10.0)
    step(follower, 10.0, notes)  # the back-off wait
    assert notes[-1][1].startswith("Kill 1 of job j failed")
    assert isinstance(step(follower, 11.0, notes), KillJob)
    follower.receive("terminated", 11.0)
    assert isinstance(step(follower, 11.0, notes), PollJob)
    assert notes[-1] == (logging.INFO, "Job j: terminated.")


def test_a_finished_poll_ends_with_the_outcome_and_a_drained_log():
    follower = JobFollower(FollowPolicy(), instance_name="w", job_id="j", offset=2, last_line="before")
    follower.next_action(0.0)
    follower.receive(PollResult("finished", 3, 4, 1, b"x\n", 2), 0.0)
    assert step(follower, 0.0) == Done(JobOutcome("finished", 3, "x", 4))
    lost = JobFollower(FollowPolicy(), instance_name="w", job_id="j")
    lost.next_action(0.0)
    lost.receive(PollResult("lost", 3, 0, None, b"", 0), 0.0)
    assert lost.next_action(0.0) == Done(JobOutcome("lost", None, "", 0))


def test_an_error_that_is_not_transient_ends_following_at_once():
    follower = JobFollower(FollowPolicy(), instance_name="w", job_id="j")
    follower.next_action(0.0)
    error = BrevAuthError("logged out")
    follower.receive(Failed(error), 0.0)
    assert follower.next_action(0.0) == Fail(error)  # no retry warning before it
    assert follower.failures == 0


def test_a_good_kill_resets_the_failure_budget():
    follower = JobFollower(
        FollowPolicy(deadline=10.0, poll_interval=1.0, max_poll_failures=1), instance_name="w", job_id="j"
    )
    assert isinstance(step(follower, 0.0), PollJob)
    follower.receive(Failed(BrevTransientError("drop")), 0.0)
    assert step(follower, 0.0) == Sleep(1.0)
    assert isinstance(step(follower, 10.0), KillJob)
    follower.receive("terminated", 10.0)
    assert follower.failures == 0
    assert isinstance(step(follower, 10.0), PollJob)
    follower.receive(Failed(BrevTransientError("drop")), 10.0)
    assert isinstance(step(follower, 10.0), Sleep)  # one failure again, within the budget


def test_an_answer_of_an_unknown_kind_is_refused():
    follower = JobFollower(FollowPolicy(), instance_name="w", job_id="j")
    follower.next_action(0.0)
    with pytest.raises(RuntimeError, match="answer to int while waiting for PollJob"):
        follower.receive(42, 0.0)


# ------------------------------------------------------------------------------------------------ frozen

FROZEN = [
    argv.CreatePlan(["create"]),
    classify.LOGGED_OUT_MARKERS[0],
    classify.RULES[0],
    config.BrevConnectionConfig("c"),
    config.BrevCapabilities(None, "v"),
    invocation.EnsureLogin(),
    invocation.RunCli(),
    machine.Call(),
    machine.Sleep(1.0),
    machine.Emit(20, "m"),
    machine.Done(1),
    machine.Fail(ValueError("x")),
    machine.Failed(ValueError("x")),
    PollJob(0, 1),
    KillJob(),
    SyncOutputs(),
    Synced(),
    FollowPolicy(),
    JOB,
    manifest.StagingPair("s3://b/", "b", "", "d"),
    manifest.ManifestEntry("a", "k", 1, "e"),
    manifest.InputSyncPlan([], []),
    names.ManagedName("p", "s", "d", None),  # type: ignore[arg-type]
    output.BrevInstance("n", "i", "RUNNING"),
    output.InstanceTypeOffer("t", "g", 1, 1, 1, 1),
    output.GpuSpec("L4"),
    readiness.Readiness("ssh", "m"),
    readiness.ListInstance(),
    readiness.RunProbe("c"),
    readiness.CheckReadiness(1.0, 1.0),
    readiness.WaitStep("check", "m"),
    recovery.RecoveryDecision("recover", "m"),
    tao.TaoVerdict("verified"),
    transfer_paths.PathFilter(),
    transfer_reports.TaskResult(1, None, None),
    transfer_reports.RemoteFile("a", 1, None),
    transfer_types.S3Object("k", 1, "e"),
    transfer_scripts.TransferTask("1", "G", "a", 1, "https://x/y"),
]


@pytest.mark.parametrize("value", FROZEN, ids=[type(v).__name__ for v in FROZEN])
def test_values_of_the_pure_core_are_immutable(value):
    field = dataclasses.fields(value)[0].name if dataclasses.fields(value) else "anything"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


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
