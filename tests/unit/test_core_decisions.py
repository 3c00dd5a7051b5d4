"""Table-driven tests of the pure core's decisions: readiness, the wait state machine, argv builders, login
arguments, the shared listing, and the error types that cross a deferral."""

from __future__ import annotations

import asyncio
import logging

import pytest

from airflow_provider_brev.core.instances.readiness import (
    MAX_POLL_INTERVAL,
    STAGE_BUILDING,
    STAGE_DELETING,
    STAGE_DOCKER,
    STAGE_FAILED,
    STAGE_MISSING,
    STAGE_PROVISIONING,
    STAGE_READY,
    STAGE_SSH,
    STAGE_STOPPED,
    CheckReadiness,
    ListInstance,
    ReadinessCheck,
    ReadinessWait,
    RunProbe,
    next_poll_interval,
    probe_passed,
    readiness_from_status,
)
from airflow_provider_brev.core.protocol.argv import create_args, instance_type_list, ls_args, search_args
from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig, login_args
from airflow_provider_brev.core.protocol.machine import Done, Fail, Failed, Sleep
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevCommandError,
    BrevConfigurationError,
    BrevError,
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevTimeoutError,
    BrevTransientError,
    error_from_event,
    retry_policy,
)
from airflow_provider_brev.hooks.listing import SharedListing
from unit.machine_steps import probe, step


def inst(status: str = "RUNNING", build: str = "COMPLETED", shell: str = "READY") -> BrevInstance:
    return BrevInstance(name="w-1", id="abc", status=status, build_status=build, shell_status=shell)


@pytest.mark.parametrize(
    ("instance", "stage", "terminal"),
    [
        (None, STAGE_MISSING, True),
        (inst("FAILURE"), STAGE_FAILED, True),
        (inst("DELETING"), STAGE_DELETING, True),
        (inst("STOPPED"), STAGE_STOPPED, True),
        (inst("STOPPING"), STAGE_STOPPED, True),
        (inst("RUNNING", build="CREATE_FAILED", shell=""), STAGE_FAILED, True),
        (inst("DEPLOYING", build="", shell=""), STAGE_PROVISIONING, False),
        (inst("STARTING", build="", shell=""), STAGE_PROVISIONING, False),
        (inst("RUNNING", build="BUILDING", shell="NOT READY"), STAGE_BUILDING, False),
    ],
)
def test_readiness_from_status(instance, stage, terminal):
    readiness = readiness_from_status("w-1", instance)
    assert readiness is not None
    assert (readiness.stage, readiness.terminal) == (stage, terminal)


@pytest.mark.parametrize("instance", [inst(), inst(build="COMPLETED", shell="")])
def test_good_status_asks_for_the_probe(instance):
    assert readiness_from_status("w-1", instance) is None


@pytest.mark.parametrize(
    ("lines", "docker", "expected"),
    [
        (["n"], False, (True, STAGE_READY)),
        ([" n "], False, (True, STAGE_READY)),
        (["x", "w-1"], False, (False, STAGE_SSH)),
        (["n"], True, (False, STAGE_DOCKER)),
        (["n", "n:docker"], True, (True, STAGE_READY)),
        (["n:docker"], True, (False, STAGE_SSH)),
    ],
)
def test_probe_passed(lines, docker, expected):
    assert probe_passed(lines, "n", require_docker=docker) == expected


def _drive_check(instance, probe_answer):
    machine = ReadinessCheck("w-1")
    assert isinstance(machine.next_action(0.0), ListInstance)
    machine.receive(instance, 0.0)
    action = machine.next_action(0.0)
    if isinstance(action, RunProbe):
        nonce = action.command.split()[1].rstrip(";").strip("'")
        machine.receive(probe_answer(nonce), 0.0)
        action = machine.next_action(0.0)
    if isinstance(action, Fail):
        raise action.error
    assert isinstance(action, Done), "the machine asked for more than a listing and one probe"
    return action.result


def test_readiness_protocol_probes_only_when_the_status_is_good():
    assert _drive_check(inst("DEPLOYING", "", ""), lambda n: probe(None)).stage == STAGE_PROVISIONING
    assert _drive_check(inst(), lambda n: probe([n])).ready
    assert _drive_check(inst(), lambda n: probe(None)).stage == STAGE_SSH  # the probe timed out
    assert "refused" in _drive_check(inst(), lambda n: probe(["w-1"], "Connection refused")).message
    with pytest.raises(BrevConfigurationError):  # any other failure of the probe ends the check
        _drive_check(inst(), lambda n: Failed(BrevConfigurationError("no connection")))
    failed_listing = ReadinessCheck("w-1")
    failed_listing.next_action(0.0)
    failed_listing.receive(Failed(BrevTransientError("502")), 0.0)
    assert isinstance(failed_listing.next_action(0.0), Fail)


@pytest.mark.parametrize(
    ("base", "in_stage", "expected"),
    [(1.0, 0, 1.0), (1.0, 59, 1.0), (1.0, 61, MAX_POLL_INTERVAL), (0.2, 600, MAX_POLL_INTERVAL), (5.0, 600, 5.0)],
)
def test_next_poll_interval_backs_off_in_long_stages(base, in_stage, expected):
    assert next_poll_interval(base, in_stage) == expected


def _check(wait, answer, at, emitted=None):
    """Answer the wait's check at ``at``; the action that follows."""
    assert isinstance(step(wait, at), CheckReadiness)
    wait.receive(answer, at)
    return step(wait, at, emitted)


def test_readiness_wait_cadence_deadline_and_budget():
    deploying = readiness_from_status("w-1", inst("DEPLOYING", "", ""))
    wait = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0, max_failures=3)
    emitted: list[tuple[int, str]] = []
    assert _check(wait, deploying, 0.0, emitted) == Sleep(1.0)
    assert emitted == [(logging.INFO, f"Readiness of w-1: {deploying.message}")]  # a new stage is logged
    wait = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0, max_failures=3)
    assert isinstance(step(wait, 0.0), CheckReadiness)
    wait.receive(deploying, 0.25)
    assert step(wait, 0.25) == Sleep(0.75)  # fixed rate from the check's start
    emitted.clear()
    assert _check(wait, deploying, 1.0, emitted) == Sleep(1.0)
    assert not emitted  # same stage: nothing new to log
    assert _check(wait, deploying, 70.0) == Sleep(MAX_POLL_INTERVAL)
    # transient trouble: keep waiting within the budget, then give up; anything else ends the wait at once
    assert isinstance(_check(wait, Failed(BrevTransientError("502")), 71.0), Sleep)
    assert isinstance(_check(wait, Failed(BrevTimeoutError("slow ls")), 72.0), Sleep)
    last = Failed(BrevTransientError("502"))
    assert _check(wait, last, 73.0) == Fail(last.error)
    other = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0)
    config_error = Failed(BrevConfigurationError("no connection"))
    assert _check(other, config_error, 1.0) == Fail(config_error.error)
    other = ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0)
    failed = _check(other, readiness_from_status("w-1", inst("FAILURE")), 2.0)
    assert isinstance(failed, Done) and failed.result.action == "failed"
    timeout = step(ReadinessWait("w-1", deadline=100.0, poll_interval=1.0, now=0.0), 100.0)
    assert isinstance(timeout, Done) and timeout.result.action == "timeout" and "after 100 s" in timeout.result.message


def test_ls_and_search_args():
    caps = BrevCapabilities(version=(0, 6, 327), version_text="v0.6.327")
    assert ls_args(BrevConnectionConfig(conn_id="c"), caps) == ["ls", "--json"]
    assert ls_args(BrevConnectionConfig(conn_id="c", org="acme"), caps) == ["ls", "--json", "--org", "acme"]
    api_key = BrevConnectionConfig(conn_id="c", org="acme", api_key="bak-1", org_id="o")
    assert ls_args(api_key, caps) == ["ls", "--json"]  # --org is refused under API-key auth
    with pytest.raises(BrevCLIError, match="upgrade"):
        ls_args(BrevConnectionConfig(conn_id="c"), BrevCapabilities(version=(0, 6, 300), version_text="old"))
    assert search_args(gpu_name="L40S", min_vram=40, include_cpu=True) == [
        "search",
        "cpu",
        "--gpu-name",
        "L40S",
        "--min-vram",
        "40",
        "--json",
    ]


@pytest.mark.parametrize(
    ("flags", "gpu", "types", "placement", "expected_tail", "warned"),
    [
        (
            frozenset(),
            "L40S:1",
            ["g6e.xlarge", "g6e.2xlarge"],
            None,
            ["--type", "g6e.xlarge,g6e.2xlarge", "--detached"],
            False,
        ),
        (frozenset({"gpu"}), "L40S:2", ["x"], None, ["--gpu", "L40S:2", "--detached"], False),
        (frozenset({"gpu"}), None, ["g6e.xlarge"], None, ["--type", "g6e.xlarge", "--detached"], False),
        (frozenset(), None, ["g6e.xlarge"], "cc-1", ["--type", "g6e.xlarge", "--detached"], True),
        (
            frozenset({"cloud-cred-id"}),
            None,
            ["g6e.xlarge"],
            "cc-1",
            ["--type", "g6e.xlarge", "--cloud-cred-id", "cc-1", "--detached"],
            False,
        ),
    ],
)
def test_create_args(flags, gpu, types, placement, expected_tail, warned):
    caps = BrevCapabilities(version=(0, 6, 327), version_text="v", create_flags=flags)
    plan = create_args(
        "w-1",
        caps=caps,
        config=BrevConnectionConfig(conn_id="c"),
        gpu=gpu,
        types=types,
        min_vram=None,
        cloud_cred_id=placement,
        workspace_group_id=None,
        wait=False,
        timeout=600,
    )
    assert plan.args == ["create", "w-1", *expected_tail]
    assert bool(plan.warnings) is warned


@pytest.mark.parametrize(
    ("gpu", "types", "expected"),
    [
        ("L40S:1", None, ("L40S:1", None)),
        ("  ", "a.b, c.d", (None, ["a.b", "c.d"])),
        ("", [], (None, None)),
        (None, ["g6e.xlarge"], (None, ["g6e.xlarge"])),
    ],
)
def test_instance_type_list(gpu, types, expected):
    assert instance_type_list(gpu, types) == expected


@pytest.mark.parametrize(("gpu", "types"), [("L40S:1", ["g6e.xlarge"]), ("L40S:0", None), (None, ["bad type"])])
def test_instance_type_list_rejects(gpu, types):
    with pytest.raises(BrevInvalidInputError):
        instance_type_list(gpu, types)


def test_login_args_and_config_validation():
    assert login_args(BrevConnectionConfig(conn_id="c")) is None
    assert login_args(BrevConnectionConfig(conn_id="c", token="t")) == ["login", "--token", "t"]
    key = BrevConnectionConfig(conn_id="c", token="t", api_key="bak-1", org_id="o")
    assert login_args(key) == ["login", "--api-key", "bak-1", "--org-id", "o"]  # the API key wins
    with pytest.raises(BrevConfigurationError, match="bak-"):
        BrevConnectionConfig(conn_id="c", api_key="nope", org_id="o").validate()
    with pytest.raises(BrevConfigurationError, match="org id"):
        BrevConnectionConfig(conn_id="c", api_key="bak-1").validate()


@pytest.mark.parametrize(
    ("error_type", "expected", "policy"),
    [
        ("BrevConfigurationError", BrevConfigurationError, "never"),
        ("BrevInvalidInputError", BrevInvalidInputError, "never"),
        ("BrevTransientError", BrevTransientError, "hook"),
        ("BrevInstanceFailedError", BrevInstanceFailedError, "task"),
        ("BrevCommandError", BrevError, "task"),  # needs an exit code: a plain BrevError
        ("ValueError", BrevError, "task"),  # not one of ours
        (None, BrevError, "task"),
    ],
)
def test_error_types_cross_a_deferral(error_type, expected, policy):
    error = error_from_event("it broke", error_type)
    assert type(error) is expected
    assert retry_policy(error) == policy
    assert "it broke" in str(error)
    assert not isinstance(error, BrevCommandError)


def test_shared_listing_serves_one_fetch_to_concurrent_waits_and_never_an_older_one():
    async def scenario() -> tuple[int, list[float], list[float]]:
        listing = SharedListing()
        fetches = 0
        release = asyncio.Event()

        async def fetch() -> list[BrevInstance]:
            nonlocal fetches
            fetches += 1
            await release.wait()
            return [inst()]

        loop = asyncio.get_running_loop()
        since = loop.time() - 10  # any listing started after this serves
        waits = [asyncio.ensure_future(listing.get(fetch, since=since)) for _ in range(20)]
        await asyncio.sleep(0)
        release.set()
        results = await asyncio.gather(*waits)
        first = [started for _, started in results]
        # a wait that needs a listing newer than the one it saw gets a new fetch, not the cached one
        newer = await listing.get(fetch, since=first[0] + 1e-6)
        return fetches, first, [newer[1]]

    fetches, first, newer = asyncio.run(scenario())
    assert fetches == 2
    assert len(set(first)) == 1
    assert newer[0] > first[0]


def test_shared_listing_failure_reaches_its_waiters_and_the_next_get_fetches_again():
    async def scenario() -> tuple[int, int, bool]:
        listing = SharedListing()
        calls = 0

        async def fetch() -> list[BrevInstance]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise BrevTransientError("502")
            return [inst()]

        results = await asyncio.gather(*(listing.get(fetch, since=0.0) for _ in range(5)), return_exceptions=True)
        failed = sum(isinstance(r, BrevTransientError) for r in results)
        value, _ = await listing.get(fetch, since=0.0)
        return failed, calls, bool(value)

    failed, calls, ok = asyncio.run(scenario())
    assert (failed, calls, ok) == (5, 2, True)
