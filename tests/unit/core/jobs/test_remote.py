"""Detached remote jobs: the built commands executed by a real local bash (HOME = tmp_path)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.core.jobs.remote import (
    DEFAULT_BASE_DIR,
    KILLED_EXIT_CODE,
    SETUP_FAILED_EXIT_CODE,
    TERMINATED_EXIT_CODE,
    LogLineAssembler,
    PollResult,
    RemoteJob,
    build_cleanup_command,
    build_kill_command,
    build_launch_command,
    build_poll_command,
    build_secret_env_file,
    generate_job_id,
    job_id_prefix,
    parse_cleanup_output,
    parse_kill_output,
    parse_launch_output,
    parse_poll_output,
)

if TYPE_CHECKING:
    from pathlib import Path
import base64
import logging

from airflow_provider_brev.core.jobs.follower import REMOTE_LINE_PREFIX
from airflow_provider_brev.core.jobs.pulls import pull_start
from airflow_provider_brev.core.jobs.remote import FINISHED, LOST, MISSING, RUNNING, LaunchResult
from airflow_provider_brev.exceptions import BrevConnectionLostError
from unit.core.jobs.pulls_helpers import poll
from unit.job_runner_helpers import JOB, SCENARIOS, START, drive

#: How long a wait may take before the test gives up: a bound against hanging, not a speed check. Draining ten
#: thousand lines takes some 40 polls of a few ``bash`` processes each, 2 s on an idle machine and over 10 s under
#: busy-loops on two cores.
DEADLINE = 120.0
NASTY = 'it\'s "quoted" $(touch pwned1) `touch pwned2` $HOME\nsecond line; rm -rf / \\ end'


def run(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        cwd=home,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def process_alive(pid: int) -> bool:
    """Alive and not a zombie (this sandbox's init does not reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(") ", 1)[1].split()


def wait_for(predicate, what: str, timeout: float = DEADLINE):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Jobs:
    """Launch helpers; every launched process group is SIGKILLed at teardown."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.pgids: set[int] = set()

    def launch(self, job: RemoteJob, command: str, **kwargs) -> subprocess.CompletedProcess[str]:
        done = run(build_launch_command(job, command, **kwargs), self.home)
        result = parse_launch_output(lines(done), job.job_id)
        if result.pid:
            self.pgids.add(result.pid)
        return done

    def poll(self, job: RemoteJob, offset: int = 0, max_bytes: int = 1 << 20) -> PollResult:
        done = run(build_poll_command(job, offset=offset, max_bytes=max_bytes), self.home)
        return parse_poll_output([*lines(done), "my-instance"], job.job_id, offset)

    def wait_state(self, job: RemoteJob, state: str) -> PollResult:
        return wait_for(lambda: (r := self.poll(job)).state == state and r, f"state {state}")

    def read_all(self, job: RemoteJob, max_bytes: int) -> tuple[bytes, PollResult]:
        data, offset = bytearray(), 0
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            result = self.poll(job, offset, max_bytes)
            assert result.offset == offset
            assert len(result.chunk) <= max_bytes
            data += result.chunk
            offset = result.next_offset
            if result.complete:
                return bytes(data), result
        raise AssertionError("log not drained in time")

    def kill_all(self) -> None:
        for pgid in self.pgids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def jobs(tmp_path):
    helper = Jobs(tmp_path)
    try:
        yield helper
    finally:
        helper.kill_all()


# ------------------------------------------------------------------------------------------- launch / poll


def test_launch_returns_at_once_and_job_runs_detached_in_its_own_session(jobs, tmp_path):
    job = RemoteJob("detached-1")
    started = time.monotonic()
    done = jobs.launch(job, f"while [ ! -f {tmp_path}/go ]; do sleep 0.05; done; echo survived")
    assert time.monotonic() - started < 5
    result = parse_launch_output([*lines(done), "my-instance"], job.job_id)
    assert result.launched
    assert result.existing is None
    assert result.error is None
    assert done.stdout == f"BREV_JOB_LAUNCHED detached-1 {result.pid}\n"
    running = jobs.poll(job)
    assert (running.state, running.exit_code, running.pid) == ("running", None, result.pid)
    assert not running.done
    fields = stat_fields(result.pid)
    assert fields[2] == fields[3] == str(result.pid)  # pgid == sid == pid: own session and process group
    (tmp_path / "go").touch()
    finished = jobs.wait_state(job, "finished")
    assert finished.exit_code == 0
    assert finished.chunk == b"survived\n"
    assert finished.complete


def test_job_survives_the_launchers_process_group_being_killed(jobs, tmp_path):
    job = RemoteJob("survivor")
    launch = build_launch_command(job, f"while [ ! -f {tmp_path}/go ]; do sleep 0.05; done; echo survived")
    # The launcher shares a process group with a long-lived ssh-like parent, which then dies (SIGHUP + SIGKILL).
    parent = subprocess.Popen(
        ["bash", "-c", f"bash -c {shlex.quote(launch)}; exec sleep 60"],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        running = jobs.wait_state(job, "running")
        jobs.pgids.add(running.pid)
        assert os.getpgid(running.pid) != parent.pid
        os.killpg(parent.pid, signal.SIGHUP)
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=DEADLINE)
        assert jobs.poll(job).state == "running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=DEADLINE)
    (tmp_path / "go").touch()
    finished = jobs.wait_state(job, "finished")
    assert (finished.exit_code, finished.chunk) == (0, b"survived\n")


@pytest.mark.parametrize(
    ("command", "expected_code"),
    [("echo ok", 0), ("echo failing >&2; exit 3", 3), ("kill -9 $$", 137)],
)
def test_exit_codes_are_reported(jobs, command, expected_code):
    job = RemoteJob(f"code-{expected_code}")
    jobs.launch(job, command)
    finished = jobs.wait_state(job, "finished")
    assert finished.exit_code == expected_code
    assert finished.done
    assert finished.complete


def test_missing_cwd_fails_the_job_with_a_message_in_the_log(jobs, tmp_path):
    job = RemoteJob("no-cwd")
    jobs.launch(job, f"touch {tmp_path}/ran", cwd="does not/exist")
    finished = jobs.wait_state(job, "finished")
    assert finished.exit_code == SETUP_FAILED_EXIT_CODE
    assert b"cannot change directory to does not/exist" in finished.chunk
    assert not (tmp_path / "ran").exists()


def test_incremental_log_reading_reassembles_ten_thousand_lines(jobs):
    job = RemoteJob("chatty")
    jobs.launch(job, "for i in $(seq 1 10000); do echo \"line $i ünïcødé\"; done; printf 'tail-without-newline'")
    data, final = jobs.read_all(job, max_bytes=4093)  # odd size: chunks split multi-byte characters
    expected_lines = [f"line {i} ünïcødé" for i in range(1, 10001)]
    expected = ("\n".join(expected_lines) + "\ntail-without-newline").encode()
    assert data == expected
    assert final.state == "finished"
    assert final.exit_code == 0
    assert final.log_size == len(expected)
    # the same bytes through the line assembler, fed in awkward pieces
    assembler, out = LogLineAssembler(), []
    for start in range(0, len(data), 777):
        out += assembler.feed(data[start : start + 777])
    out += assembler.flush()
    assert out == [*expected_lines, "tail-without-newline"]


def test_poll_while_running_reads_from_offset_and_never_past_reported_size(jobs, tmp_path):
    job = RemoteJob("growing")
    jobs.launch(job, f"echo first; while [ ! -f {tmp_path}/go ]; do sleep 0.05; done; echo second")
    first = wait_for(lambda: (r := jobs.poll(job)).log_size == 6 and r, "first line")
    assert first.state == "running"
    assert first.chunk == b"first\n"
    assert not first.complete
    again = jobs.poll(job, offset=first.next_offset)
    assert again.chunk == b""
    assert again.offset == 6
    (tmp_path / "go").touch()
    jobs.wait_state(job, "finished")
    last = jobs.poll(job, offset=6)
    assert last.chunk == b"second\n"
    assert last.next_offset == last.log_size == 13
    assert last.complete
    beyond = jobs.poll(job, offset=100)
    assert beyond.chunk == b""
    assert beyond.complete


def test_second_launch_reports_the_existing_job_and_runs_nothing(jobs, tmp_path):
    job = RemoteJob("once")
    command = f"echo x >> {tmp_path}/counter; exit 4"
    jobs.launch(job, command)
    jobs.wait_state(job, "finished")
    again = jobs.launch(job, command)
    assert again.stdout.startswith("BREV_JOB_EXISTS once\nBREV_JOB_STATUS once finished 4 ")
    result = parse_launch_output(["noise", *lines(again), "my-instance"], job.job_id)
    assert not result.launched
    assert result.error is None
    assert result.existing is not None
    assert (result.existing.state, result.existing.exit_code, result.existing.chunk) == ("finished", 4, b"")
    assert result.pid == result.existing.pid
    assert (tmp_path / "counter").read_text() == "x\n"


def test_launch_on_a_running_job_reports_running(jobs, tmp_path):
    job = RemoteJob("busy")
    jobs.launch(job, f"while [ ! -f {tmp_path}/go ]; do sleep 0.05; done")
    result = parse_launch_output(lines(run(build_launch_command(job, "echo never"), tmp_path)), job.job_id)
    assert result.existing is not None
    assert result.existing.state == "running"
    (tmp_path / "go").touch()
    jobs.wait_state(job, "finished")


# ------------------------------------------------------------------------------------------------- secrets


def test_secret_env_file_is_sourced_then_deleted_and_never_in_a_command(jobs, tmp_path):
    secret = "hunter2-" + NASTY
    secret_file = tmp_path / "secrets" / "job.env"
    secret_file.parent.mkdir()
    secret_file.write_text(build_secret_env_file({"API_TOKEN": secret, "OTHER": "o"}))
    job = RemoteJob("secretive")
    command = f'printf %s "$API_TOKEN" > {tmp_path}/seen; ls secrets > {tmp_path}/listing'
    launch = build_launch_command(job, command, secret_env_path="secrets/job.env")
    commands = [launch, build_poll_command(job, offset=0), build_kill_command(job), build_cleanup_command(job)]
    assert not any("hunter2" in built for built in commands)
    jobs.launch(job, command, secret_env_path="secrets/job.env")
    assert jobs.wait_state(job, "finished").exit_code == 0
    assert (tmp_path / "seen").read_text() == secret
    assert (tmp_path / "listing").read_text() == ""  # deleted before the command ran
    assert not secret_file.exists()
    assert "hunter2" not in (tmp_path / job.script_path).read_text()
    assert not list(tmp_path.glob("pwned*"))


def test_secret_file_is_deleted_when_the_job_already_exists(jobs, tmp_path):
    job = RemoteJob("secret-again")
    jobs.launch(job, "true")
    jobs.wait_state(job, "finished")
    (tmp_path / "again.env").write_text(build_secret_env_file({"TOKEN": "s"}))
    result = parse_launch_output(
        lines(run(build_launch_command(job, "true", secret_env_path=str(tmp_path / "again.env")), tmp_path)), job.job_id
    )
    assert result.existing is not None
    assert not (tmp_path / "again.env").exists()


def test_unloadable_secret_file_fails_the_job_without_running_the_command(jobs, tmp_path):
    job = RemoteJob("secret-missing")
    jobs.launch(job, f"touch {tmp_path}/ran", secret_env_path="nope.env")
    finished = jobs.wait_state(job, "finished")
    assert finished.exit_code == SETUP_FAILED_EXIT_CODE
    assert b"could not load the secret environment file" in finished.chunk
    assert not (tmp_path / "ran").exists()


def test_secret_env_file_content_round_trips_through_bash(tmp_path):
    values = {"A": NASTY, "B": "", "C": "'", "D": "''\\'\n"}
    content = build_secret_env_file(values)
    assert content.splitlines()[0].startswith("export A='it'\\''s")
    (tmp_path / "s.env").write_text(content)
    script = ". ./s.env; " + "; ".join(f'printf "%s\\0" "${name}"' for name in values)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, check=True)
    assert done.stdout.split(b"\0")[:-1] == [v.encode() for v in values.values()]
    assert not list(tmp_path.glob("pwned*"))
    with pytest.raises(ValueError, match="Invalid environment variable name"):
        build_secret_env_file({"BAD-NAME": "x"})


# ----------------------------------------------------------------------------------------------- quoting


def test_nasty_env_values_cwd_and_command_are_quoted(jobs, tmp_path):
    workdir = tmp_path / "dir with spaces" / "it's $(here)"
    workdir.mkdir(parents=True)
    job = RemoteJob("nasty")
    command = 'printf "%s" "$NASTY" > value; pwd > where; echo "a\'b\\"c $(echo sub)"'
    jobs.launch(job, command, env={"NASTY": NASTY, "EMPTY": ""}, cwd=str(workdir))
    finished = jobs.wait_state(job, "finished")
    assert finished.exit_code == 0, finished.chunk
    assert (workdir / "value").read_text() == NASTY
    assert (workdir / "where").read_text().strip() == str(workdir)
    assert finished.chunk == b"a'b\"c sub\n"
    assert not list(tmp_path.rglob("pwned*"))


def test_tilde_cwd_and_absolute_base_dir(jobs, tmp_path):
    (tmp_path / "proj").mkdir()
    job = RemoteJob("tilde", base_dir=str(tmp_path / "abs jobs"))
    jobs.launch(job, "pwd", cwd="~/proj")
    finished = jobs.wait_state(job, "finished")
    assert finished.chunk.decode().strip() == str(tmp_path / "proj")
    assert (tmp_path / "abs jobs" / "tilde" / "log").exists()


# ------------------------------------------------------------------------------------------- kill / lost


def test_kill_terminates_the_whole_process_group(jobs, tmp_path):
    job = RemoteJob("killme")
    jobs.launch(job, f"sleep 300 & echo $! > {tmp_path}/child.pid; wait")
    wait_for(lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text().strip(), "child")
    child = int((tmp_path / "child.pid").read_text())
    leader = jobs.poll(job).pid
    started = time.monotonic()
    done = run(build_kill_command(job, grace_seconds=5), tmp_path)
    assert time.monotonic() - started < 7
    assert parse_kill_output([*lines(done), "my-instance"], job.job_id) == "terminated"
    assert not process_alive(child)
    assert not process_alive(leader)
    finished = jobs.poll(job)
    assert (finished.state, finished.exit_code) == ("finished", TERMINATED_EXIT_CODE)
    assert (tmp_path / job.killed_path).read_text().strip() == "terminated"
    again = run(build_kill_command(job), tmp_path)
    assert parse_kill_output(lines(again), job.job_id) == "already-finished"
    assert jobs.poll(job).exit_code == TERMINATED_EXIT_CODE


def test_kill_escalates_to_sigkill_after_the_grace_period(jobs, tmp_path):
    """A job that survives SIGTERM gets SIGKILL, and not before the grace period: the kill cannot return sooner
    than ``grace_seconds`` after it started (a lower bound, which load only makes easier to meet; how long the
    script takes beyond that is its own clock's business, not a bound a loaded machine could break)."""
    job = RemoteJob("stubborn")
    grace = 1
    jobs.launch(
        job,
        f"(trap '' TERM; exec sleep 300) & c=$!; echo $c > {tmp_path}/child.tmp; "
        f"trap 'echo TERM >> {tmp_path}/term' TERM; mv {tmp_path}/child.tmp {tmp_path}/child.pid; "
        "while kill -0 $c 2>/dev/null; do wait $c; done",  # no spinning shell if a killed test run leaves it behind
    )
    wait_for(lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text().strip(), "child")
    child = int((tmp_path / "child.pid").read_text())
    started = time.monotonic()
    done = run(build_kill_command(job, grace_seconds=grace), tmp_path)
    assert time.monotonic() - started >= grace  # SIGKILL came no sooner than the grace period after SIGTERM
    assert parse_kill_output(lines(done), job.job_id) == "killed"
    assert (tmp_path / "term").read_text() == "TERM\n"  # SIGTERM came first, once, and the job outlived it
    assert not process_alive(child)
    finished = jobs.poll(job)
    assert (finished.state, finished.exit_code) == ("finished", KILLED_EXIT_CODE)


def test_lost_when_the_job_is_sigkilled_without_an_exit_file(jobs, tmp_path):
    job = RemoteJob("lost-one")
    jobs.launch(job, f"while [ ! -f {tmp_path}/go ]; do sleep 0.05; done")
    leader = jobs.wait_state(job, "running").pid
    os.kill(leader, signal.SIGKILL)  # OOM-killer style: the leader dies without writing an exit code
    lost = jobs.wait_state(job, "lost")
    assert (lost.exit_code, lost.pid) == (None, leader)
    assert lost.done
    assert lost.complete
    assert parse_kill_output(lines(run(build_kill_command(job, grace_seconds=1), tmp_path)), job.job_id) in (
        "terminated",  # the leader's child `while` loop was still in the group
        "not-running",
    )
    assert jobs.poll(job).state == "finished"


def test_missing_job_poll_kill_and_cleanup(jobs, tmp_path):
    job = RemoteJob("never-launched")
    missing = jobs.poll(job, offset=5)
    assert (missing.state, missing.exit_code, missing.log_size, missing.pid, missing.chunk) == (
        "missing",
        None,
        0,
        None,
        b"",
    )
    assert missing.done
    assert missing.complete
    assert parse_kill_output(lines(run(build_kill_command(job), tmp_path)), job.job_id) == "missing"
    assert parse_cleanup_output(lines(run(build_cleanup_command(job), tmp_path)), job.job_id) == "missing"
    assert not (tmp_path / job.job_dir).exists()


def test_cleanup_removes_only_a_finished_job_dir(jobs, tmp_path):
    running, finished = RemoteJob("still-running"), RemoteJob("all-done")
    jobs.launch(running, f"while [ ! -f {tmp_path}/go ]; do sleep 0.05; done")
    jobs.launch(finished, "true")
    jobs.wait_state(finished, "finished")
    jobs.wait_state(running, "running")
    assert parse_cleanup_output(lines(run(build_cleanup_command(running), tmp_path)), running.job_id) == "running"
    assert parse_cleanup_output(lines(run(build_cleanup_command(finished), tmp_path)), finished.job_id) == "removed"
    assert not (tmp_path / finished.job_dir).exists()
    assert (tmp_path / running.job_dir).is_dir()
    (tmp_path / "go").touch()
    jobs.wait_state(running, "finished")


# ------------------------------------------------------------------------------------------------ job ids


def test_job_ids_are_deterministic_per_try_and_safe():
    args = {"dag_id": "My DAG.v2", "task_id": "train_model", "run_id": "manual__2024-01-01T00:00:00+00:00"}
    first = generate_job_id(**args, try_number=1)
    assert first == generate_job_id(**args, try_number=1)
    assert re.fullmatch(r"my-dag-v2-train-model-[0-9a-f]{10}-t1", first)
    second = generate_job_id(**args, try_number=2)
    assert second != first
    prefix = job_id_prefix(**args)
    assert first.startswith(prefix + "-t")
    assert second.startswith(prefix + "-t")
    others = {
        generate_job_id(**{**args, "run_id": "other"}, try_number=1),
        generate_job_id(**args, try_number=1, map_index=0),
        generate_job_id(**args, try_number=1, map_index=1),
        generate_job_id(**{**args, "task_id": "train.model"}, try_number=1),  # same slug, different hash
    }
    assert first not in others
    assert len(others) == 4
    long_id = generate_job_id(dag_id="D" * 300, task_id="T" * 300, run_id="r" * 300, try_number=10**9)
    assert len(long_id) <= 80
    assert re.fullmatch(r"[a-z0-9-]+", long_id)
    weird = generate_job_id(dag_id="ÄÖ", task_id="!!!", run_id="r", try_number=0)
    assert re.fullmatch(r"job-[0-9a-f]{10}-t0", weird)
    RemoteJob(long_id)  # valid handle
    with pytest.raises(ValueError, match="try_number"):
        generate_job_id(**args, try_number=-1)


def test_remote_job_validation_and_round_trip():
    job = RemoteJob("abc-1")
    assert job.base_dir == DEFAULT_BASE_DIR
    assert job.log_path == ".airflow-brev/jobs/abc-1/log"
    assert job.exit_code_path.endswith("/exit_code")
    assert job.pid_path.endswith("/pid")
    assert RemoteJob.from_dict(job.to_dict()) == job
    absolute = RemoteJob("abc-1", base_dir="/data/jobs/")
    assert absolute.job_dir == "/data/jobs/abc-1"
    assert RemoteJob.from_dict(absolute.to_dict()) == absolute
    assert RemoteJob("x", base_dir="~/jobs").base_dir == "jobs"
    for bad_base in ("", "/", "a/../b", "it's", 'a"b', "a\nb", "~"):
        with pytest.raises(ValueError, match="base_dir"):
            RemoteJob("x", base_dir=bad_base)
    for bad_id in ("", "..", "-x", "a/b", "a b", "a'b", "x" * 200):
        with pytest.raises(ValueError, match="job id"):
            RemoteJob(bad_id)
    with pytest.raises(ValueError, match="remote job handle"):
        RemoteJob.from_dict({"base_dir": "x"})


def test_builder_argument_validation():
    job = RemoteJob("v")
    with pytest.raises(ValueError, match="command"):
        build_launch_command(job, "  ")
    with pytest.raises(ValueError, match="environment variable name"):
        build_launch_command(job, "true", env={"A B": "x"})
    with pytest.raises(ValueError, match="longer than"):
        build_launch_command(job, "echo " + "x" * 200_000)
    with pytest.raises(ValueError, match="offset"):
        build_poll_command(job, offset=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        build_poll_command(job, offset=0, max_bytes=0)
    with pytest.raises(ValueError, match="grace_seconds"):
        build_kill_command(job, grace_seconds=-1)
    assert "plain-value" in build_launch_command(job, "true", env={"P": "plain-value"})


# ------------------------------------------------------------------------------------------------ parsing


def test_parse_poll_output_is_robust_to_noise_and_reruns():
    block = ["BREV_JOB_STATUS j1 finished 0 5 42", "BREV_JOB_LOG_BEGIN", "aGVsbG8=", "BREV_JOB_LOG_END"]
    noisy = ["WARN: malformed refresh token, logging out", "", *block, "my-instance"]
    result = parse_poll_output(noisy, "j1", 0)
    assert (result.state, result.exit_code, result.log_size, result.pid, result.chunk) == (
        "finished",
        0,
        5,
        42,
        b"hello",
    )
    assert result.complete
    # a truncated first run followed by the CLI's re-run: the last complete block wins
    rerun = [*block[:2], "aGVs", "BREV_JOB_STATUS j1 running - 7 42", "BREV_JOB_LOG_BEGIN", "", "BREV_JOB_LOG_END", "i"]
    assert parse_poll_output(rerun, "j1", 7).state == "running"
    # base64 split over several "lines" (the hook's line splitter cuts very long lines)
    split = ["BREV_JOB_STATUS j1 running - 5 42", "BREV_JOB_LOG_BEGIN", "aGVs", "bG8=", "BREV_JOB_LOG_END"]
    assert parse_poll_output(split, "j1", 0).chunk == b"hello"
    with pytest.raises(ValueError, match="No 'BREV_JOB_STATUS j1'"):
        parse_poll_output(["my-instance"], "j1", 0)
    with pytest.raises(ValueError, match="No 'BREV_JOB_STATUS j1'"):
        parse_poll_output([b.replace("j1", "j2") for b in block], "j1", 0)
    with pytest.raises(ValueError, match="Truncated"):
        parse_poll_output(block[:3], "j1", 0)
    with pytest.raises(ValueError, match="Corrupt"):
        parse_poll_output([*block[:2], "not base64!", block[3]], "j1", 0)


def test_parse_launch_output_variants():
    launched = parse_launch_output(["Agent pid 12", "BREV_JOB_LAUNCHED j1 4242", "my-instance"], "j1")
    assert (launched.launched, launched.pid, launched.existing, launched.error) == (True, 4242, None, None)
    exists = parse_launch_output(
        [
            "noise",
            "BREV_JOB_EXISTS j1",
            "BREV_JOB_STATUS j1 running - 10 77",
            "BREV_JOB_LOG_BEGIN",
            "",
            "BREV_JOB_LOG_END",
            "my-instance",
        ],
        "j1",
    )
    assert not exists.launched
    assert exists.pid == 77
    assert exists.existing == PollResult(state="running", exit_code=None, log_size=10, pid=77, chunk=b"", offset=0)
    failed = parse_launch_output(["BREV_JOB_LAUNCH_FAILED j1 base-dir", "my-instance"], "j1")
    assert (failed.launched, failed.existing, failed.error) == (False, None, "base-dir")
    with pytest.raises(ValueError, match="did not run"):
        parse_launch_output(["my-instance"], "j1")
    with pytest.raises(ValueError, match="did not run"):
        parse_launch_output(["BREV_JOB_LAUNCHED j2 1"], "j1")
    with pytest.raises(ValueError, match="No 'BREV_JOB_KILLED j1'"):
        parse_kill_output(["my-instance"], "j1")


def test_log_line_assembler_squashes_progress_bars_and_flushes():
    assembler = LogLineAssembler()
    assert assembler.feed(b"10%\r50%\r100%\nnext ") == ["100%"]
    assert assembler.feed("é".encode()[:1]) == []
    assert assembler.feed("é".encode()[1:] + b" line\r\n\xff\n") == ["next é line", "\ufffd"]
    assert assembler.feed(b"partial") == []
    assert assembler.flush() == ["partial"]
    assert assembler.flush() == []


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
    with pytest.raises(ValueError, match=r"first lines: \['a', 'b', 'c'\]"):
        parse_poll_output(["", "", "", "a", "", "b", "c"], "job-1", 0)  # the waiting poll's empty lines
    assert parse_poll_output(["", "", *_status(state="running", size="1", body=b"a")], "job-1", 0).chunk == b"a"
    with pytest.raises(ValueError, match="Corrupt log chunk"):
        parse_poll_output([*_status()[:2], "!!!", "BREV_JOB_LOG_END"], "job-1", 0)
    other_log = [*_status(body=b"job 1's secret-free but private log"), "x" * 1000]
    with pytest.raises(
        ValueError, match=r"first lines: \['BREV_JOB_STATUS job-1 .*', 'BREV_JOB_LOG_BEGIN', 'BREV_JOB_LOG_END'\]"
    ) as cut:
        parse_poll_output(other_log, "job-2", 0)  # an answer for several jobs, cut after job-1's block
    assert base64.b64encode(b"job 1").decode()[:6] not in str(cut.value)
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


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_sync_and_async_drivers_decide_alike(scenario):
    sync, async_ = drive(scenario, "sync"), drive(scenario, "async")
    assert sync == async_

    shown = [m.removeprefix(REMOTE_LINE_PREFIX) for _, m in sync["records"] if m.startswith(REMOTE_LINE_PREFIX)]
    assert len(shown) == scenario.expect_lines
    log = scenario.hook["log"].decode()
    assert "\n".join(shown) == log.rstrip("\n")[: len("\n".join(shown))]  # in order, none lost, none repeated
    if scenario.raises is not None:
        assert sync["outcome"] is None
        assert sync["error"][0] is scenario.raises
        return
    outcome = sync["outcome"]
    assert (outcome.state, outcome.exit_code) == (scenario.state, scenario.exit_code)
    assert outcome.offset == len(scenario.hook["log"])  # the whole log was drained
    assert outcome.last_line == shown[-1]


def test_retries_back_off_and_the_budget_resets_after_a_good_poll():
    result = drive(SCENARIOS[2], "sync")
    times = [call[-1] - START for call in result["calls"]]
    # poll 1 ok (wait 2), polls 2-4 drop (back-off 2, 4, 6), poll 5 ok and final
    assert times == [0.0, 2.0, 4.0, 8.0, 14.0]
    warnings = [message for level, message in result["records"] if level == logging.WARNING]
    assert [w.split(" of job")[0] for w in warnings] == ["Poll 1", "Poll 2", "Poll 3"]
    assert all("the job keeps running, retrying" in w for w in warnings)


def test_giving_up_keeps_the_error_and_warns_within_the_budget_only():
    result = drive(SCENARIOS[3], "async")
    assert result["error"] == (BrevConnectionLostError, "ssh dropped on poll 4")
    assert len([r for r in result["records"] if r[0] == logging.WARNING]) == 2


def test_large_log_is_drained_without_sleeping():
    result = drive(SCENARIOS[7], "sync")
    assert len(result["calls"]) > 5
    assert result["end"] == START  # every poll came at once: more log was waiting
    assert [call[1] for call in result["calls"]] == sorted({call[1] for call in result["calls"]})


def test_progress_is_reported_once_per_percentage():
    result = drive(SCENARIOS[8], "sync")
    progress = [message for _, message in result["records"] if "progress:" in message]
    assert progress == [f"Job {JOB.job_id} progress: {p}" for p in ("25% (1/4)", "50% (2/4)", "100% (4/4)")]
    assert result["outcome"].last_line == "no newline at the end"


@pytest.mark.parametrize(
    ("launch", "found"),
    [
        (LaunchResult(launched=True, pid=7), "started"),
        (LaunchResult(launched=False, existing=poll(RUNNING)), "running"),
        (LaunchResult(launched=False, existing=poll(FINISHED, 0)), "done"),
        (LaunchResult(launched=False, existing=poll(FINISHED, 1)), "restart"),
        (LaunchResult(launched=False, existing=poll(FINISHED, None)), "restart"),
        (LaunchResult(launched=False, existing=poll(LOST)), "restart"),
        (LaunchResult(launched=False, existing=poll(MISSING)), "restart"),
        # the state decides, not an exit code alone: only a finished pull is the image's done-marker
        (LaunchResult(launched=False, existing=poll(LOST, 0)), "restart"),
        (LaunchResult(launched=False, existing=poll(MISSING, 0)), "restart"),
        (LaunchResult(launched=False), "restart"),
    ],
)
def test_what_starting_a_pull_finds(launch, found):
    assert pull_start(launch) == found


@pytest.mark.parametrize(
    "bad",
    [{"state": "sleeping"}, {"rc": "x"}, {"rc": "1.5"}, {"size": "-"}, {"size": "3k"}, {"pid": "p42"}],
    ids=["state", "rc", "rc-fraction", "size-unknown", "size", "pid"],
)
def test_a_status_line_with_a_malformed_field_is_no_status(bad):
    """A status line whose state, exit code, log size or pid is not of the grammar (printed by something else, or
    cut) is not taken for the job's status: the poll says it found none."""
    with pytest.raises(ValueError, match="No 'BREV_JOB_STATUS job-1' line"):
        parse_poll_output(_status(**bad), "job-1", 0)
