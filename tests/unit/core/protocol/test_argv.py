"""Unit tests of ``airflow_provider_brev/core/protocol/argv.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.protocol.argv import (
    create_args,
    instance_type_list,
    ls_args,
    search_args,
    start_args,
    stop_args,
)
from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig
from airflow_provider_brev.exceptions import BrevCLIError, BrevInvalidInputError


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
