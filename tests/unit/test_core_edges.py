"""Edges of the remaining decisions: boolean words and ints posing as numbers (``core/validation.py``), managed
names (``core/protocol/names.py``), recovery's budget and verdict texts (``core/instances/recovery.py``; ``max_instance_recoveries=0``
turns recovery off), the call protocol's view and timeout (``core/protocol/invocation.py``), the exactly-once wrapper's
checks (``core/jobs/shell.py``), ``brev create``'s arguments (``core/protocol/argv.py``) and the classifier's messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core import validation, values
from airflow_provider_brev.core.instances.recovery import (
    DEFAULT_MAX_INSTANCE_RECOVERIES,
    EVENT_INSTANCE_LOST,
    GIVE_UP,
    LOST_FAILURE,
    LOST_MISSING,
    LOST_UNREACHABLE,
    decide_recovery,
    describe_loss,
    diagnose_loss,
    may_be_lost,
    needs_probe,
    recoveries_used,
    validate_budget,
)
from airflow_provider_brev.core.jobs.shell import (
    FOREGROUND_KILLED,
    FOREGROUND_NONE,
    STALE_SECRET_MINUTES,
    build_foreground_kill_command,
    build_once_command,
    secret_file_name,
    stale_secret_cleanup,
    strip_once_stdout,
    validate_env,
)
from airflow_provider_brev.core.protocol.argv import create_args, search_args, start_args, stop_args
from airflow_provider_brev.core.protocol.classify import classify_failure
from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig
from airflow_provider_brev.core.protocol.invocation import EnsureLogin, Invocation, RunCli, exec_view
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.names import (
    DEFAULT_OWNER_PREFIX,
    ManagedName,
    managed_instance_name,
    parse_managed_name,
    validate_instance_name,
    validate_owner_prefix,
)
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import (
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevJobLostError,
    BrevTimeoutError,
    BrevTransientError,
)
from airflow_provider_brev.hooks.driver import drive

# ---------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("true", True),
        ("Yes", True),
        (" on ", True),
        ("0", False),
        ("FALSE", False),
        ("no", False),
        ("off", False),
        (1, True),
        (0, False),
        (True, True),
    ],
)
def test_every_boolean_word(value, expected):
    assert values.bool_value("flag", value) is expected


@pytest.mark.parametrize("value", [2, "T", "y", "none", 1.0, [], "  "])
def test_other_words_are_not_booleans(value):
    with pytest.raises(BrevInvalidInputError, match="flag must be a boolean"):
        values.bool_value("flag", value)


def test_empty_booleans_take_the_default():
    assert values.bool_value("flag", None, default=True) is True
    assert values.bool_value("flag", "None", default=False) is False
    assert values.bool_value("flag", False, default=True) is False


def test_ints_from_native_rendering_become_text_but_booleans_do_not():
    assert values.safe_text("tag", 20261201) == "20261201"
    assert validation.instance_name("name", 12345) == "12345"
    with pytest.raises(BrevInvalidInputError, match="tag must be a non-empty string"):
        values.safe_text("tag", True)
    with pytest.raises(BrevInvalidInputError, match="name"):
        validation.instance_name("name", True)
    assert values.safe_text("tag", "", allow_empty=True) == ""
    with pytest.raises(BrevInvalidInputError, match="tag must be a string"):
        values.safe_text("tag", None, allow_empty=True)


def test_numbers_and_messages():
    assert values.integer("n", 0, minimum=0) == 0
    assert values.non_negative("n", "0") == 0.0
    with pytest.raises(BrevInvalidInputError, match=r"n must be a number >= 0 of GB, got -1"):
        values.non_negative("n", -1, unit="GB")
    with pytest.raises(BrevInvalidInputError, match=r"no greater than 5"):
        values.positive_number("n", 6, maximum=5)
    assert values.positive_number("n", 5, maximum=5) == 5.0
    with pytest.raises(BrevInvalidInputError, match="a connection id"):
        values.conn_id("brev_conn_id", "bad id")
    with pytest.raises(BrevInvalidInputError, match="an id as `brev` lists it"):
        validation.placement_id("cloud_cred_id", "-flag")
    with pytest.raises(BrevInvalidInputError, match="the URI of an S3 object"):
        validation.s3_uri("spec_uri", "s3://bucket/", object_key=True)
    with pytest.raises(BrevInvalidInputError, match="the URI of an S3 object"):
        validation.s3_uri("spec_uri", "s3://bucket", object_key=True)
    assert validation.s3_uri("spec_uri", " s3://bucket/a.yaml ", object_key=True) == "s3://bucket/a.yaml"


def test_instance_request_messages_name_the_parameter():
    with pytest.raises(BrevInvalidInputError, match=r"^instance_types: Invalid instance type name"):
        validation.instance_request(None, ["bad type"])
    with pytest.raises(BrevInvalidInputError, match=r"^Invalid gpu 'L40S:0'"):
        validation.instance_request("L40S:0", None)
    with pytest.raises(BrevInvalidInputError, match="not both"):
        validation.instance_request("L4", ["g6.xlarge"])


# --------------------------------------------------------------------------------------------------- names


def test_names_edges():
    assert DEFAULT_OWNER_PREFIX == "afbrev"
    with pytest.raises(BrevInvalidInputError, match="The instance name is empty"):
        validate_instance_name(3)
    with pytest.raises(BrevInvalidInputError, match="Invalid owner prefix None"):
        validate_owner_prefix(None)  # type: ignore[arg-type]
    assert validate_owner_prefix("ab") == "ab"
    expires = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    name = managed_instance_name(dag_id="My--DAG__x", task_id="T", run_id="r", expires_at=expires)
    assert name.startswith("afbrev-my-dag-x-t-") and name.endswith("-x202612011030")
    parsed = parse_managed_name(name)
    assert parsed == ManagedName("afbrev", "my-dag-x-t", name.split("-")[-2], expires)
    long = managed_instance_name(dag_id="d" * 80, task_id="t", run_id="r", expires_at=expires)
    assert len(long) == 63
    bare = managed_instance_name(dag_id="--", task_id="__", run_id="r", expires_at=expires)
    assert parse_managed_name(bare).slug == ""
    assert parse_managed_name(None) is None  # type: ignore[arg-type]
    assert parse_managed_name("afbrev-x-0123abcd-x202613011030") is None  # month 13
    assert parsed.is_expired(expires) and not parsed.is_expired(expires - timedelta(minutes=1))
    assert ManagedName("p", "s", "d", datetime(2000, 1, 1, tzinfo=UTC)).is_expired()


# ------------------------------------------------------------------------------------------------ recovery


def test_recovery_constants_and_words():
    assert (DEFAULT_MAX_INSTANCE_RECOVERIES, EVENT_INSTANCE_LOST) == (2, "instance_lost")
    assert describe_loss(LOST_MISSING) == "is gone (deleted, not listed by brev ls)"
    assert describe_loss(LOST_FAILURE) == "is in FAILURE"
    assert describe_loss(LOST_UNREACHABLE) == "is RUNNING but unreachable past its failure budget"
    assert describe_loss("other") == "other"


def test_zero_recoveries_is_a_valid_budget_that_turns_recovery_off():
    assert validate_budget(0) == 0
    assert validate_budget(3) == 3
    decision = decide_recovery(
        name="w", loss=LOST_MISSING, owned=True, ephemeral=False, used=0, budget=0, lost_at=datetime.now(UTC)
    )
    assert decision.action == GIVE_UP


def test_no_record_names_any_upstream_task():
    decision = decide_recovery(
        name="w", loss=LOST_MISSING, owned=None, ephemeral=False, used=0, budget=2, lost_at=datetime.now(UTC)
    )
    assert "(any upstream task has no XCom 'brev_instance' for it)" in decision.message


def test_the_largest_count_wins_ties_included():
    assert recoveries_used({"count": 2}, {"count": 2}, {"count": 1}) == 2
    assert recoveries_used({"count": 0}) == 0


@pytest.mark.parametrize(
    ("error", "instance", "reachable", "verdict"),
    [
        (BrevInstanceFailedError("boot failed"), BrevInstance("w", "i", "RUNNING"), None, None),
        (BrevInstanceFailedError("boot failed"), BrevInstance("w", "i", "FAILURE"), None, LOST_FAILURE),
        (
            BrevJobLostError("gone"),
            BrevInstance("w", "i", "RUNNING"),
            False,
            None,
        ),  # a lost job alone: not the instance
        (BrevTransientError("502"), BrevInstance("w", "i", "DEPLOYING"), False, None),
        (BrevTransientError("502"), BrevInstance("w", "i", "RUNNING"), True, None),
        (BrevTransientError("502"), BrevInstance("w", "i", "RUNNING"), False, LOST_UNREACHABLE),
    ],
)
def test_diagnose_loss_edges(error, instance, reachable, verdict):
    assert diagnose_loss(error, instance, reachable=reachable) == verdict


def test_a_probe_is_needed_only_after_a_transient_error_on_a_running_instance():
    running = BrevInstance("w", "i", "RUNNING")
    assert needs_probe(BrevTransientError("502"), running)
    assert not needs_probe(BrevInstanceFailedError("x"), running)
    assert not needs_probe(BrevJobLostError("x"), running)
    assert not needs_probe(BrevTimeoutError("x"), running)
    assert not may_be_lost(BrevTimeoutError("x"))
    assert may_be_lost(BrevInstanceFailedError("x"))


# --------------------------------------------------------------------------------------------- invocation


def test_the_exec_view_reads_the_tails():
    result = ProcessResult(1, [str(i) for i in range(8)], [str(i) for i in range(12)])
    assert exec_view()(result) == ("3\n4\n5\n6\n7", "\n".join(str(i) for i in range(2, 12)))
    assert exec_view(1, 1)(result) == ("7", "11")


def test_a_timed_out_call_names_its_budget():
    for timeout, words in ((12.4, "within 12 s"), (None, "within its time budget")):
        machine = Invocation("ls", timeout=timeout, authenticated=False, can_login=False)
        with pytest.raises(BrevTimeoutError, match=words):
            drive(machine, lambda call: ProcessResult(1, timed_out=True))


def test_an_unchecked_failure_is_returned_as_it_is():
    machine = Invocation("ls", timeout=1, authenticated=True, can_login=False, check=False)
    calls: list[object] = []
    result = drive(machine, lambda call: calls.append(call) or ProcessResult(3, ["x"], ["boom"]))
    assert result.exit_code == 3
    assert calls == [EnsureLogin(), RunCli()]
    assert RunCli() == RunCli()


# --------------------------------------------------------------------------------------------------- shell


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


# ---------------------------------------------------------------------------------------------------- argv


def test_create_arguments_edges():
    caps = BrevCapabilities((0, 6, 327), "v0.6.327", frozenset({"workspace-group-id"}))
    config = BrevConnectionConfig("c", workspace_group_id="wg-default")
    plan = create_args(
        "w",
        caps=caps,
        config=config,
        gpu=None,
        types=["g6.xlarge"],
        min_vram=16,
        cloud_cred_id=None,
        workspace_group_id=None,
        wait=True,
        timeout=600.9,
    )
    assert plan.args == [
        "create",
        "w",
        "--type",
        "g6.xlarge",
        "--min-vram",
        "16",
        "--workspace-group-id",
        "wg-default",
        "--timeout",
        "600",
    ]
    assert plan.notes == [] and plan.warnings == []
    gpu = create_args(
        "w",
        caps=BrevCapabilities((0, 6, 327), "v", frozenset({"gpu"})),
        config=BrevConnectionConfig("c"),
        gpu="L40S:1",
        types=[],
        min_vram=16,
        cloud_cred_id=None,
        workspace_group_id=None,
        wait=False,
        timeout=1,
    )
    assert gpu.args == ["create", "w", "--gpu", "L40S:1", "--detached"]  # min_vram goes with types only
    assert search_args() == ["search", "--json"]
    assert search_args(gpu_name="L4", min_vram=24.0, include_cpu=True) == [
        "search",
        "cpu",
        "--gpu-name",
        "L4",
        "--min-vram",
        "24",
        "--json",
    ]


@pytest.mark.parametrize(
    ("build", "target", "expected"),
    [
        (stop_args, "id-1", ["stop", "id-1"]),
        (start_args, "id-1", ["start", "-d", "id-1"]),  # detached: without -d the CLI polls forever
        (start_args, "w-1", ["start", "-d", "w-1"]),
    ],
)
def test_stop_and_start_name_one_instance(build, target, expected):
    assert build(target) == expected


def test_create_waits_with_its_timeout_in_whole_seconds():
    plan = create_args(
        "w",
        caps=BrevCapabilities((0, 6, 327), "v"),
        config=BrevConnectionConfig("c"),
        gpu=None,
        types=["t"],
        min_vram=None,
        cloud_cred_id=None,
        workspace_group_id=None,
        wait=True,
        timeout=600.9,
    )
    assert plan.args == ["create", "w", "--type", "t", "--timeout", "600"]


# ----------------------------------------------------------------------------------------------- classify


@pytest.mark.parametrize(
    ("stderr", "message"),
    [
        ("instance with id/name x not found", "The Brev instance does not exist."),
        ('instance "x" is in state "STOPPING"', "The Brev instance is not running."),
        ("name is required", "`brev create` rejected its input."),
        ("please retry", "`brev create` hit a transient Brev error."),
        (
            "could only create 0/1 instances",
            "Brev had no capacity for any candidate instance type; try later or allow more types.",
        ),
    ],
)
def test_classified_errors_say_what_happened(stderr, message):
    assert classify_failure("create", 1, "", stderr).message == message
