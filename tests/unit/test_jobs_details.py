"""Detached jobs in detail: the handle's paths and limits (``core/jobs/handle.py``), the follower's outcomes,
progress and sync decisions (``core/jobs/follower.py``), the scripts' argument checks (``core/jobs/scripts.py``), the
poll and launch parsers (``core/jobs/remote.py``), and which values of the pure core are immutable."""

from __future__ import annotations

import base64
import dataclasses
import logging
import re

import pytest
from machine_steps import step

from airflow_provider_brev.core.instances import readiness, recovery
from airflow_provider_brev.core.jobs.attempts import COLLECT, IGNORE, REATTACH, RELAUNCH, earlier_job_verdict
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
    DEFAULT_BASE_DIR,
    DEFAULT_MAX_BYTES,
    KILLED_EXIT_CODE,
    MAX_COMMAND_LENGTH,
    MAX_JOB_ID_LENGTH,
    MAX_POLL_WAIT,
    SETUP_FAILED_EXIT_CODE,
    TERMINATED_EXIT_CODE,
    RemoteJob,
    check_path,
    generate_job_id,
    job_id_prefix,
    shell_path,
)
from airflow_provider_brev.core.jobs.remote import PollResult, parse_launch_output, parse_poll_output
from airflow_provider_brev.core.jobs.scripts import (
    build_kill_command,
    build_launch_command,
    build_poll_command,
    build_secret_env_file,
)
from airflow_provider_brev.core.protocol import argv, classify, config, invocation, machine, names, output
from airflow_provider_brev.core.protocol.machine import Done, Fail, Failed, Sleep
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

JOB = RemoteJob("job-1")


# ----------------------------------------------------------------------------------------------- handles


def test_job_limits_and_exit_codes():
    assert (DEFAULT_BASE_DIR, DEFAULT_MAX_BYTES, MAX_COMMAND_LENGTH) == (".airflow-brev/jobs", 4194304, 102400)
    assert (MAX_JOB_ID_LENGTH, SETUP_FAILED_EXIT_CODE, TERMINATED_EXIT_CODE, KILLED_EXIT_CODE) == (80, 125, 143, 137)


def test_job_ids_are_deterministic_slugs():
    prefix = job_id_prefix(dag_id="My DAG", task_id="train.step", run_id="r", map_index=2)
    assert re.fullmatch(r"my-dag-train-step-[0-9a-f]{10}", prefix)
    assert job_id_prefix(dag_id="My DAG", task_id="train.step", run_id="r", map_index=3) != prefix
    assert job_id_prefix(dag_id="--", task_id="..", run_id="r").startswith("job-")
    long = generate_job_id(dag_id="d" * 100, task_id="t" * 100, run_id="r", try_number=9_999_999_999)
    assert len(long) <= MAX_JOB_ID_LENGTH and long.endswith("-t9999999999")
    assert len(job_id_prefix(dag_id="d" * 100, task_id="t", run_id="r")) == 56 + 1 + 10
    assert generate_job_id(dag_id="d", task_id="t", run_id="r", try_number=0).endswith("-t0")
    for bad in (-1, 10**10, True, 1.0, "1"):
        with pytest.raises(ValueError, match="try_number must be a non-negative integer"):
            generate_job_id(dag_id="d", task_id="t", run_id="r", try_number=bad)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must be a non-empty string"),
        ("  ", "must be a non-empty string"),
        (None, "must be a non-empty string"),
        ("a'b", "must not contain quotes"),
        ('a"b', "must not contain quotes"),
        ("a\nb", "must not contain quotes"),
        ("a\rb", "must not contain quotes"),
        ("a\x00b", "must not contain quotes"),
    ],
)
def test_remote_paths_are_refused_for_their_reason(value, message):
    with pytest.raises(ValueError, match=message):
        check_path(value, "secret_env_path")


@pytest.mark.parametrize(
    ("base_dir", "message"),
    [
        ("a/../b", "must not contain '..'"),
        ("/", "must name a directory"),
        ("~/", "must name a directory"),
        (".", "must name a directory"),
        ("~", "must name a directory"),
        ("", "must be a non-empty string"),
    ],
)
def test_bad_base_dirs(base_dir, message):
    with pytest.raises(ValueError, match=message):
        RemoteJob("j", base_dir=base_dir)


def test_handle_paths_and_round_trip():
    job = RemoteJob("j.1", base_dir="~/work/jobs/")
    assert job.base_dir == "work/jobs"
    assert (job.job_dir, job.log_path, job.pid_path) == ("work/jobs/j.1", "work/jobs/j.1/log", "work/jobs/j.1/pid")
    assert (job.exit_code_path, job.script_path) == ("work/jobs/j.1/exit_code", "work/jobs/j.1/job.sh")
    assert (job.launched_path, job.killed_path) == ("work/jobs/j.1/launched", "work/jobs/j.1/killed")
    assert job.to_dict() == {
        "job_id": "j.1",
        "base_dir": "work/jobs",
        "job_dir": "work/jobs/j.1",
        "log_path": "work/jobs/j.1/log",
    }
    assert RemoteJob.from_dict(job.to_dict()) == job
    assert RemoteJob.from_dict({"job_id": "x", "base_dir": ""}).base_dir == DEFAULT_BASE_DIR
    assert RemoteJob("x", base_dir="/abs/dir/").base_dir == "/abs/dir"
    for bad in ({"base_dir": "x"}, ["job_id"]):
        with pytest.raises(ValueError, match="Not a remote job handle"):
            RemoteJob.from_dict(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Invalid job id"):
        RemoteJob(3)  # type: ignore[arg-type]
    assert shell_path("~", relative_to_home=True) == '"$HOME"'
    assert shell_path("~/", relative_to_home=True) == '"$HOME"'
    assert shell_path("~//a b", relative_to_home=True) == "\"$HOME\"/'a b'"
    assert shell_path("rel", relative_to_home=False) == "rel"
    assert shell_path("rel", relative_to_home=True) == '"$HOME"/rel'
    assert JOB.shell_path("/abs") == "/abs"


# ----------------------------------------------------------------------------------------------- scripts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": ""}, "command must be a non-empty string"),
        ({"command": None}, "command must be a non-empty string"),
        ({"command": "a\x00b"}, "command must not contain NUL"),
        ({"env": {"A": "x\x00"}}, "Environment variable A must not contain NUL"),
        ({"cwd": ""}, "cwd must be a non-empty path"),
        ({"cwd": "  "}, "cwd must be a non-empty path"),
        ({"cwd": 3}, "cwd must be a non-empty path"),
        ({"cwd": "a\x00"}, "cwd must be a non-empty path"),
        ({"secret_env_path": ""}, "secret_env_path must be a non-empty string"),  # the empty secret-file guard
        ({"secret_env_path": "a'b"}, "must not contain quotes"),
    ],
)
def test_launch_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_launch_command(JOB, **{"command": "echo", **kwargs})


def test_poll_and_kill_arguments_are_checked():
    for offset, max_bytes, message in (
        (-1, 1, "offset must be an integer >= 0"),
        (0, 0, "max_bytes must be an integer >= 1"),
    ):
        with pytest.raises(ValueError, match=message):
            build_poll_command(JOB, offset=offset, max_bytes=max_bytes)
    with pytest.raises(ValueError, match="offset must be an integer >= 0, got True"):
        build_poll_command(JOB, offset=True)
    with pytest.raises(ValueError, match="max_bytes must be an integer >= 1, got 1.5"):
        build_poll_command(JOB, offset=0, max_bytes=1.5)  # type: ignore[arg-type]
    assert "__BJ_OFFSET=7\n__BJ_MAX=1\n__BJ_WAIT=0\n" in build_poll_command(JOB, offset=7, max_bytes=1)
    for wait, tenths in ((2.0, 20), (0.04, 0), (0.06, 1), (-1.0, 0), (MAX_POLL_WAIT + 1, int(MAX_POLL_WAIT * 10))):
        assert f"__BJ_WAIT={tenths}\n" in build_poll_command(JOB, offset=0, wait=wait), wait
    for wait in (True, "1", float("nan")):
        with pytest.raises(ValueError, match="wait must be a number of seconds"):
            build_poll_command(JOB, offset=0, wait=wait)  # type: ignore[arg-type]
    for grace in (-0.1, 3600.1, True, "1"):
        with pytest.raises(ValueError, match="grace_seconds must be between 0 and 3600"):
            build_kill_command(JOB, grace_seconds=grace)  # type: ignore[arg-type]
    assert "__BJ_TICKS=1\n" in build_kill_command(JOB, grace_seconds=0)
    assert "__BJ_TICKS=36000\n" in build_kill_command(JOB, grace_seconds=3600)
    assert "__BJ_TICKS=25\n__BJ_GRACE=3\n" in build_kill_command(JOB, grace_seconds=2.5)
    with pytest.raises(ValueError, match="longer than 102400 bytes"):
        build_launch_command(JOB, "x" * MAX_COMMAND_LENGTH)
    build_launch_command(JOB, "x" * (MAX_COMMAND_LENGTH - 8000))


def test_the_secret_env_file():
    assert build_secret_env_file({"A": "it's", "B": 2}) == "export A='it'\\''s'\nexport B='2'\n"
    with pytest.raises(ValueError, match="Secret environment variable A must not contain NUL"):
        build_secret_env_file({"A": "x\x00"})
    assert build_secret_env_file({}) == ""


# ----------------------------------------------------------------------------------------------- parsers


def _status(state="finished", rc="0", size="3", pid="42", body=b"abc"):
    return [
        f"BREV_JOB_STATUS job-1 {state} {rc} {size} {pid}",
        "BREV_JOB_LOG_BEGIN",
        base64.b64encode(body).decode(),
        "BREV_JOB_LOG_END",
    ]


def test_poll_output_parsing_details():
    poll = parse_poll_output(["noise", *_status(), "w-1"], "job-1", 5)
    assert (poll.state, poll.exit_code, poll.log_size, poll.pid, poll.chunk, poll.offset) == (
        "finished",
        0,
        3,
        42,
        b"abc",
        5,
    )
    assert (poll.next_offset, poll.done, poll.complete) == (8, True, True)
    assert parse_poll_output(_status(rc="-", pid="-"), "job-1", 0).exit_code is None
    with pytest.raises(ValueError, match="Truncated output"):
        parse_poll_output(_status()[:3], "job-1", 0)
    with pytest.raises(ValueError, match="Truncated output"):
        parse_poll_output(_status()[:1], "job-1", 0)
    with pytest.raises(ValueError, match=r"first lines: \['a', 'b', 'c'\]"):
        parse_poll_output(["a", "b", "c", "d"], "job-1", 0)
    with pytest.raises(ValueError, match="Corrupt log chunk"):
        parse_poll_output([*_status()[:2], "!!!", "BREV_JOB_LOG_END"], "job-1", 0)
    twice = parse_poll_output([*_status(state="running", size="1", body=b"a"), *_status()[:2]], "job-1", 0)
    assert twice.state == "running"  # the last *complete* block wins
    running = PollResult("running", None, 10, 1, b"abc", 0)
    assert not running.done and not running.complete


def test_launch_output_parsing_details():
    launched = parse_launch_output(["BREV_JOB_LAUNCHED job-1 77"], "job-1")
    assert (launched.launched, launched.pid, launched.existing, launched.error) == (True, 77, None, None)
    existing = parse_launch_output(["BREV_JOB_EXISTS job-1", *_status(state="running", pid="9")], "job-1")
    assert (existing.launched, existing.pid, existing.existing.state) == (False, 9, "running")
    both = parse_launch_output(["BREV_JOB_LAUNCHED job-1 5", "BREV_JOB_EXISTS job-1", *_status(pid="9")], "job-1")
    assert both.pid == 5  # this call's launch wins over the re-run's report
    failed = parse_launch_output(["BREV_JOB_LAUNCH_FAILED job-1 base-dir"], "job-1")
    assert (failed.launched, failed.error) == (False, "base-dir")
    with pytest.raises(ValueError, match=r"first lines: \['x', 'y', 'z'\]"):
        parse_launch_output(["x", "y", "z", "w"], "job-1")


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


def _poll(state="running", size=0, chunk=b"", offset=0, rc=None):
    return PollResult(state, rc, size, 1, chunk, offset)


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


@pytest.mark.parametrize(
    ("poll", "verdict"),
    [
        (_poll("running"), REATTACH),
        (_poll("finished", rc=0), COLLECT),
        (_poll("finished", rc=2), RELAUNCH),
        (_poll("lost"), RELAUNCH),
        (_poll("missing", rc=0), IGNORE),
    ],
)
def test_what_an_earlier_try_means(poll, verdict):
    assert earlier_job_verdict(poll) == verdict


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
