"""The shared parameter checks (airflow_provider_brev/core/validation.py): parsed values, and errors that name the
parameter and are never retried."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta

import pytest

from airflow_provider_brev.core import validation
from airflow_provider_brev.core import validation as v
from airflow_provider_brev.core.instances.sweep import SweepSpec
from airflow_provider_brev.exceptions import BrevInvalidInputError, retry_policy


@pytest.mark.parametrize(
    ("gpu", "types", "expected"),
    [
        ("L40S:1", None, ("L40S:1", None)),
        (" L40S:1 ", "", ("L40S:1", None)),
        (None, "g6e.xlarge, g6e.2xlarge", (None, ["g6e.xlarge", "g6e.2xlarge"])),
        ("", ["g6e.xlarge"], (None, ["g6e.xlarge"])),
        ("", "", (None, None)),  # empty: the caller decides (the create operator refuses it)
    ],
)
def test_instance_request_shapes(gpu, types, expected):
    assert v.instance_request(gpu, types) == expected


@pytest.mark.parametrize(
    ("gpu", "types", "fragment"),
    [
        ("L40S:1", "g6e.xlarge", "either gpu"),
        ("L40S:0", None, "Invalid gpu"),
        ("L40S!", None, "Invalid gpu"),
        (None, "g6e xlarge", "instance_types: Invalid instance type"),
        (None, ["-rf"], "instance_types: Invalid instance type"),
        (8, None, "gpu must be"),
        (None, {"a": 1}, "instance_types must be"),
    ],
)
def test_bad_instance_requests_name_gpu_or_instance_types(gpu, types, fragment):
    with pytest.raises(BrevInvalidInputError, match=fragment):
        v.instance_request(gpu, types)


@pytest.mark.parametrize(
    ("check", "args", "kwargs", "message"),
    [
        (
            v.placement_id,
            ("cloud_cred_id", "--org=evil"),
            {},
            "cloud_cred_id must be an id as `brev` lists it (starting with a letter or digit), got '--org=evil'.",
        ),
        (
            v.s3_bucket,
            ("s3_bucket", "bucket/prefix"),
            {},
            "s3_bucket must be a bucket name alone (the prefix goes into s3_prefix), got 'bucket/prefix'.",
        ),
        (v.instance_request, (8, None), {}, "gpu must be a GPU request such as 'L40S:1', got 8."),
        (
            v.instance_request,
            (None, {"a": 1}),
            {},
            "instance_types must be a list of instance types or a comma-separated string, got {'a': 1}.",
        ),
        (
            v.s3_uri,
            ("spec_uri", "s3://abc/"),
            {"object_key": True},
            "spec_uri must be the URI of an S3 object, such as 's3://bucket/specs/train.yaml', got 's3://abc/'.",
        ),
    ],
)
def test_refusals_are_worded_in_full(check, args, kwargs, message):
    with pytest.raises(BrevInvalidInputError) as raised:
        check(*args, **kwargs)
    assert str(raised.value) == message


def test_an_object_uri_with_a_one_letter_key_is_an_object():
    assert v.s3_uri("spec_uri", "s3://abc/x", object_key=True) == "s3://abc/x"


@pytest.mark.parametrize("value", [None, 2.5, ["web"]])
def test_only_whole_numbers_become_instance_name_text(value):
    """A native-rendered ``12`` is the name ``"12"``; ``None``, floats and lists are refused, not stringified."""
    with pytest.raises(BrevInvalidInputError):
        v.instance_name("instance_name", value)
    assert v.instance_name("instance_name", 12) == "12"


# --- the checked, frozen parameters of the instance operators -------------------------------------------------------
@pytest.mark.parametrize(
    ("rendered", "message"),
    [
        ({}, "No instance type requested: pass gpu (e.g. 'L40S:1') or instance_types"),
        ({"gpu": "", "instance_types": []}, "No instance type requested"),
        ({"gpu": "L40S:1", "instance_types": "g6e.xlarge"}, "either gpu"),
        ({"gpu": "L40S:1", "min_vram": "0"}, "min_vram must be a positive number of GB, got '0'."),
        (
            {"gpu": "L40S:1", "max_price_per_hour": "-1"},
            "max_price_per_hour must be a positive number of dollars per hour, got '-1'.",
        ),
        ({"gpu": "L40S:1", "max_lifetime": None}, "max_lifetime"),
        ({"gpu": "L40S:1", "max_lifetime": "0"}, "max_lifetime must be a positive number of seconds"),
        ({"gpu": "L40S:1", "instance_name": "-bad"}, "instance_name"),
        ({"gpu": "L40S:1", "name_prefix": "UPPER"}, "name_prefix"),
        ({"gpu": "L40S:1", "cloud_cred_id": "--flag"}, "cloud_cred_id"),
        ({"gpu": "L40S:1", "workspace_group_id": "a b"}, "workspace_group_id"),
        ({"gpu": "L40S:1", "require_docker": "maybe"}, "require_docker"),
        ({"gpu": "L40S:1", "adopt_existing": "maybe"}, "adopt_existing"),
        ({"gpu": "L40S:1", "reuse_key": "x" * 201}, "reuse_key"),
        ({"gpu": "L40S:1", "reuse_key": "k", "instance_name": "box"}, "reuse_key='k' and instance_name='box' together"),
        ({"gpu": "L40S:1", "max_idle": "never"}, "max_idle"),
    ],
)
def test_a_bad_instance_request_names_its_parameter_and_is_not_retried(rendered, message):
    with pytest.raises(BrevInvalidInputError) as raised:
        v.checked_instance_request(rendered)
    assert re.search(rf"(?<!\w){re.escape(message)}", str(raised.value)), str(raised.value)  # named, not renamed
    assert retry_policy(raised.value) == "never"


CREATE = {
    "brev_conn_id": "brev_default",
    "gpu": "L40S:1",
    "wait_for_ready": True,
    "ready_timeout": 1200,
    "poll_interval": 1.0,
    "deferrable": False,
    "delete_on_failure": True,
}


def test_a_create_spec_holds_the_checked_request_and_how_the_task_waits():
    rendered = {**CREATE, "ready_timeout": "60", "poll_interval": "0.5", "deferrable": "true", "require_docker": "1"}
    spec = v.create_spec(rendered, deferrable_default=False)
    assert spec.request == v.checked_instance_request(rendered)
    assert spec.request.require_docker is True
    assert (spec.wait_for_ready, spec.ready_timeout, spec.poll_interval) == (True, 60.0, 0.5)
    assert (spec.deferrable, spec.delete_on_failure) == (True, True)


@pytest.mark.parametrize("deferrable_default", [True, False])
def test_empty_create_booleans_mean_their_defaults(deferrable_default):
    rendered = {**CREATE, "wait_for_ready": "", "deferrable": "", "delete_on_failure": "None"}
    spec = v.create_spec(rendered, deferrable_default=deferrable_default)
    assert (spec.wait_for_ready, spec.deferrable, spec.delete_on_failure) == (True, deferrable_default, True)
    spec = v.create_spec({**CREATE, "wait_for_ready": "no", "delete_on_failure": "off"}, deferrable_default=True)
    assert (spec.wait_for_ready, spec.deferrable, spec.delete_on_failure) == (False, False, False)


@pytest.mark.parametrize(
    ("bad", "name"),
    [
        ({"brev_conn_id": "bad id"}, "brev_conn_id"),
        ({"brev_conn_id": "bad id", "gpu": ""}, "brev_conn_id"),  # the connection is checked first
        ({"ready_timeout": "soon"}, "ready_timeout"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"wait_for_ready": "maybe"}, "wait_for_ready"),
        ({"deferrable": "maybe"}, "deferrable"),
        ({"delete_on_failure": "maybe"}, "delete_on_failure"),
    ],
)
def test_a_bad_create_parameter_is_named(bad, name):
    with pytest.raises(BrevInvalidInputError, match=rf"\b{name}\b"):
        v.create_spec({**CREATE, **bad}, deferrable_default=False)


def test_a_delete_spec_is_checked_and_frozen():
    rendered = {
        "brev_conn_id": None,
        "instance_name": 42,
        "wait_for_deletion": "yes",
        "deletion_timeout": "30",
        "release": " STOP ",
    }
    spec = v.delete_spec(rendered)
    assert (spec.instance_name, spec.wait_for_deletion, spec.deletion_timeout, spec.release) == (
        "42",
        True,
        30.0,
        "stop",
    )
    empty = v.delete_spec({**rendered, "wait_for_deletion": "", "release": ""})
    assert (empty.wait_for_deletion, empty.release) == (False, "delete")


@pytest.mark.parametrize(
    ("bad", "name"),
    [
        ({"brev_conn_id": "bad id", "instance_name": None}, "brev_conn_id"),
        ({"instance_name": None}, "instance_name"),
        ({"instance_name": "-box"}, "instance_name"),
        ({"wait_for_deletion": "maybe"}, "wait_for_deletion"),
        ({"deletion_timeout": -1}, "deletion_timeout"),
        ({"release": "keep"}, "release"),
    ],
)
def test_a_bad_delete_parameter_is_named(bad, name):
    rendered = {"brev_conn_id": "brev_default", "instance_name": "box", "wait_for_deletion": False}
    with pytest.raises(BrevInvalidInputError, match=rf"\b{name}\b"):
        v.delete_spec({**rendered, "deletion_timeout": 600, **bad})


def test_a_sweep_spec_is_checked_and_frozen():
    rendered = {
        "brev_conn_id": "brev_default",
        "name_prefix": "team7",
        "grace_period": "0",
        "dry_run_only": "true",
        "wait_for_deletion": "",
        "deletion_timeout": "30",
        "poll_interval": 2,
        "cli_retry_limit": "3",
        "cli_retry_delay": "0",
    }
    spec = v.sweep_spec(rendered)
    assert (spec.name_prefix, spec.grace_period, spec.dry_run, spec.wait_for_deletion) == (
        "team7",
        timedelta(0),
        True,
        False,
    )
    assert (spec.deletion_timeout, spec.poll_interval, spec.cli_retry_limit, spec.cli_retry_delay) == (
        30.0,
        2.0,
        3,
        0.0,
    )
    unset = v.sweep_spec(
        {**rendered, "name_prefix": None, "grace_period": None, "cli_retry_limit": "", "dry_run_only": ""}
    )
    assert (unset.name_prefix, unset.grace_period, unset.cli_retry_limit, unset.dry_run) == (
        None,
        timedelta(0),
        None,
        False,
    )
    assert v.sweep_spec({**rendered, "grace_period": timedelta(hours=1)}).grace_period == timedelta(hours=1)
    assert isinstance(spec, SweepSpec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.dry_run = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("bad", "name"),
    [
        ({"brev_conn_id": "bad id"}, "brev_conn_id"),
        ({"name_prefix": "UPPER"}, "name_prefix"),
        ({"grace_period": "-1"}, "grace_period"),
        ({"dry_run_only": "maybe"}, "dry_run"),
        ({"wait_for_deletion": "maybe"}, "wait_for_deletion"),
        ({"deletion_timeout": 0}, "deletion_timeout"),
        ({"poll_interval": "x"}, "poll_interval"),
        ({"cli_retry_limit": 0}, "cli_retry_limit"),
        ({"cli_retry_delay": -1}, "cli_retry_delay must be a number >= 0 of seconds"),
    ],
)
def test_a_bad_sweep_parameter_is_named(bad, name):
    rendered = {"brev_conn_id": None, "deletion_timeout": 600, "poll_interval": 5}
    with pytest.raises(BrevInvalidInputError, match=rf"\b{name}\b"):
        v.sweep_spec({**rendered, **bad})


def test_instance_request_messages_name_the_parameter():
    with pytest.raises(BrevInvalidInputError, match=r"^instance_types: Invalid instance type name"):
        validation.instance_request(None, ["bad type"])
    with pytest.raises(BrevInvalidInputError, match=r"^Invalid gpu 'L40S:0'"):
        validation.instance_request("L40S:0", None)
    with pytest.raises(BrevInvalidInputError, match="not both"):
        validation.instance_request("L4", ["g6.xlarge"])
