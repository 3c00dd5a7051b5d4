"""The exactly-once wrapper, executed by a real bash (the remote side is bash on Brev)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest

from airflow_provider_brev.core.jobs.scripts import build_secret_env_file
from airflow_provider_brev.core.jobs.shell import (
    FOREGROUND_KILLED,
    FOREGROUND_NONE,
    build_foreground_kill_command,
    build_once_command,
    env_prefix,
    parse_once_marker,
    redact_filter,
    stale_secret_cleanup,
    strip_once_stdout,
    validate_env,
)
from airflow_provider_brev.core.secrets import redact, redaction_fragments, secret_fragments

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

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
    "Zw==\n"
    "-----END PRIVATE KEY-----\n"
)
CREDENTIAL = (
    "{\n"
    '  "type": "service_account",\n'
    '  "private_key_id": "5f1e0c2a9b7d4e3f8a6b",\n'
    '  "client_email": "trainer@example-project.iam.gserviceaccount.com",\n'
    '  "scopes": [\n'
    '    "storage"\n'
    "  ],\n"
    '  "n": 1\r\n'
    "}"
)
#: What must leave the instance redacted: every line that carries part of a secret.
SECRET_LINES = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
    '"private_key_id": "5f1e0c2a9b7d4e3f8a6b",',
    '"client_email": "trainer@example-project.iam.gserviceaccount.com",',
]


def awks() -> list[str]:
    """The awks this machine has: the filter must work with mawk (Ubuntu's awk) and gawk alike."""
    found = [name for name in ("mawk", "gawk") if shutil.which(name)]
    assert found
    return found


def with_awk(tmp_path, awk: str) -> dict[str, str]:
    """PATH whose ``awk`` is ``awk``."""
    bin_dir = tmp_path / f"bin-{awk}"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "awk").unlink(missing_ok=True)
    (bin_dir / "awk").symlink_to(shutil.which(awk))
    return {"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_secret_fragments_of_single_and_multi_line_values():
    assert secret_fragments("") == []
    assert secret_fragments("ab") == ["ab"]  # a one-line value is redacted whole, however short
    assert secret_fragments(" padded ") == [" padded "]
    assert secret_fragments(PEM) == ["-----BEGIN PRIVATE KEY-----", *SECRET_LINES[:2], "-----END PRIVATE KEY-----"]
    assert secret_fragments(CREDENTIAL) == [
        '"type": "service_account",',
        *SECRET_LINES[2:],
        '"scopes": [',
        '"storage"',
        '"n": 1',
    ]
    # Empty, tiny and punctuation-only lines are not secrets: redacting them would redact all output.
    assert secret_fragments('{\n\n  },\n-----\n\t[""]\nab\nabcd\n') == []
    assert secret_fragments("é€\nÄÖ\nü\n") == ["é€"]  # bytes count (5 and 4 here), as the filter counts them


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


@pytest.mark.parametrize("awk", awks())
@pytest.mark.parametrize(
    "value",
    [PEM, CREDENTIAL, "one-line", "x", "a\nb", "line one\r\nline two\r\n", "  spaced out  \n}\n", "ÄÖ\né€\nü\n"],
)
def test_the_filter_redacts_exactly_the_fragments_the_masker_knows(tmp_path, awk, value):
    """The rule is written twice (awk on the instance, Python for Airflow's masker): they must agree."""
    lines = [*value.split("\n"), value, "no secret here"]
    done = subprocess.run(
        ["bash", "-c", redact_filter(["V"])],
        input=("\n".join(lines) + "\n").encode(),
        env={**with_awk(tmp_path, awk), "V": value},
        capture_output=True,
    )
    fragments = redaction_fragments({"V": value})
    expected = [redact(line, fragments) for line in "\n".join(lines).split("\n")]
    assert done.stdout.decode().split("\n")[:-1] == expected


def test_the_airflow_masker_knows_every_line_of_a_multi_line_secret():
    try:
        from airflow.sdk.log import redact
    except ImportError:  # Airflow 3.0
        from airflow.sdk.execution_time.secrets_masker import redact

    from airflow_provider_brev._compat import mask_secret

    mask_secret(PEM)
    mask_secret(CREDENTIAL)
    for line in SECRET_LINES:
        assert redact(f"[box] {line}") == "[box] ***"
    assert redact("{") == "{" and redact("}") == "}"  # trivial lines stay
