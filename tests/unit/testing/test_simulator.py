"""Behaviour of the fake ``brev`` CLI against reference/brev-cli.md (sections 2, 5 and 8).

Every test drives the fake through a real subprocess, the way the hook does.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from airflow_provider_brev.testing import BrevSimulator, make_token


def brev(*args: str, stdin: int | None = subprocess.DEVNULL, input: str | None = None, timeout: float = 30):
    kwargs: dict = {"capture_output": True, "text": True, "timeout": timeout}
    if input is not None:
        kwargs["input"] = input
    else:
        kwargs["stdin"] = stdin
    return subprocess.run(["brev", *args], check=False, **kwargs)


def login(sim: BrevSimulator) -> None:
    res = brev("login", "--token", sim.valid_token)
    assert res.returncode == 0, res.stderr


def create(name: str, *extra: str) -> subprocess.CompletedProcess:
    return brev("create", name, "--type", "g6e.xlarge", *extra)


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached")


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------------------------------ basics
def test_version_help_and_unknown_command(brev_sim_both: BrevSimulator) -> None:
    documented = brev_sim_both.profile == "documented"
    res = brev("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == ("Current Version: v0.6.400-documented" if documented else "Current Version: v0.6.327")
    helptext = brev("create", "--help").stdout
    assert "  -t, --type string" in helptext
    assert "--gpu-name string" in helptext
    assert ("--cloud-cred-id string" in helptext) is documented
    assert ("--workspace-group-id string" in helptext) is documented
    assert ("--gpu string" in helptext) is documented
    assert "exec" in brev("--help").stdout
    res = brev("orgs", "--json")
    if documented:
        assert res.returncode == 1
        assert res.stderr.strip() == "EOF"
    else:
        assert res.returncode == 1
        assert res.stderr.startswith('unknown command "orgs" for "brev"')
        assert "Did you mean this?\n\torg\n" in res.stderr


def test_call_log_records_every_invocation(brev_sim: BrevSimulator) -> None:
    brev("--version")
    brev("delete", "--yes", "x")
    calls = brev_sim.calls()
    assert [c["argv"] for c in calls] == [["--version"], ["delete", "--yes", "x"]]
    assert [c["exit_code"] for c in calls] == [0, 1]
    assert calls[1]["command"] == "delete"
    assert calls[1]["home"] == str(brev_sim.home)
    assert calls[1]["stdin_read"] is False
    assert brev_sim.calls("delete") == [calls[1]]


# -------------------------------------------------------------------------------------------- auth
@pytest.mark.usefixtures("brev_sim")
def test_logged_out_prompts_on_stdout_and_fails_with_eof() -> None:
    res = brev("ls", "--json")
    assert res.returncode == 1
    assert res.stdout == "You are currently logged out, would you like to log in? [Y/n]: "
    assert res.stderr == "EOF\n"
    res = brev("ls", input="n\n")
    assert res.stderr == "declined to login\n"


def test_login_bad_revoked_and_good_token(brev_sim: BrevSimulator) -> None:
    """Like the released CLI, login stores the token first and then asks ``GET api/me``: a rejected token has
    replaced the stored session all the same; the 401 names the request URL with resty's query parameters."""
    unauthorized = (
        "https://brevapi.us-west-2-prod.control-plane.brev.dev/api/me"
        "?cli_version=v0.6.327&local=true&os=linux&utm_source=cli "
        '401 Unauthorized {"message":"invalid token"}'
    )
    creds = brev_sim.home / ".brev" / "credentials.json"
    expired = brev_sim.make_token(-10)
    for bad in ("not-a-jwt", expired):
        res = brev("login", "--token", bad)
        assert res.returncode == 1
        assert res.stderr.strip() == unauthorized
        # a token that is no valid JWT (here: also an expired one) is stored as the refresh token
        assert json.loads(creds.read_text()) == {"access_token": "auto-login", "refresh_token": bad}
    revoked = brev_sim.make_token()
    brev_sim.revoke_token(revoked)
    assert brev("login", "--token", revoked).stderr.strip() == unauthorized
    assert json.loads(creds.read_text()) == {"access_token": revoked, "refresh_token": "auto-login"}
    assert brev("ls", "--json").returncode == 1  # the failed login logged this HOME out

    res = brev("login", "--token", brev_sim.valid_token)
    assert res.returncode == 0, res.stderr
    assert "   \u25b8     Starting Login" in res.stdout
    assert "current organization: sim-org" in res.stdout
    assert creds.read_text() == json.dumps(
        {"access_token": brev_sim.valid_token, "refresh_token": "auto-login"}, indent=1
    )
    assert brev("ls", "--json").returncode == 0
    # a token revoked server-side after login: 401 text rather than the prompt
    brev_sim.revoke_token(brev_sim.valid_token)
    res = brev("ls", "--json")
    assert res.returncode == 1
    assert res.stderr.strip() == unauthorized


def test_api_key_login_validation(brev_sim: BrevSimulator) -> None:
    assert brev("login", "--api-key", "bak-1").stderr.strip() == (
        "api key auth requires an org id; run brev login --api-key <api-key> --org-id <org-id>"
    )
    assert brev("login", "--api-key", "xyz", "--org-id", "o").stderr.strip() == "api key must start with bak-"
    assert brev("login", "--org-id", "o").stderr.strip() == "org-id can only be used with api-key"
    assert brev("login", "--api-key", "bak-1", "--org-id", "o", "--token", "t").stderr.strip() == (
        "api-key cannot be used with token, skip-browser, email, or auth flags"
    )
    res = brev("login", "--api-key", "bak-1", "--org-id", "org-x")
    assert res.returncode == 0
    assert res.stdout.strip() == "API key saved for org org-x"
    brev_sim.expire_sessions()  # api keys do not expire
    assert brev("ls", "--json").returncode == 0
    assert brev("ls", "orgs", "--json").stderr.strip() == "api key auth cannot list organizations"


def test_expire_sessions_models_hourly_token_expiry(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    assert brev("ls", "--json").returncode == 0
    brev_sim.expire_sessions()
    res = brev("ls", "--json")
    assert res.returncode == 1
    assert res.stdout == (
        "WARN: malformed refresh token, logging out\nYou are currently logged out, would you like to log in? [Y/n]: "
    )
    assert res.stderr == "EOF\n"
    login(brev_sim)
    assert brev("ls", "--json").returncode == 0
    # the simulated clock also expires the JWT itself
    brev_sim.advance(3700)
    assert brev("ls", "--json").stderr == "EOF\n"
    brev_sim.set_config(auth_error_style="401")
    assert "401 Unauthorized" in brev("ls").stderr


# ---------------------------------------------------------------------------------------------- ls
def test_ls_json_shapes(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    res = brev("ls", "--json")
    assert res.stdout == '{\n  "workspaces": null\n}\n'
    brev_sim.set_config(ls_json_shape="list")
    assert brev("ls", "--json").stdout == "null\n"
    brev_sim.set_config(ls_json_shape="object")
    brev_sim.create_instance_directly("seed-1", instance_type="g5.xlarge")
    brev_sim.create_instance_directly("other-user", created_by="someone-else")
    data = json.loads(brev("ls", "--json").stdout)
    assert list(data) == ["workspaces"]
    (ws,) = data["workspaces"]
    assert list(ws) == [
        "name",
        "id",
        "status",
        "build_status",
        "shell_status",
        "health_status",
        "instance_type",
        "instance_kind",
        "gpu",
    ]
    assert ws["name"] == "seed-1"
    assert ws["status"] == "RUNNING"
    assert ws["shell_status"] == "READY"
    assert ws["gpu"] == "A10G"
    assert ws["instance_kind"] == "gpu"
    assert ws["health_status"] == "HEALTHY"
    assert len(json.loads(brev("ls", "--all", "--json").stdout)["workspaces"]) == 2
    brev_sim.set_health("seed-1", "UNHEALTHY")
    assert json.loads(brev("ls", "--json").stdout)["workspaces"][0]["status"] == "UNHEALTHY"
    brev_sim.set_config(ls_json_shape="list")
    assert json.loads(brev("ls", "--json").stdout)[0]["name"] == "seed-1"
    text = brev("ls").stdout
    assert text.startswith("You have 1 instances in Org sim-org\n")
    assert text.splitlines()[1].split() == ["NAME", "STATUS", "BUILD", "SHELL", "ID", "MACHINE", "GPU"]


@pytest.mark.parametrize("brev_sim_profile", ["documented"])
def test_documented_ls_has_workspace_group_and_orgs_json(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("seed-1")
    (ws,) = json.loads(brev("ls", "--json").stdout)["workspaces"]
    assert ws["workspaceGroupId"] == "wg-aws-us-east-1"
    orgs = json.loads(brev("orgs", "--json").stdout)
    assert orgs[0]["id"] == "org-2p9sim0001"
    assert orgs[0]["cloudCredentials"] == [{"id": "cc-aws-4f1c2b", "name": "aws-default"}]
    assert json.loads(brev("ls", "orgs", "--json").stdout) == [
        {"name": "sim-org", "id": "org-2p9sim0001", "is_active": True}
    ]


# ------------------------------------------------------------------------------------------ create
def test_create_waits_until_running_and_prints_only_the_name(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    res = create("job-1")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "job-1\n"
    assert "Instance types to try: g6e.xlarge\n" in res.stderr
    assert "[Worker 1] g6e.xlarge Success! Created instance 'job-1'" in res.stderr
    assert "  job-1: Ready\n" in res.stderr
    inst = brev_sim.instance("job-1")
    assert inst["status"] == "RUNNING"
    assert inst["gpu"] == "L40S"
    assert len(inst["id"]) == 9
    assert inst["id"].isalnum()
    assert inst["id"].islower()
    # create never writes the ssh alias
    assert not (brev_sim.home / ".brev" / "ssh_config").exists()


def test_create_default_type_choice_and_filters(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    res = brev("create", "auto", "-d")
    assert res.returncode == 0, res.stderr
    assert "Instance types to try: g6.xlarge (500GB disk), g5.xlarge (500GB disk)" in res.stderr
    assert brev_sim.instance("auto")["instance_type"] == "g6.xlarge"
    res = brev("create", "t4", "--gpu-name", "T4")
    assert res.returncode == 1
    assert res.stderr.strip() == (
        "no GPU instances match the specified filters. Try 'brev search' to see available options"
    )
    res = brev("create", "nope", "--type", "x9.huge", "-d")
    assert res.returncode == 1
    assert "Skipping: instance type \"x9.huge\" is not a recognized type; run 'brev search'" in res.stderr
    assert res.stderr.endswith("could only create 0/1 instances\n")


def test_create_failure_and_timeout_still_exit_zero(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.set_fault("boot_failure", message="out of GPUs in zone")
    res = create("bad-boot")
    assert res.returncode == 0
    assert "  bad-boot: instance bad-boot failed: out of GPUs in zone\n" in res.stderr
    assert brev_sim.instance("bad-boot")["status"] == "FAILURE"
    brev_sim.set_timings(deploy_seconds=30)
    started = time.monotonic()
    res = create("slow", "--timeout", "1")
    assert res.returncode == 0
    assert "  slow: Timeout waiting for ready state\n" in res.stderr
    assert time.monotonic() - started < 5
    assert brev_sim.instance("slow")["status"] == "DEPLOYING"


def test_duplicate_name_while_deleting(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.set_timings(delete_seconds=30)
    assert create("dup", "-d").returncode == 0
    assert brev("delete", "dup").returncode == 0
    assert brev_sim.instance("dup")["status"] == "DELETING"
    res = create("dup", "-d")
    assert res.returncode == 1
    assert "[Worker 1] g6e.xlarge Failed: duplicate workspace name\n" in res.stderr
    assert "Error: workspace 'dup' already exists. Use a different name or delete the existing workspace" in res.stderr
    assert "Warning: Only created 0/1 instances" in res.stderr
    assert res.stderr.splitlines()[-1] == "could only create 0/1 instances"
    assert len(brev_sim.instances()) == 1


def test_wait_for_deletions_returns_once_no_instance_is_deleting(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    assert create("kept", "-d").returncode == 0
    assert create("gone", "-d").returncode == 0
    brev_sim.set_timings(delete_seconds=2.0)
    assert brev("delete", "gone").returncode == 0
    assert brev_sim.instance("gone")["status"] == "DELETING"
    brev_sim.wait_for_deletions(timeout=30)
    assert [v["name"] for v in brev_sim.instances()] == ["kept"]  # a live instance is not waited for


def test_wait_for_deletions_names_what_is_still_deleting_after_its_timeout(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.set_timings(delete_seconds=3600)
    assert create("slow-delete", "-d").returncode == 0
    assert brev("delete", "slow-delete").returncode == 0
    with pytest.raises(TimeoutError, match=r"still DELETING after 0\.2 s: slow-delete$"):
        brev_sim.wait_for_deletions(timeout=0.2)
    brev_sim.advance(3600)  # simulated time: the delete finishes without anyone waiting an hour
    brev_sim.wait_for_deletions(timeout=30)
    assert brev_sim.instances() == []


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "name is required"),
        ("a" * 64, "name must be 63 characters or fewer (got 64)"),
        ("-bad", None),
        (
            "bad name",
            "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots",
        ),
    ],
)
def test_create_name_validation(brev_sim: BrevSimulator, name: str, message: str | None) -> None:
    res = brev("create", name) if name != "-bad" else brev("create", "--", "-bad")
    assert res.returncode == 1
    if message is None:
        message = (
            "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots"
        )
    assert res.stderr.strip() == message
    assert brev_sim.instances() == []


@pytest.mark.parametrize(
    "argv",
    [
        ["delete", "--yes", "x"],
        ["delete", "-y", "x"],
        ["create", "x", "--cloud-cred-id", "cc-1"],
        ["create", "x", "--workspace-group-id", "wg-1"],
        ["create", "x", "--gpu", "L40S:1"],
    ],
)
def test_unknown_flags_have_no_side_effects(brev_sim: BrevSimulator, argv: list[str]) -> None:
    login(brev_sim)
    brev_sim.create_instance_directly("x")
    before = brev_sim.state_path.read_text()
    res = brev(*argv)
    assert res.returncode == 1
    flag = next(a for a in argv if a.startswith("-"))
    expected = "unknown shorthand flag: 'y' in -y" if flag == "-y" else f"unknown flag: {flag}"
    assert res.stderr.strip() == expected
    assert brev_sim.state_path.read_text() == before


@pytest.mark.parametrize("brev_sim_profile", ["documented"])
def test_documented_gpu_flag_and_placement(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    res = brev("create", "l40s", "--gpu", "L40S:1", "-d")
    assert res.returncode == 0, res.stderr
    assert brev_sim.instance("l40s")["instance_type"] == "g6e.xlarge"
    res = brev("create", "l40s4", "--gpu", "l40s:4", "-d")
    assert brev_sim.instance("l40s4")["instance_type"] == "g6e.12xlarge", res.stderr

    brev_sim.set_accounts(
        cloud_credentials=[{"id": "cc-aws", "name": "aws"}, {"id": "cc-gcp", "name": "gcp"}],
        workspace_groups=[{"id": "wg-a", "name": "a"}, {"id": "wg-b", "name": "b"}],
    )
    res = brev("create", "placed", "--gpu", "L40S:1", "-d")
    assert res.returncode == 1
    assert res.stderr.strip() == (
        "placement error: this organization has 2 cloud credentials; pass --cloud-cred-id <id> (see brev orgs --json)"
    )
    res = brev("create", "placed", "--gpu", "L40S:1", "-d", "--cloud-cred-id", "cc-gcp")
    assert "pass --workspace-group-id <id>" in res.stderr
    res = brev(
        "create", "placed", "--gpu", "L40S:1", "-d", "--cloud-cred-id", "cc-nope", "--workspace-group-id", "wg-b"
    )
    assert res.returncode == 1
    assert 'cloud credential "cc-nope" not found' in res.stderr
    assert brev_sim.instance("placed") is None
    res = brev("create", "placed", "--gpu", "L40S:1", "-d", "--cloud-cred-id", "cc-gcp", "--workspace-group-id", "wg-b")
    assert res.returncode == 0, res.stderr
    assert brev_sim.instance("placed")["workspaceGroupId"] == "wg-b"
    orgs = json.loads(brev("orgs", "--json").stdout)
    assert [c["id"] for c in orgs[0]["cloudCredentials"]] == ["cc-aws", "cc-gcp"]


def test_create_capacity_fallback_and_listing_unavailable(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.set_fault("capacity", type="g6e.xlarge")
    res = brev("create", "fb", "--type", "g6e.xlarge,g5.xlarge", "-d")
    assert res.returncode == 0, res.stderr
    assert "[Worker 1] g6e.xlarge Failed: no capacity available for instance type g6e.xlarge\n" in res.stderr
    assert "Type g6e.xlarge had failures, trying next type..." in res.stderr
    assert brev_sim.instance("fb")["instance_type"] == "g5.xlarge"
    res = brev("create", "fb2", "--type", "g6e.xlarge", "-d")
    assert res.returncode == 1
    assert res.stderr.endswith("could only create 0/1 instances\n")
    brev_sim.clear_faults()
    brev_sim.set_fault("listing_unavailable")
    res = brev("create", "fb3", "--type", "g6e.xlarge", "-d")
    assert res.returncode == 1
    assert (
        'could not resolve workspace group for "g6e.xlarge" (instance-type listing was unavailable); please retry'
    ) in res.stderr
    assert brev("create", "fb3", "--type", "g6e.xlarge", "-d").returncode == 0


def test_http_5xx_fault_is_consumed_once(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    brev_sim.set_fault("http_5xx", command="ls", status=502)
    res = brev("ls", "--json")
    assert res.returncode == 1
    assert res.stderr.startswith("https://brevapi.us-west-2-prod.control-plane.brev.dev/api/")
    assert res.stderr.strip().endswith(" 502 Bad Gateway <html>bad gateway</html>")
    assert brev("ls", "--json").returncode == 0
    brev_sim.set_fault("http_5xx", command="create", status=503, times=2)
    assert "503 Service Unavailable" in create("c5").stderr
    assert create("c5", "-d").returncode == 1
    assert brev_sim.instances() == []
    assert create("c5", "-d").returncode == 0
    # a 5xx on the POST whose create still happened server-side (ambiguous outcome)
    brev_sim.set_fault("http_5xx", command="create", stage="post", side_effect=True)
    res = create("ghost", "-d")
    assert res.returncode == 1
    assert "502 Bad Gateway" in res.stderr
    assert brev_sim.instance("ghost") is not None


@pytest.mark.usefixtures("brev_sim")
def test_search_json() -> None:
    items = json.loads(brev("search", "--json").stdout)
    prices = [i["price_per_hour"] for i in items]
    assert prices == sorted(prices)
    assert list(items[0])[:5] == ["type", "cloud", "provider", "gpu_name", "gpu_count"]
    l40s = json.loads(brev("search", "--json", "--gpu-name", "l40s", "--min-vram", "40").stdout)
    assert [(i["type"], i["gpu_count"]) for i in l40s] == [("g6e.xlarge", 1), ("g6e.12xlarge", 4)]
    assert brev("search", "--json", "--gpu-name", "B200").stdout == "[]\n"
    assert all(i["gpu_count"] == 0 for i in json.loads(brev("search", "cpu", "--json").stdout))


# ----------------------------------------------------------------------------------- concurrency
def test_parallel_creates_and_ls_stay_consistent(brev_sim: BrevSimulator) -> None:
    login(brev_sim)
    names = [f"par-{i:02d}" for i in range(20)]
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda n: create(n, "-d"), names))
        listings = list(pool.map(lambda _: brev("ls", "--json"), range(10)))
    assert [r.returncode for r in results] == [0] * 20, [r.stderr for r in results if r.returncode]
    assert all(ls.returncode == 0 for ls in listings)
    data = json.loads(brev("ls", "--json").stdout)
    assert sorted(w["name"] for w in data["workspaces"]) == names
    assert len({w["id"] for w in data["workspaces"]}) == 20
    assert len(brev_sim.calls("create")) == 20


def test_make_token_and_connection_json(brev_sim: BrevSimulator) -> None:
    tok = make_token(60, sub="alice")
    assert tok.count(".") == 2
    conn = json.loads(brev_sim.connection_json(region="x"))
    assert conn["conn_type"] == "brev"
    assert conn["extra"] == {"cli_path": str(brev_sim.brev_path), "brev_home": str(brev_sim.home), "region": "x"}
    assert conn["password"] == brev_sim.valid_token
    assert os.access(brev_sim.brev_path, os.X_OK)
    assert os.environ["FAKE_BREV_STATE"] == str(brev_sim.root)
