"""The exactly-once wrapper, executed by a real bash (the remote side is bash on Brev)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from airflow_provider_brev.core.jobs.scripts import build_secret_env_file
from airflow_provider_brev.core.jobs.shell import (
    FOREGROUND_KILLED,
    FOREGROUND_NONE,
    STALE_SECRET_MINUTES,
    STARTED_ELSEWHERE,
    build_foreground_kill_command,
    build_once_command,
    env_prefix,
    parse_once_marker,
    secret_file_name,
    stale_secret_cleanup,
    strip_once_stdout,
    validate_env,
)
from airflow_provider_brev.core.protocol.remote_scripts import load_script
from unit.core.jobs.shell_helpers import CREDENTIAL, PEM, SECRET_LINES, awks, with_awk

MARKER = "BREV_AIRFLOW_RC_test0001"


def run(script: str, home) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", script],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_wrapper_reports_real_exit_code_and_always_exits_zero(tmp_path):
    script = build_once_command("echo hello; exit 3", run_id="r1", marker=MARKER)
    done = run(script, tmp_path)
    assert done.returncode == 0
    assert parse_once_marker(done.stderr.splitlines(), MARKER) == 3
    assert strip_once_stdout(done.stdout.split("\n")[:-1], "inst") == ["hello"]


def test_wrapper_never_runs_twice_for_the_same_run_id(tmp_path):
    counter = tmp_path / "count"
    script = build_once_command(f"echo x >> {counter}; exit 7", run_id="same", marker=MARKER)
    first, second = run(script, tmp_path), run(script, tmp_path)
    assert counter.read_text() == "x\n"
    assert parse_once_marker(first.stderr.splitlines(), MARKER) == 7
    assert parse_once_marker(second.stderr.splitlines(), MARKER) == 7  # the re-run only reports


def test_rerun_while_first_is_unfinished_reports_started(tmp_path):
    (tmp_path / ".airflow-brev/runs/busy").mkdir(parents=True)
    done = run(build_once_command("echo never", run_id="busy", marker=MARKER), tmp_path)
    assert "never" not in done.stdout
    assert parse_once_marker(done.stderr.splitlines(), MARKER) == "started"


def test_quoting_env_and_cwd(tmp_path):
    work = tmp_path / "dir with space"
    work.mkdir()
    script = build_once_command(
        'printf \'%s|%s|%s\\n\' "$A" "$B" "$(pwd)"',
        run_id="q",
        marker=MARKER,
        env={"A": "it's $HOME", "B": "a;b"},
        cwd=str(work),
    )
    done = run(script, tmp_path)
    assert done.stdout.splitlines()[0] == f"it's $HOME|a;b|{work}"


def test_output_without_trailing_newline_keeps_its_last_line(tmp_path):
    done = run(build_once_command("printf 'no-newline'", run_id="n", marker=MARKER), tmp_path)
    lines = done.stdout.split("\n")
    assert strip_once_stdout([*lines[:-1], "inst"], "inst") == ["no-newline"]


def test_forged_marker_from_the_command_is_ignored(tmp_path):
    done = run(build_once_command("echo BREV_AIRFLOW_RC_other=0 >&2; exit 4", run_id="f", marker=MARKER), tmp_path)
    assert parse_once_marker(done.stderr.splitlines(), MARKER) == 4


def test_env_validation():
    with pytest.raises(ValueError, match="Invalid environment variable name"):
        validate_env({"BAD-NAME": "x"})
    assert env_prefix({}) == ""
    assert env_prefix({"A": "1 2"}) == "env 'A=1 2' "
    with pytest.raises(ValueError, match="run_id"):
        build_once_command("x", run_id="a b", marker=MARKER)


def test_secret_env_file_is_sourced_then_deleted(tmp_path):
    secret = tmp_path / "s.env"
    secret.write_text("export TOKEN='s3cr3t value'\n")
    script = build_once_command('echo "got:$TOKEN"', run_id="sec", marker=MARKER, secret_env_path=str(secret))
    assert "s3cr3t" not in script
    done = run(script, tmp_path)
    assert done.stdout.splitlines()[0] == "got:s3cr3t value"
    assert not secret.exists()


def test_unreadable_secret_file_does_not_run_the_command(tmp_path):
    script = build_once_command("echo ran", run_id="nosec", marker=MARKER, secret_env_path=str(tmp_path / "missing"))
    done = run(script, tmp_path)
    assert "ran" not in done.stdout
    assert parse_once_marker(done.stderr.splitlines(), MARKER) != 0


def test_secret_file_is_deleted_even_when_cwd_does_not_exist(tmp_path):
    secret = tmp_path / "s.env"
    secret.write_text("export TOKEN='s3cr3t'\n")
    script = build_once_command(
        "echo ran", run_id="badcwd", marker=MARKER, cwd=str(tmp_path / "no-such-dir"), secret_env_path=str(secret)
    )
    done = run(script, tmp_path)
    assert parse_once_marker(done.stderr.splitlines(), MARKER) != 0  # the cd failed: the command did not run
    assert "ran" not in done.stdout
    assert not secret.exists()  # ... and the secret did not stay behind


def test_a_background_child_does_not_hold_the_command_open(tmp_path):
    script = build_once_command("sleep 30 & echo launched", run_id="bg", marker=MARKER)
    proc = subprocess.Popen(  # the pipes are what ssh waits on: they must close when the command exits
        ["bash", "-c", script],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=15)
    finally:
        pid = int((tmp_path / ".airflow-brev/runs/bg/pid").read_text())
        os.killpg(pid, signal.SIGKILL)  # the background sleep, in the command's own session
    assert stdout.splitlines()[0] == "launched"
    assert parse_once_marker(stderr.splitlines(), MARKER) == 0


def test_secret_values_printed_by_the_command_leave_redacted(tmp_path):
    secret = tmp_path / "s.env"
    secret.write_text("export API_SECRET='p@ss w0rd/*'\nexport OTHER='x'\n")
    script = build_once_command(
        'echo "key=$API_SECRET"; echo "twice $API_SECRET$API_SECRET" >&2; echo "other=$OTHER"',
        run_id="redact",
        marker=MARKER,
        secret_env_path=str(secret),
        secret_names=["API_SECRET"],
    )
    done = run(script, tmp_path)
    assert done.stdout.splitlines()[:2] == ["key=***", "other=x"]
    assert "twice ******" in done.stderr
    assert "p@ss" not in done.stdout + done.stderr
    assert parse_once_marker(done.stderr.splitlines(), MARKER) == 0


def test_foreground_kill_stops_the_command_and_its_children(tmp_path):
    script = build_once_command("sleep 300 & sleep 301; echo never", run_id="kill1", marker=MARKER)
    proc = subprocess.Popen(
        ["bash", "-c", script],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pid_file = tmp_path / ".airflow-brev/runs/kill1/pid"
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():  # bounded wait for the command to have started
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    session = int(pid_file.read_text())
    killed = run(build_foreground_kill_command("kill1", grace_seconds=0.2), tmp_path)
    assert killed.stdout.strip() == FOREGROUND_KILLED
    stdout, stderr = proc.communicate(timeout=15)  # the wrapper ends: its command was killed
    assert "never" not in stdout
    assert parse_once_marker(stderr.splitlines(), MARKER) not in (0, None)
    deadline = time.monotonic() + 10  # signalled processes disappear once reaped: wait (bounded) for that
    while subprocess.run(["pgrep", "-s", str(session)], capture_output=True, check=False).stdout.strip():
        assert time.monotonic() < deadline, "a process of the command's session is still alive"
        time.sleep(0.05)
    assert run(build_foreground_kill_command("nothing-ran"), tmp_path).stdout.strip() == FOREGROUND_NONE


def test_stale_secret_cleanup_removes_named_and_old_files_only(tmp_path):
    named = tmp_path / ".airflow-brev-secret-try1.env"
    old = tmp_path / ".airflow-brev-secret-dead-worker.env"
    fresh = tmp_path / ".airflow-brev-secret-running-task.env"
    for path in (named, old, fresh):
        path.write_text("export K='v'\n")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    done = run(stale_secret_cleanup(["try1"]), tmp_path)
    assert done.returncode == 0
    assert (named.exists(), old.exists(), fresh.exists()) == (False, False, True)


# --- multi-line secrets: a PEM key, a pretty-printed JSON credential ------------------------------------------


@pytest.mark.parametrize("awk", awks())
def test_every_line_of_a_multi_line_secret_leaves_redacted(tmp_path, awk):
    secret = tmp_path / "s.env"
    secret.write_text(build_secret_env_file({"PEM": PEM, "CREDENTIAL": CREDENTIAL}))
    command = 'printf "%s\\n" "$PEM"; printf "%s\\n" "$CREDENTIAL" >&2; echo "plain output stays"; echo "{"'
    script = build_once_command(
        command,
        run_id=f"multi-{awk}",
        marker=MARKER,
        secret_env_path=str(secret),
        secret_names=["CREDENTIAL", "PEM"],
    )
    done = subprocess.run(["bash", "-c", script], env=with_awk(tmp_path, awk), capture_output=True, text=True)
    for line in SECRET_LINES:
        assert line not in done.stdout + done.stderr
    assert "5f1e0c2a9b7d4e3f8a6b" not in done.stdout + done.stderr
    assert done.stdout.splitlines()[:8] == ["***", "***", "***", "Zw==", "***", "", "plain output stays", "{"]
    assert done.stderr.splitlines()[:4] == ["{", "  ***", "  ***", "  ***"]
    assert parse_once_marker(done.stderr.splitlines(), MARKER) == 0


def test_the_once_wrapper_reports_the_word_its_parser_knows():
    assert "|| echo started)" in load_script("once") and STARTED_ELSEWHERE == "started"


def test_shell_wrapper_checks_and_words():
    assert (FOREGROUND_KILLED, FOREGROUND_NONE, STALE_SECRET_MINUTES) == ("BREV_FG_KILLED", "BREV_FG_NONE", 60)
    assert secret_file_name("c-1") == ".airflow-brev-secret-c-1.env"
    for bad in ("a b", "", "x;y"):
        with pytest.raises(ValueError, match="must be alphanumeric"):
            secret_file_name(bad)
        with pytest.raises(ValueError, match="run_id .* must be alphanumeric"):
            build_foreground_kill_command(bad)
        with pytest.raises(ValueError, match="run_id .* must be alphanumeric"):
            build_once_command("true", run_id=bad, marker="m")
    with pytest.raises(ValueError, match="marker must be alphanumeric"):
        build_once_command("true", run_id="r", marker="a-b")
    assert "__B_STALE_MINUTES=60\n" in stale_secret_cleanup()
    assert "__B_GRACE=1\n" in build_foreground_kill_command("r")
    assert "__B_GRACE=2.5\n" in build_foreground_kill_command("r", grace_seconds=2.5)
    with pytest.raises(ValueError, match="Invalid environment variable name 3"):
        validate_env({3: "x"})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("lines", "kept"),
    [
        (["out", "", "w-1"], ["out"]),
        (["out", "w-1"], ["out"]),
        (["out", ""], ["out"]),
        (["w-1 "], []),
        ([], []),
        ([""], []),
        (["out", "other"], ["out", "other"]),
    ],
)
def test_strip_once_stdout(lines, kept):
    assert strip_once_stdout(list(lines), "w-1") == kept
