from __future__ import annotations

import json

import pytest

from airflow_provider_brev.core.protocol.classify import classify_failure, is_logged_out
from airflow_provider_brev.core.protocol.output import (
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
    BrevAuthError,
    BrevCLIError,
    BrevConnectionLostError,
    BrevDuplicateNameError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevPlacementRequiredError,
    BrevTransientError,
    retry_policy,
)

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


def test_logged_out_detection():
    assert is_logged_out("You are currently logged out, would you like to log in? [Y/n]: ", "EOF\n")
    assert is_logged_out("", "https://x/api/me?x 401 Unauthorized {}")
    # a breadcrumb is not a diagnosis: this session prints it on every call, logged in or not
    assert not is_logged_out("no oauth found for token\n", "something")
    assert not is_logged_out("fine", "unexpected EOF while reading")


@pytest.mark.parametrize(
    ("stderr", "error_type"),
    [
        ("EOF", BrevAuthError),
        ("unknown flag: --yes", BrevInvalidInputError),
        (
            "placement error: this organization has 2 cloud credentials; pass --cloud-cred-id",
            BrevPlacementRequiredError,
        ),
        (
            "Error: workspace 'x' already exists. Use a different name\ncould only create 0/1 instances",
            BrevDuplicateNameError,
        ),
        ("name must be 63 characters or fewer (got 70)", BrevInvalidInputError),
        ("no GPU instances match the specified filters. Try 'brev search'", BrevNoMatchingTypeError),
        ("instance type \"zz\" is not a recognized type; run 'brev search'", BrevNoMatchingTypeError),
        ("[Worker 1] g6e Failed: no capacity available\ncould only create 0/1 instances", BrevNoCapacityError),
        (
            'could not resolve workspace group for "X" (instance-type listing was unavailable); please retry',
            BrevTransientError,
        ),
        ("https://brevapi/api/x 502 Bad Gateway <html>", BrevTransientError),
        ("https://brevapi/api/x 500 Internal Server Error {}", BrevTransientError),
        ("1 error occurred:\n\t* instance with id/name ghost not found\n\n", BrevInstanceNotFoundError),
        ('ssh connection failed and could not look up instance "ghost": x\nPlease check', BrevInstanceNotFoundError),
        ('instance "x" is in state "DEPLOYING" — please check with: brev ls', BrevInstanceNotReadyError),
        (
            'could not connect to instance "x": \nssh: connect to host 1.2.3.4 port 22: Connection refused',
            BrevConnectionLostError,
        ),
        ("something nobody expected", BrevCLIError),
    ],
)
def test_classify_failure(stderr, error_type):
    error = classify_failure("create", 1, "", stderr)
    assert type(error) is error_type
    assert error.cli_message  # the CLI's own words travel with the error
    assert error.cli_message.splitlines()[-1].strip() in str(error)


def test_retry_policy_follows_the_type():
    assert retry_policy(classify_failure("ls", 1, "", "https://api/x 503 Service Unavailable y")) == "hook"
    assert retry_policy(classify_failure("ls", 1, "", "EOF")) != "hook"
    assert retry_policy(classify_failure("create", 1, "", "no GPU instances match the specified filters")) == "never"
