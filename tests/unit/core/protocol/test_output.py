from __future__ import annotations

import json

import pytest

from airflow_provider_brev.core.instances.recovery import LOST_FAILURE, LOST_UNREACHABLE, diagnose_loss
from airflow_provider_brev.core.instances.warm_pool_records import ownership_problem
from airflow_provider_brev.core.protocol.output import (
    STATUS_DELETING,
    STATUS_DEPLOYING,
    STATUS_FAILURE,
    STATUS_RUNNING,
    STATUS_STARTING,
    STATUS_STOPPED,
    STATUS_STOPPING,
    STATUS_UNHEALTHY,
    TERMINAL_BAD_STATUSES,
    BrevInstance,
    GpuSpec,
    InstanceTypeOffer,
    parse_create_wait_failure,
    parse_created_names,
    parse_gpu_spec,
    parse_help_flags,
    parse_instances,
    parse_search,
    parse_version,
    select_offers,
    strip_exec_trailer,
)
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevJobLostError,
    BrevTransientError,
)
from unit.core.instances.warm_pool_records_helpers import CREATOR, HOLDER, OURS, entry_for, managed

WORKSPACE = {
    "name": "train-1",
    "id": "abc123def",
    "status": "RUNNING",
    "build_status": "COMPLETED",
    "shell_status": "READY",
    "health_status": "HEALTHY",
    "instance_type": "g6e.xlarge",
    "instance_kind": "gpu",
    "gpu": "L40S",
}


@pytest.mark.parametrize(
    "stdout",
    [
        json.dumps({"workspaces": [WORKSPACE]}, indent=2),
        json.dumps([WORKSPACE]),
        "no oauth found for token\n" + json.dumps({"workspaces": [WORKSPACE]}, indent=2),
    ],
    ids=["object-v0.6.323", "bare-list-v0.6.317", "noise-before-json"],
)
def test_parse_instances_accepts_every_shape(stdout):
    (instance,) = parse_instances(stdout)
    assert instance.name == "train-1"
    assert instance.shell_ready
    assert instance.gpu == "L40S"


@pytest.mark.parametrize("stdout", ['{"workspaces": null}', "null", "[]"])
def test_parse_instances_empty(stdout):
    assert parse_instances(stdout) == []


def test_parse_instances_reads_workspace_group_of_documented_cli():
    (instance,) = parse_instances(json.dumps({"workspaces": [{**WORKSPACE, "workspaceGroupId": "wg-2"}]}))
    assert instance.workspace_group_id == "wg-2"


def test_parse_instances_garbage_is_a_typed_error():
    with pytest.raises(BrevCLIError, match="Could not parse"):
        parse_instances("You are currently logged out, would you like to log in? [Y/n]: ")


def test_parse_search_and_select_cheapest_first():
    rows = [
        {
            "type": "big",
            "gpu_name": "L40S",
            "gpu_count": 1,
            "vram_per_gpu_gb": 48,
            "total_vram_gb": 48,
            "price_per_hour": 2.0,
        },
        {
            "type": "small",
            "gpu_name": "L40S",
            "gpu_count": 1,
            "vram_per_gpu_gb": 48,
            "total_vram_gb": 48,
            "price_per_hour": 1.5,
        },
        {
            "type": "quad",
            "gpu_name": "L40S",
            "gpu_count": 4,
            "vram_per_gpu_gb": 48,
            "total_vram_gb": 192,
            "price_per_hour": 6.0,
        },
        {
            "type": "a100",
            "gpu_name": "A100",
            "gpu_count": 1,
            "vram_per_gpu_gb": 80,
            "total_vram_gb": 80,
            "price_per_hour": 3.0,
        },
    ]
    offers = parse_search(json.dumps(rows))
    assert [o.type for o in select_offers(offers, GpuSpec("l40s", 1))] == ["small", "big"]
    assert [o.type for o in select_offers(offers, GpuSpec("L40S", 4))] == ["quad"]
    assert select_offers(offers, GpuSpec("L40S", 1), min_vram=80) == []
    assert parse_search("[]") == []


def test_select_offers_deduplicates_types():
    offer = InstanceTypeOffer("t", "H100", 8, 80, 640, 20.0)
    cheaper = InstanceTypeOffer("t", "H100", 8, 80, 640, 19.0)
    assert select_offers([offer, cheaper], GpuSpec("H100", 8)) == [cheaper]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("L40S:1", GpuSpec("L40S", 1)),
        ("H100:8", GpuSpec("H100", 8)),
        ("A100", GpuSpec("A100", 1)),
        (" T4 : 2 ", GpuSpec("T4", 2)),
    ],
)
def test_parse_gpu_spec(spec, expected):
    assert parse_gpu_spec(spec) == expected
    assert str(parse_gpu_spec(spec)) == f"{expected.name}:{expected.count}"


@pytest.mark.parametrize("spec", ["", ":1", "L40S:0", "L40S:x", "L40S;rm -rf /"])
def test_parse_gpu_spec_rejects(spec):
    with pytest.raises(BrevInvalidInputError, match="NAME:COUNT|at least 1"):
        parse_gpu_spec(spec)


def test_versions_flags_names():
    assert parse_version("Current Version: v0.6.327\n") == (0, 6, 327)
    assert parse_version("garbage") is None
    help_text = "Flags:\n  -t, --type string   types\n  -d, --detached   no wait\n      --gpu string  gpu\n"
    assert {"type", "detached", "gpu"} <= parse_help_flags(help_text)
    assert parse_created_names("train-1\n") == ["train-1"]
    assert parse_created_names("Successfully created 1 instance(s)!\n") == []


def test_create_wait_failure_lines():
    out = "  train-1: instance train-1 failed: out of capacity in us-east\n"
    assert "out of capacity" in parse_create_wait_failure(out, "train-1")
    assert parse_create_wait_failure("  train-1: Timeout waiting for ready state", "train-1")
    assert parse_create_wait_failure("  train-1: Ready", "train-1") is None


def test_strip_exec_trailer():
    assert strip_exec_trailer(["out", "inst"], "inst") == ["out"]
    assert strip_exec_trailer(["out"], "inst") == ["out"]


FULL = {
    "name": "train-1",
    "id": "abc123",
    "status": "RUNNING",
    "build_status": "COMPLETED",
    "shell_status": "READY",
    "health_status": "HEALTHY",
    "instance_type": "g6e.xlarge",
    "instance_kind": "gpu",
    "gpu": "L40S",
}


def test_the_status_words_are_the_clis():
    assert (STATUS_RUNNING, STATUS_DEPLOYING, STATUS_STARTING, STATUS_STOPPING, STATUS_STOPPED) == (
        "RUNNING",
        "DEPLOYING",
        "STARTING",
        "STOPPING",
        "STOPPED",
    )
    assert (STATUS_DELETING, STATUS_FAILURE, STATUS_UNHEALTHY) == ("DELETING", "FAILURE", "UNHEALTHY")
    assert frozenset({"FAILURE", "DELETING"}) == TERMINAL_BAD_STATUSES


def test_a_full_listing_entry_is_parsed_whole():
    (instance,) = parse_instances(json.dumps({"workspaces": [{**FULL, "workspaceGroupId": "wg-1"}]}))
    assert instance == BrevInstance(
        "train-1", "abc123", "RUNNING", "COMPLETED", "READY", "HEALTHY", "g6e.xlarge", "L40S", "wg-1"
    )
    assert instance.to_dict() == {
        "name": "train-1",
        "id": "abc123",
        "status": "RUNNING",
        "build_status": "COMPLETED",
        "shell_status": "READY",
        "health_status": "HEALTHY",
        "instance_type": "g6e.xlarge",
        "gpu": "L40S",
        "workspace_group_id": "wg-1",
    }
    (snake,) = parse_instances(json.dumps([{**FULL, "workspace_group_id": "wg-2"}]))
    assert snake.workspace_group_id == "wg-2"


def test_absent_and_null_fields_become_empty_text():
    (instance,) = parse_instances(json.dumps({"workspaces": [{"name": "bare", "id": None, "status": None}]}))
    assert instance == BrevInstance("bare", "", "")
    assert instance.to_dict() == {
        "name": "bare",
        "id": "",
        "status": "",
        "build_status": "",
        "shell_status": "",
        "health_status": "",
        "instance_type": "",
        "gpu": "",
        "workspace_group_id": None,
    }
    assert BrevInstance("n", "i", "RUNNING") == BrevInstance("n", "i", "RUNNING", "", "", "", "", "", None)


def test_entries_without_a_name_or_not_objects_are_skipped():
    stdout = json.dumps({"workspaces": [{"id": "x"}, "garbage", {"name": ""}, {**FULL}]})
    assert [i.name for i in parse_instances(stdout)] == ["train-1"]


def test_an_unexpected_document_is_a_typed_error():
    with pytest.raises(BrevCLIError, match="Could not parse") as err:
        parse_instances("x" * 400)
    assert err.value.message.endswith("x" * 300)
    assert "x" * 301 not in err.value.message


@pytest.mark.parametrize(
    ("status", "build", "shell", "running", "ready"),
    [
        ("RUNNING", "COMPLETED", "READY", True, True),
        ("RUNNING", "COMPLETED", "", True, True),  # older CLIs: no shell_status, the build decides
        ("RUNNING", "BUILDING", "", True, False),
        ("RUNNING", "COMPLETED", "NOT READY", True, False),
        ("DEPLOYING", "COMPLETED", "READY", False, False),
        ("DEPLOYING", "COMPLETED", "", False, False),
    ],
)
def test_running_and_shell_ready(status, build, shell, running, ready):
    instance = BrevInstance("n", "i", status, build_status=build, shell_status=shell)
    assert instance.is_running is running
    assert instance.shell_ready is ready


def test_instances_and_specs_are_frozen_values():
    with pytest.raises(AttributeError):
        BrevInstance("n", "i", "RUNNING").status = "FAILURE"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        GpuSpec("L4").count = 2  # type: ignore[misc]
    assert GpuSpec("L4") == GpuSpec("L4", 1)
    assert InstanceTypeOffer("t", "L4", 1, 24, 24, 1.0) == InstanceTypeOffer(
        "t", "L4", 1, 24, 24, 1.0, capability=0.0, provider="", boot_time_seconds=None, raw={"ignored": 1}
    )
    assert "raw" not in repr(InstanceTypeOffer("t", "L4", 1, 24, 24, 1.0, raw={"secret": 1}))


def test_a_search_row_is_parsed_whole():
    row = {
        "type": "g6e.xlarge",
        "gpu_name": "L40S",
        "gpu_count": 2,
        "vram_per_gpu_gb": 48,
        "total_vram_gb": 96,
        "price_per_hour": 1.5,
        "capability": 8.9,
        "provider": "aws",
        "boot_time_seconds": 120,
    }
    (offer,) = parse_search("no oauth found for token\n" + json.dumps([row]))
    assert (
        offer.type,
        offer.gpu_name,
        offer.gpu_count,
        offer.vram_per_gpu_gb,
        offer.total_vram_gb,
        offer.price_per_hour,
        offer.capability,
        offer.provider,
        offer.boot_time_seconds,
    ) == ("g6e.xlarge", "L40S", 2, 48.0, 96.0, 1.5, 8.9, "aws", 120.0)
    assert offer.raw == row


def test_a_sparse_or_sdk_shaped_search_row_gets_defaults():
    (sdk,) = parse_search(json.dumps([{"type": "t", "gpu": "A10G", "gpuCount": 4}]))
    assert (sdk.gpu_name, sdk.gpu_count) == ("A10G", 4)
    (bare,) = parse_search(json.dumps([{"type": "t"}, {"gpu_name": "no type"}, "garbage"]))
    assert (bare.gpu_name, bare.gpu_count, bare.vram_per_gpu_gb, bare.total_vram_gb) == ("", 0, 0.0, 0.0)
    assert (bare.price_per_hour, bare.capability, bare.provider, bare.boot_time_seconds) == (0.0, 0.0, "", None)
    assert parse_search("null") == []
    with pytest.raises(BrevCLIError, match="Could not parse `brev search --json` output: " + "y" * 300 + "$"):
        parse_search("y" * 400)


def test_select_offers_matches_name_count_vram_and_orders_by_price_then_type():
    offers = [
        InstanceTypeOffer("b", "L40S", 1, 48, 48, 1.0),
        InstanceTypeOffer("a", "L40S", 1, 48, 48, 1.0),
        InstanceTypeOffer("c", "RTX PRO 6000", 1, 96, 96, 0.5),
        InstanceTypeOffer("d", "L40S", 1, 24, 24, 0.1),
    ]
    assert [o.type for o in select_offers(offers, GpuSpec("L40S", 1), min_vram=48)] == ["a", "b"]
    assert [o.type for o in select_offers(offers, GpuSpec("RTXPRO6000", 1))] == ["c"]
    assert [o.type for o in select_offers(offers, GpuSpec("rtx pro 6000", 1))] == ["c"]


def test_small_parsers():
    assert parse_gpu_spec("L40S") == GpuSpec("L40S", 1)
    assert parse_version("") is None
    assert parse_version("v1.2.3") == (1, 2, 3)
    assert parse_help_flags("") == frozenset()
    assert parse_help_flags("  -g, --gpu-name string\n--min-vram float,--x") == {"gpu-name", "min-vram", "x"}
    assert parse_created_names("\n  \nw-1\nnot a name!\n") == ["w-1"]
    assert parse_create_wait_failure("  w-1: Ready\n  w-2: Timeout waiting for ready state", "w-1") is None
    assert parse_create_wait_failure("x\n  w-1: instance w-1 failed: boom\n", "w-1") == "w-1: instance w-1 failed: boom"
    assert strip_exec_trailer([], "w-1") == []
    assert strip_exec_trailer(["w-1 "], "w-1") == []


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


@pytest.mark.parametrize(
    ("instance", "fields", "owned", "problem"),
    [
        pytest.param(OURS, {}, {CREATOR: {"i-warm"}}, None, id="creator-recorded-it"),
        pytest.param(
            OURS, {"claimed_by": HOLDER.text}, {CREATOR: None, HOLDER: {"i-warm"}}, None, id="its-last-holder-did"
        ),
        pytest.param(
            OURS, {"created_by": "", "claimed_by": HOLDER.text}, {HOLDER: {"i-warm"}}, None, id="earlier-release"
        ),
        pytest.param(
            BrevInstance(name="my-notebook", id="i-nb", status="STOPPED"),
            {},
            {CREATOR: {"i-nb"}},
            "my-notebook is not a name this provider makes",
            id="hand-made-name",
        ),
        pytest.param(
            BrevInstance(name=managed(-2, prefix="team2"), id="i-warm", status="STOPPED"),
            {},
            {CREATOR: {"i-warm"}},
            "does not carry the owner prefix 'afbrev'",
            id="other-owner",
        ),
        pytest.param(
            OURS,
            {"created_by": HOLDER.text},
            {HOLDER: {"i-warm"}},
            "was not derived from the task the record names as its creator",
            id="name-of-another-task",
        ),
        pytest.param(OURS, {"created_by": "not a task"}, {}, "was not derived from the task", id="creator-unparseable"),
        pytest.param(
            OURS,
            {},
            {CREATOR: {"i-other"}},
            "no task it names (weekly/scheduled__2026-05-01/create/-1) recorded creating or starting id i-warm",
            id="id-not-in-xcom",
        ),
        pytest.param(
            OURS, {}, {CREATOR: None}, "XCom not readable: weekly/scheduled__2026-05-01/create/-1", id="xcom-gone"
        ),
        pytest.param(OURS, {"created_by": ""}, {}, "it names no task", id="names-no-task"),
        pytest.param(
            OURS,
            {"name": managed(-2, task=HOLDER)},
            {CREATOR: {"i-warm"}},
            "but id i-warm is listed as",
            id="record-of-another-name",
        ),
        pytest.param(OURS, {"id": "i-other"}, {CREATOR: {"i-other"}}, "but id i-warm is listed as", id="another-id"),
    ],
)
def test_a_record_acts_only_on_an_instance_the_provider_demonstrably_made(instance, fields, owned, problem):
    entry = entry_for(instance, **fields)
    found = ownership_problem(entry, instance, prefix="afbrev", owned_ids=owned)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
