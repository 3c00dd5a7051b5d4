"""Every field the CLI's JSON carries reaches the parsed value, and every absent field has its stated default
(``core/protocol/output.py``): a listing and a search row are compared whole, not by one or two attributes."""

from __future__ import annotations

import json

import pytest

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
from airflow_provider_brev.exceptions import BrevCLIError

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
