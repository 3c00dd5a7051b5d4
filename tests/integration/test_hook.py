"""BrevHook against the bundled simulator (both CLI profiles): the hook must survive the real CLI's quirks."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pytest
from helpers import cli_calls, connection_in_metadata_db, metadata_connections

from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLINotFoundError,
    BrevDuplicateNameError,
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevPlacementRequiredError,
    BrevTimeoutError,
)
from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    _reset_process_caches()
    yield
    _reset_process_caches()


@pytest.fixture
def hook(active_sim, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", active_sim.connection_json())
    return BrevHook(retry_delay=0.05)


def commands(sim, name):
    return cli_calls(sim, name)


def _subcommand(argv):
    return next((a for a in argv if not a.startswith("-")), None)


def test_login_from_connection_then_cached(brev_sim_both, monkeypatch):
    sim = brev_sim_both
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", sim.connection_json())
    hook = BrevHook()
    assert hook.list_instances() == []
    assert hook.list_instances() == []
    assert len(commands(sim, "login")) == 1


def test_login_runs_in_a_scratch_home_and_only_a_success_replaces_the_session(brev_sim, monkeypatch):
    """The CLI writes credentials.json before it asks the API about the token: the hook logs in against a scratch
    HOME and moves what a successful login wrote into ~/.brev. A failed login leaves the files byte for byte; a
    scratch HOME a killed login left behind is removed by the next login."""
    brev_dir = brev_sim.home / ".brev"
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json(token="bad-token"))
    with pytest.raises(BrevAuthError, match="rejected the login"):
        BrevHook().list_instances()
    assert not (brev_dir / "credentials.json").exists()
    brev_sim.login()
    before = {path.name: path.read_bytes() for path in brev_dir.iterdir() if path.is_file()}
    stale = brev_dir / ".airflow-provider-brev-login-killed" / ".brev"
    stale.mkdir(parents=True)
    (stale / "credentials.json").write_text("{}")
    _reset_process_caches()
    with pytest.raises(BrevAuthError, match="rejected the login"):
        BrevHook().list_instances()
    after = {path.name: path.read_bytes() for path in brev_dir.iterdir() if path.is_file()}
    assert after == before
    assert [path.name for path in brev_dir.iterdir() if path.is_dir()] == []
    assert [call["exit_code"] for call in commands(brev_sim, "login")] == [1, 1]
    fresh = brev_sim.make_token()  # another valid token: its login replaces the session
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json(token=fresh))
    _reset_process_caches()
    assert BrevHook().list_instances() == []
    assert [call["exit_code"] for call in commands(brev_sim, "login")] == [1, 1, 0]
    stored = json.loads((brev_dir / "credentials.json").read_text())
    assert stored == {"access_token": fresh, "refresh_token": "auto-login"}
    assert [path.name for path in brev_dir.iterdir() if path.is_dir()] == []


def test_login_from_brev_api_token_without_connection(brev_sim, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_BREV_DEFAULT", raising=False)
    monkeypatch.setenv("BREV_API_TOKEN", brev_sim.valid_token)
    monkeypatch.setenv("BREV_CLI", str(brev_sim.brev_path))
    ok, message = BrevHook().test_connection()
    assert ok, message
    assert len(commands(brev_sim, "login")) == 1


def test_missing_connection_is_a_clear_error(brev_sim, monkeypatch):
    monkeypatch.delenv("BREV_API_TOKEN", raising=False)
    with pytest.raises(BrevAuthError, match="connection 'nope' is not defined"):
        BrevHook(brev_conn_id="nope").list_instances()
    assert brev_sim.calls() == []


def test_connection_stored_in_the_db_but_tested_outside_a_task_names_the_real_cause(airflow_db, brev_sim, monkeypatch):
    """Airflow 3.3's Task SDK resolves connections outside a running task (a Python shell; this test process) from
    env vars and secrets backends only: a connection that exists in the metadata DB is "not defined" here. The
    message must say so and name the fixes that work, not send the user to create it again."""
    from airflow_provider_brev._compat import AIRFLOW_V_3_1_PLUS

    if not AIRFLOW_V_3_1_PLUS:
        pytest.skip("Airflow 3.0's BaseHook reads the metadata database outside tasks too")
    monkeypatch.delenv("BREV_API_TOKEN", raising=False)
    with connection_in_metadata_db("brev_in_db_only", conn_type="brev", password=brev_sim.valid_token) as conn_id:
        # it is really there, where the UI and `airflow connections add` put it
        assert metadata_connections(conn_id) == 1
        ok, message = BrevHook(brev_conn_id=conn_id).test_connection()
    assert "Outside a running task (a Python shell, a script), Airflow 3.1+ resolves connections only" in message
    assert "`AIRFLOW__CORE__TEST_CONNECTION=Enabled airflow connections test brev_in_db_only`" in message
    assert "set AIRFLOW_CONN_BREV_IN_DB_ONLY in this environment" in message
    assert ok is False
    assert brev_sim.calls() == []


def test_relogin_after_token_expiry_mid_run(brev_sim_both, hook):
    sim = brev_sim_both
    hook.create_instance("expiry-1", gpu="L40S:1")
    sim.expire_sessions()  # the console token's session died (hourly expiry)
    assert [i.name for i in hook.list_instances()] == ["expiry-1"]
    assert len(commands(sim, "login")) == 2
    assert hook.delete_instance("expiry-1")


def test_bad_token_is_rejected_clearly_and_creates_nothing(brev_sim, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json(token="not-a-real-token"))
    with pytest.raises(BrevAuthError, match="rejected the login"):
        BrevHook().create_instance("bad-token", gpu="L40S:1")
    assert commands(brev_sim, "create") == []


def test_create_with_gpu_spec_released_resolves_types(brev_sim, hook):
    assert brev_sim.profile == "released"
    instance = hook.create_instance("gpu-released", gpu="L40S:1", cloud_cred_id="cc-1", workspace_group_id="wg-1")
    assert instance.name == "gpu-released"
    (create,) = commands(brev_sim, "create")
    argv = create["argv"]
    assert "--gpu" not in argv and "--cloud-cred-id" not in argv and "--workspace-group-id" not in argv
    types = argv[argv.index("--type") + 1].split(",")
    assert types, argv
    catalog = {o.type: o for o in hook.search_instance_types()}
    assert all(catalog[t].gpu_name == "L40S" and catalog[t].gpu_count == 1 for t in types)
    assert [catalog[t].price_per_hour for t in types] == sorted(catalog[t].price_per_hour for t in types)


@pytest.mark.parametrize("brev_sim_profile", ["documented"])
def test_create_with_gpu_spec_documented_passes_placement(brev_sim, hook):
    brev_sim.set_accounts(
        cloud_credentials=[{"id": "cc-1", "name": "aws"}, {"id": "cc-2", "name": "gcp"}],
        workspace_groups=[{"id": "wg-1", "name": "a"}, {"id": "wg-2", "name": "b"}],
    )
    hook.create_instance("gpu-documented", gpu="L40S:1", cloud_cred_id="cc-2", workspace_group_id="wg-1")
    (create,) = commands(brev_sim, "create")
    argv = create["argv"]
    assert argv[argv.index("--gpu") + 1] == "L40S:1"
    assert argv[argv.index("--cloud-cred-id") + 1] == "cc-2"
    assert argv[argv.index("--workspace-group-id") + 1] == "wg-1"


@pytest.mark.parametrize("brev_sim_profile", ["documented"])
def test_multi_credential_account_without_placement_names_the_extras(brev_sim, hook):
    brev_sim.set_accounts(
        cloud_credentials=[{"id": "cc-1", "name": "aws"}, {"id": "cc-2", "name": "gcp"}],
        workspace_groups=[{"id": "wg-1", "name": "a"}],
    )
    with pytest.raises(BrevPlacementRequiredError, match="cloud_cred_id") as err:
        hook.create_instance("needs-placement", gpu="L40S:1")
    assert "workspace_group_id" in str(err.value)
    assert brev_sim.instances() == []


def test_create_that_ends_in_failure_raises(brev_sim_both, hook):
    brev_sim_both.set_fault("boot_failure", message="GPU host lost during provisioning")
    with pytest.raises(BrevInstanceFailedError, match="FAILURE"):
        hook.create_instance("boot-fails", gpu="L40S:1", wait=True, timeout=30)


def test_duplicate_name_while_deleting_is_a_clear_error(brev_sim_both, hook):
    brev_sim_both.set_timings(delete_seconds=30)
    hook.create_instance("dup-1", gpu="L40S:1")
    assert hook.delete_instance("dup-1")
    with pytest.raises(BrevDuplicateNameError, match="being deleted"):
        hook.create_instance("dup-1", gpu="L40S:1")


def test_delete_twice_succeeds(brev_sim_both, hook):
    hook.create_instance("del-1", gpu="L40S:1")
    assert hook.delete_instance("del-1", wait=True, timeout=30, poll_interval=0.1) is True
    assert hook.delete_instance("del-1") is False
    assert brev_sim_both.instances() == []


def test_exec_runs_failing_command_once_with_real_exit_code(brev_sim_both, hook):
    sim = brev_sim_both
    hook.create_instance("exec-1", gpu="L40S:1")
    hook.wait_until_ready("exec-1", timeout=60, poll_interval=0.1)
    result = hook.run_command("exec-1", "echo ran >> counter; echo out; exit 3")
    assert result.exit_code == 3
    assert result.output.splitlines() == ["out"]  # no trailing instance-name line
    assert (sim.sandbox("exec-1") / "counter").read_text() == "ran\n"
    ok = hook.run_command("exec-1", "printf 'a\\nb\\n'")
    assert (ok.exit_code, ok.output.splitlines(), ok.last_line) == (0, ["a", "b"], "b")


def test_exec_on_a_fresh_instance_survives_the_cold_path(brev_sim_both, hook):
    """The first exec after create has no ssh alias yet: the CLI fails its fast path and refreshes."""
    hook.create_instance("cold-1", gpu="L40S:1", wait=True, timeout=60)
    result = hook.run_command("cold-1", "echo hi >> counter; cat counter")
    assert (result.exit_code, result.output) == (0, "hi")


def test_5xx_is_retried_and_succeeds(brev_sim_both, hook):
    brev_sim_both.set_fault("http_5xx", command="ls", times=1)
    assert hook.list_instances() == []
    assert len(commands(brev_sim_both, "ls")) == 2


def test_5xx_on_create_is_retried(brev_sim, hook):
    brev_sim.set_fault("http_5xx", command="create", times=1)
    hook.create_instance("retry-create", gpu="L40S:1")
    assert len(commands(brev_sim, "create")) == 2
    assert [i["name"] for i in brev_sim.instances()] == ["retry-create"]


def test_capacity_errors_are_typed(brev_sim, hook):
    for instance_type in hook.resolve_instance_types(gpu="L40S:1"):
        brev_sim.set_fault("capacity", type=instance_type, times=None)
    with pytest.raises(BrevNoCapacityError, match="capacity"):
        hook.create_instance("no-capacity", gpu="L40S:1")
    assert brev_sim.instances() == []


def test_capacity_on_first_type_falls_back(brev_sim, hook):
    from airflow_provider_brev.testing.fake_brev import DEFAULT_CATALOG

    second = {
        **next(t for t in DEFAULT_CATALOG if t["type"] == "g6e.xlarge"),
        "type": "l40s-1x-alt",
        "price_per_hour": 2.5,
    }
    brev_sim.set_catalog([*DEFAULT_CATALOG, second])
    types = hook.resolve_instance_types(gpu="L40S:1")
    assert types == ["g6e.xlarge", "l40s-1x-alt"]  # cheapest first
    brev_sim.set_fault("capacity", type=types[0], times=None)
    instance = hook.create_instance("fallback", gpu="L40S:1")
    assert instance.instance_type == "l40s-1x-alt"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"gpu": "NOSUCHGPU:1"}, BrevNoMatchingTypeError),
        ({"gpu": "L40S:3"}, BrevNoMatchingTypeError),
        ({"instance_types": ["no.such.type"]}, BrevNoMatchingTypeError),
        ({"gpu": "L40S:1", "instance_types": ["g6e.xlarge"]}, BrevInvalidInputError),
        ({"gpu": "L40S:zero"}, BrevInvalidInputError),
    ],
)
def test_bad_requests_create_nothing(brev_sim_both, hook, kwargs, error):
    with pytest.raises(error):
        hook.create_instance("bad-request", **kwargs)
    assert commands(brev_sim_both, "create") == []


@pytest.mark.parametrize("name", ["-starts-with-dash", "x" * 64, "has space", ""])
def test_invalid_names_create_nothing(brev_sim, hook, name):
    with pytest.raises(BrevInvalidInputError):
        hook.create_instance(name, gpu="L40S:1")
    assert [c for c in brev_sim.calls() if "--help" not in c["argv"] and "--version" not in c["argv"]] == []


def test_missing_cli_names_the_install_page(brev_sim, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json(cli_path=str(tmp_path / "nope" / "brev")))
    with pytest.raises(BrevCLINotFoundError, match="https://docs.nvidia.com/brev/"):
        BrevHook().list_instances()
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", json.dumps({"conn_type": "brev", "password": brev_sim.valid_token}))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("BREV_CLI", raising=False)
    with pytest.raises(BrevCLINotFoundError, match="not found on PATH"):
        BrevHook().list_instances()


def test_token_only_ever_on_the_login_command_line_and_never_logged(brev_sim_both, hook, caplog, capfd):
    sim = brev_sim_both
    token = sim.valid_token
    with caplog.at_level(logging.DEBUG):
        hook.create_instance("secret-1", gpu="L40S:1")
        hook.wait_until_ready("secret-1", timeout=60, poll_interval=0.1)
        hook.run_command("secret-1", "echo hello")
        sim.expire_sessions()
        hook.delete_instance("secret-1")
    calls = sim.calls()
    assert {_subcommand(c["argv"]) for c in calls} >= {"login", "create", "ls", "exec", "delete"}
    for call in calls:
        carries = token in json.dumps(call)
        assert carries == (_subcommand(call["argv"]) == "login"), call["argv"][:2]
    captured = capfd.readouterr()
    assert token not in caplog.text
    assert token not in captured.out + captured.err


def test_importing_the_hook_does_not_import_boto3():
    code = "import sys, airflow_provider_brev.hooks.brev; print('boto3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=dict(os.environ))
    assert out.stdout.strip() == "False"


def test_stdin_is_never_inherited(brev_sim, hook):
    """The CLI reads names from a non-TTY stdin; the hook must hand it /dev/null so nothing blocks."""
    r, w = os.pipe()  # an open pipe on our stdin would block `brev create` forever
    saved = os.dup(0)
    os.dup2(r, 0)
    try:
        hook.create_instance("stdin-1", gpu="L40S:1")
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(r)
        os.close(w)
    assert all(not c.get("stdin_read") for c in brev_sim.calls())


def test_delete_of_gone_instance_is_false_in_a_session_that_prints_breadcrumbs(brev_sim_both, monkeypatch):
    """A session whose stored token is not a JWT prints `no oauth found for token` on every call: noise, not
    "logged out". Deleting a just-deleted and a never-created instance must return False (not BrevAuthError)."""
    sim = brev_sim_both
    sim.login(token=sim.make_token(issuer="https://sso.example.com"))  # a JWT no authenticator knows
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", sim.connection_json(token=""))
    hook = BrevHook(retry_delay=0.05)
    hook.create_instance("crumb-1", gpu="L40S:1")
    listing = subprocess.run(
        [str(sim.brev_path), "ls", "--json"], env=hook._env(), stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert listing.stdout.startswith("no oauth found for token\n")  # this session prints the breadcrumb every call
    assert hook.delete_instance("crumb-1", wait=True) is True
    assert hook.delete_instance("crumb-1") is False  # just deleted
    assert hook.delete_instance("never-created-1") is False
    assert not sim.calls("login")  # nothing was taken for "logged out"


def test_run_command_timeout_keeps_every_line_printed_before_it(brev_sim, hook):
    hook.create_instance("fg-timeout-1", gpu="L40S:1")
    hook.wait_until_ready("fg-timeout-1", 60, poll_interval=0.1)
    lines: list[str] = []
    with pytest.raises(BrevTimeoutError):
        hook.run_command(
            "fg-timeout-1",
            "echo one; echo two; echo three; touch printed; sleep 30",
            timeout=5,
            on_line=lines.append,
        )
    assert lines == ["one", "two", "three"]  # the last two were held back for the trailer strip, then lost
    hook.delete_instance("fg-timeout-1")


def test_run_command_with_a_background_child_returns_when_the_command_exits(brev_sim, hook):
    hook.create_instance("fg-bg-1", gpu="L40S:1")
    hook.wait_until_ready("fg-bg-1", 60, poll_interval=0.1)
    started = time.monotonic()
    result = hook.run_command("fg-bg-1", "sleep 30 & echo launched", timeout=25)
    assert (result.exit_code, result.last_line) == (0, "launched")
    assert time.monotonic() - started < 20  # not held open until the child exits (30 s)
    hook.delete_instance("fg-bg-1")


def test_a_launch_removes_secret_files_that_earlier_tries_left_behind(brev_sim, hook):
    """A worker that died between `brev copy` of the secret file and the launch left it on the instance."""
    from airflow_provider_brev.core.jobs.remote import RemoteJob

    hook.create_instance("secret-left-1", gpu="L40S:1")
    hook.wait_until_ready("secret-left-1", 60, poll_interval=0.1)
    home = brev_sim.sandbox("secret-left-1")
    leftover = home / ".airflow-brev-secret-try1-job.env"
    leftover.write_text("export API_SECRET='from-a-dead-worker'\n")
    unrelated = home / ".airflow-brev-secret-other-task.env"  # another task's fresh file: not ours to remove
    unrelated.write_text("export X='y'\n")
    launch = hook.launch_job(
        "secret-left-1",
        RemoteJob("try2-job"),
        "echo ok",
        secret_env={"API_SECRET": "v"},
        earlier_jobs=[RemoteJob("try1-job")],
    )
    assert launch.launched
    assert not leftover.exists()
    assert unrelated.exists()
    hook.delete_instance("secret-left-1")
