"""The sync runner (``run_cli``) and the async runner (``arun_cli``) reach the same outcome for every scenario; so do
the readiness check (``check_readiness`` / ``acheck_readiness``) and the readiness wait (``wait_until_ready`` /
``await_readiness``, the trigger's).

Each pair runs one machine of the pure core (``core/protocol/invocation.py``, ``core/instances/readiness.py``) with the
generic sync and async drivers (``hooks/driver.py``); this test proves the drivers add no decision of their own.
Each scenario is a script of answers for a scripted ``brev`` executable (a real subprocess, see ``_FAKE``): the
same script runs once through each driver, and the outcome (result or error type and message) and the sequence
of ``brev`` sub-commands invoked must be identical, and as expected.
"""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevDuplicateNameError,
    BrevError,
    BrevInstanceNotFoundError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevTimeoutError,
    BrevTransientError,
)
from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook

if TYPE_CHECKING:
    from pathlib import Path

# A scripted brev: every invocation records its sub-command and answers with the next scripted reply for it.
_FAKE = r"""
import json, os, sys, time
root = os.environ["PARITY_ROOT"]
args = sys.argv[1:]
sub = "ssh" if os.path.basename(sys.argv[0]) == "ssh" else (args[0] if args else "")
if sub == "--version":
    print("brev version v0.6.327"); sys.exit(0)
if sub == "create" and "--help" in args:
    print("Flags:\n  --type string\n  --detached"); sys.exit(0)
with open(os.path.join(root, "calls.jsonl"), "a") as handle:
    handle.write(json.dumps(sub) + "\n")
if sub == "login":
    os.makedirs(os.path.join(os.environ["HOME"], ".brev"), exist_ok=True)
    with open(os.path.join(os.environ["HOME"], ".brev", "credentials.json"), "w") as handle:
        json.dump({"access_token": args[-1], "refresh_token": "auto-login"}, handle)
    sys.exit(0)
if sub == "refresh":  # brev refresh writes the host entries of RUNNING instances
    with open(os.path.join(os.environ["HOME"], ".brev", "ssh_config"), "w") as handle:
        handle.write("Host w-1\n  Hostname 10.0.0.1\n")
path = os.path.join(root, "script.json")
with open(path) as handle:
    script = json.load(handle)
reply = script[sub].pop(0)
with open(path, "w") as handle:
    json.dump(script, handle)
time.sleep(reply.get("sleep", 0))
if reply.get("run"):  # an exec probe that works: run its command
    import subprocess
    sys.stdout.write(subprocess.run(["/bin/bash", "-c", args[-1]], capture_output=True, text=True).stdout)
sys.stdout.write(reply.get("stdout", ""))
sys.stderr.write(reply.get("stderr", ""))
sys.exit(reply.get("exit", 0))
"""

LOGGED_OUT = {
    "exit": 1,
    "stdout": "no oauth found for token\nYou are currently logged out, would you like to log in? [Y/n]: ",
    "stderr": "EOF\n",
}
OK_LS = {"stdout": '{"workspaces": []}\n'}
NOT_FOUND = {
    "exit": 1,
    "stdout": "no oauth found for token\n",
    "stderr": "1 error occurred:\n\t* [error] \nfoo\nbar.go:1\n: instance with id/name gone-1 not found\n\n",
}

# (id, command args, timeout, script, expected outcome, expected sub-commands)
SCENARIOS = [
    ("success", ["ls", "--json"], 10, {"ls": [OK_LS]}, "ok", ["ls"]),
    (
        "not-found-behind-breadcrumb",
        ["delete", "gone-1"],
        10,
        {"delete": [NOT_FOUND]},
        BrevInstanceNotFoundError,
        ["delete"],
    ),
    (
        "no-capacity",
        ["create", "c-1", "--type", "g6e.xlarge", "--detached"],
        10,
        {
            "create": [
                {
                    "exit": 1,
                    "stderr": "[Worker 1] g6e.xlarge Failed: no capacity available\ncould only create 0/1 instances\n",
                }
            ]
        },
        BrevNoCapacityError,
        ["create"],
    ),
    (
        "no-matching-type",
        ["create", "c-2", "--type", "zz", "--detached"],
        10,
        {"create": [{"exit": 1, "stderr": 'instance type "zz" is not a recognized type\n'}]},
        BrevNoMatchingTypeError,
        ["create"],
    ),
    (
        "duplicate",
        ["create", "c-3", "--detached"],
        10,
        {"create": [{"exit": 1, "stderr": "duplicate workspace with name c-3\n"}]},
        BrevDuplicateNameError,
        ["create"],
    ),
    (
        "unknown-flag",
        ["delete", "x", "--yes"],
        10,
        {"delete": [{"exit": 1, "stderr": "unknown flag: --yes\n"}]},
        BrevInvalidInputError,
        ["delete"],
    ),
    ("logged-out-then-relogin", ["ls", "--json"], 10, {"ls": [LOGGED_OUT, OK_LS]}, "ok", ["ls", "login", "ls"]),
    (
        "logged-out-twice-is-an-auth-error",
        ["ls", "--json"],
        10,
        {"ls": [LOGGED_OUT, LOGGED_OUT]},
        BrevAuthError,
        ["ls", "login", "ls"],
    ),
    (
        "5xx-then-success",
        ["ls", "--json"],
        10,
        {"ls": [{"exit": 1, "stderr": "https://x/api/workspaces 502 Bad Gateway\n"}, OK_LS]},
        "ok",
        ["ls", "ls"],
    ),
    (
        "5xx-every-time",
        ["ls", "--json"],
        10,
        {"ls": [{"exit": 1, "stderr": "https://x/api/workspaces 503 Service Unavailable\n"}] * 3},
        BrevTransientError,
        ["ls", "ls", "ls"],
    ),
    ("timeout", ["ls", "--json"], 1, {"ls": [{"sleep": 30, **OK_LS}]}, BrevTimeoutError, ["ls"]),
]


@pytest.fixture
def scripted_brev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "brev"
    exe.write_text(f"#!{sys.executable}\n{_FAKE}")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    home = tmp_path / "home"
    home.mkdir()
    # the PATH of the CLI's environment: an ``ssh`` there (the scripted one, see ``_hook``) enables the direct probe
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PARITY_ROOT", str(tmp_path))
    conn = {"conn_type": "brev", "password": "tok-parity", "extra": {"cli_path": str(exe), "brev_home": str(home)}}
    monkeypatch.setenv("AIRFLOW_CONN_PARITY", json.dumps(conn))
    _reset_process_caches()
    yield tmp_path
    _reset_process_caches()


def _run(root: Path, args: list[str], timeout: float, script: dict, driver: str) -> tuple[object, list[str]]:
    (root / "script.json").write_text(json.dumps(script))
    (root / "calls.jsonl").write_text("")
    _reset_process_caches()
    hook = BrevHook(brev_conn_id="parity", retry_limit=3, retry_delay=0.01, log_cli_output=False)
    hook._ensure_logged_in()  # both drivers start from the same logged-in session
    (root / "calls.jsonl").write_text("")
    try:
        if driver == "sync":
            result = hook.run_cli(args, timeout=timeout, capture=True)
        else:
            result = asyncio.run(hook.arun_cli(args, timeout=timeout, capture=True))
        outcome: object = ("ok", result.exit_code, result.stdout)
    except BrevError as err:
        outcome = (type(err), str(err))
    calls = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    return outcome, calls


@pytest.mark.parametrize(
    ("args", "timeout", "script", "expected", "expected_calls"),
    [s[1:] for s in SCENARIOS],
    ids=[s[0] for s in SCENARIOS],
)
def test_sync_and_async_runners_agree(scripted_brev, args, timeout, script, expected, expected_calls):
    sync_outcome, sync_calls = _run(scripted_brev, args, timeout, json.loads(json.dumps(script)), "sync")
    async_outcome, async_calls = _run(scripted_brev, args, timeout, json.loads(json.dumps(script)), "async")
    assert sync_outcome == async_outcome
    assert sync_calls == async_calls == expected_calls
    if expected == "ok":
        assert sync_outcome[0] == "ok"
    else:
        assert sync_outcome[0] is expected


# ------------------------------------------------------------------------------------------------ readiness


def _listing(status: str, shell: str = "READY") -> dict:
    item = {"name": "w-1", "id": "id-1", "status": status, "build_status": "COMPLETED", "shell_status": shell}
    return {"stdout": json.dumps({"workspaces": [item]}) + "\n"}


PROBE_OK = {"run": True}
REFUSED = {"exit": 255, "stderr": "ssh: connect to host 10.0.0.1 port 22: Connection refused\n"}

# (id, script, expected stage, expected sub-commands)
CHECKS = [
    ("ready", {"ls": [_listing("RUNNING")], "exec": [PROBE_OK]}, "ready", ["ls", "exec"]),
    ("deploying-no-probe", {"ls": [_listing("DEPLOYING")]}, "provisioning", ["ls"]),
    ("missing", {"ls": [OK_LS]}, "missing", ["ls"]),
    ("probe-times-out", {"ls": [_listing("RUNNING")], "exec": [{"sleep": 30}]}, "ssh", ["ls", "exec"]),
    ("probe-no-nonce", {"ls": [_listing("RUNNING")], "exec": [{"stdout": "hello\n"}]}, "ssh", ["ls", "exec"]),
    # with an ``ssh`` on the CLI's PATH: the direct probe through the host entry ``brev refresh`` writes
    ("ssh-ready", {"ls": [_listing("RUNNING")], "refresh": [{}], "ssh": [PROBE_OK]}, "ready", ["ls", "refresh", "ssh"]),
    (
        "ssh-refused-then-ready",
        {"ls": [_listing("RUNNING")], "refresh": [{}], "ssh": [REFUSED, REFUSED, PROBE_OK]},
        "ready",
        ["ls", "refresh", "ssh", "ssh", "ssh"],
    ),
    (
        "ssh-denied-hands-over-to-exec",
        {"ls": [_listing("RUNNING")], "refresh": [{}], "ssh": [{"exit": 255, "stderr": "Permission denied.\n"}] * 2}
        | {"exec": [PROBE_OK]},
        "ready",
        ["ls", "refresh", "ssh", "exec", "ssh"],  # brev exec reached it: one confirming direct attempt
    ),
    (
        "refresh-fails-hands-over-to-exec",
        {"ls": [_listing("RUNNING")], "refresh": [{"exit": 1, "stderr": "refresh failed\n"}], "ssh": []}
        | {"exec": [PROBE_OK]},
        "ready",
        ["ls", "refresh", "exec"],
    ),
]


def _hook(root: Path, script: dict) -> BrevHook:
    (root / "script.json").write_text(json.dumps(script))
    ssh = root / "bin" / "ssh"  # the scripted ssh is on PATH only for scenarios that script it
    ssh.unlink(missing_ok=True)
    if "ssh" in script:
        ssh.write_text((root / "brev").read_text())
        ssh.chmod(0o755)
    (root / "home" / ".brev" / "ssh_config").unlink(missing_ok=True)
    _reset_process_caches()
    hook = BrevHook(brev_conn_id="parity", retry_limit=3, retry_delay=0.01, log_cli_output=False)
    hook._ensure_logged_in()
    (root / "calls.jsonl").write_text("")
    return hook


def _subcommands(root: Path) -> list[str]:
    return [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("script", "stage", "expected_calls"), [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS])
def test_sync_and_async_readiness_checks_agree(scripted_brev, script, stage, expected_calls):
    outcomes = []
    for driver in ("sync", "async"):
        hook = _hook(scripted_brev, json.loads(json.dumps(script)))
        budget = 10 if "refresh" in script else 1  # a direct probe hands over what is left of the budget
        if driver == "sync":
            readiness = hook.check_readiness("w-1", probe_timeout=budget)
        else:
            readiness = asyncio.run(hook.acheck_readiness("w-1", probe_timeout=budget))
        outcomes.append(((readiness.stage, readiness.terminal), _subcommands(scripted_brev)))
    assert outcomes[0] == outcomes[1] == ((stage, stage == "missing"), expected_calls)


# (id, script, expected end of the wait, expected sub-commands)
WAITS = [
    (
        "boots-then-ready",
        {"ls": [_listing("DEPLOYING"), _listing("RUNNING", "NOT READY"), _listing("RUNNING")], "exec": [PROBE_OK]},
        "ready",
        ["ls", "ls", "ls", "exec"],
    ),
    (
        "a-transient-listing-failure-is-waited-out",
        {
            "ls": [{"exit": 1, "stderr": "https://x/api/workspaces 502 Bad Gateway\n"}] * 3 + [_listing("RUNNING")],
            "exec": [PROBE_OK],
        },
        "ready",
        ["ls", "ls", "ls", "ls", "exec"],
    ),
    ("failure-ends-it", {"ls": [_listing("DEPLOYING"), _listing("FAILURE")]}, "failed", ["ls", "ls"]),
    ("deleted-ends-it", {"ls": [OK_LS]}, "failed", ["ls"]),
]


@pytest.mark.parametrize(("script", "end", "expected_calls"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS])
def test_sync_and_async_readiness_waits_agree(scripted_brev, script, end, expected_calls):
    import time

    outcomes = []
    for driver in ("sync", "async"):
        hook = _hook(scripted_brev, json.loads(json.dumps(script)))
        if driver == "sync":
            try:
                hook.wait_until_ready("w-1", timeout=60, poll_interval=0.05)
                verdict = "ready"
            except BrevError as err:
                verdict = "failed" if type(err).__name__ == "BrevInstanceFailedError" else type(err).__name__
        else:
            step = asyncio.run(hook.await_readiness("w-1", deadline=time.time() + 60, poll_interval=0.05, log=hook.log))
            verdict = step.action
        outcomes.append((verdict, _subcommands(scripted_brev)))
    assert outcomes[0] == outcomes[1] == (end, expected_calls)
