"""What instance a task wants (airflow_provider_brev/core/instances/request.py): a frozen, normalised request built from
rendered parameters by core.validation.checked_instance_request, and what it tells ``brev create`` and the records."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from airflow_provider_brev.core.instances.request import (
    CreateSpec,
    InstanceRequest,
    as_timedelta,
    instance_types_list,
)
from airflow_provider_brev.core.instances.warm_pool import DEFAULT_MAX_IDLE
from airflow_provider_brev.core.protocol.names import DEFAULT_MAX_LIFETIME
from airflow_provider_brev.core.validation import checked_instance_request


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ([], None),
        (" , ", None),
        ("g6e.xlarge", ["g6e.xlarge"]),
        (" g6e.xlarge , g5.xlarge ,", ["g6e.xlarge", "g5.xlarge"]),
        (["g6e.xlarge", "g5.xlarge"], ["g6e.xlarge", "g5.xlarge"]),
        (("g6e.xlarge",), ["g6e.xlarge"]),
    ],
)
def test_instance_types_list(value, expected):
    assert instance_types_list(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(timedelta(minutes=2), timedelta(minutes=2)), (90, timedelta(seconds=90)), ("1.5", timedelta(seconds=1.5))],
)
def test_as_timedelta(value, expected):
    assert as_timedelta(value) == expected


def test_a_request_is_frozen():
    request = checked_instance_request({"instance_types": "g6e.xlarge"})
    assert request.types == ["g6e.xlarge"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.instance_types = ("g5.xlarge",)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.gpu = "A100:1"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        CreateSpec(request, True, 60.0, 1.0, False, True).ready_timeout = 1.0  # type: ignore[misc]


def test_the_defaults_are_those_of_the_operators():
    request = InstanceRequest()
    assert (request.max_lifetime, request.max_idle) == (DEFAULT_MAX_LIFETIME, DEFAULT_MAX_IDLE)
    assert (request.require_docker, request.adopt_existing) == (False, False)
    assert request.types is None
    assert request.price_cap() is None


def test_rendered_text_becomes_a_new_normalised_request_and_the_rendered_values_stay_as_they_were():
    rendered = {
        "instance_types": " g6e.xlarge, g5.xlarge ",
        "min_vram": "24",
        "cloud_cred_id": "cc-1",
        "workspace_group_id": "wg-1",
        "max_lifetime": "3600",
        "name_prefix": "team7",
        "require_docker": "true",
        "adopt_existing": "False",
        "max_price_per_hour": "2.5",
        "reuse_key": " nightly ",
        "max_idle": "7200",
    }
    before = dict(rendered)
    request = checked_instance_request(rendered)
    assert rendered == before  # read, never changed
    assert request == InstanceRequest(
        instance_name=None,
        gpu=None,
        instance_types=("g6e.xlarge", "g5.xlarge"),
        min_vram=24.0,
        cloud_cred_id="cc-1",
        workspace_group_id="wg-1",
        max_lifetime=timedelta(hours=1),
        name_prefix="team7",
        require_docker=True,
        adopt_existing=False,
        max_price_per_hour=2.5,
        reuse_key="nightly",
        max_idle=timedelta(hours=2),
    )
    assert request.types == ["g6e.xlarge", "g5.xlarge"]
    assert checked_instance_request(rendered) == request  # the same values, the same request


def test_an_explicit_name_without_a_reuse_key_is_kept():
    assert checked_instance_request({"gpu": "L40S:1", "instance_name": "box"}).instance_name == "box"


def test_empty_text_means_not_given_and_a_missing_name_its_default():
    request = checked_instance_request(
        {"gpu": " L40S:1 ", "instance_types": "", "min_vram": "", "name_prefix": "None", "reuse_key": ""}
    )
    assert request == InstanceRequest(gpu="L40S:1")


def test_cost_caps_and_the_estimate_pass_through_to_the_price_cap():
    request = checked_instance_request(
        {"gpu": "L40S:1", "max_price_per_hour": 3, "max_run_cost": 1.0, "estimate_seconds": 3600.0}
    )
    cap = request.price_cap()
    assert cap is not None
    assert cap.per_hour == 1.0  # one dollar over one hour is cheaper than 3 $/h
    assert (cap.max_price_per_hour, cap.max_run_cost, cap.estimate_seconds) == (3.0, 1.0, 3600.0)
    assert checked_instance_request({"gpu": "L40S:1", "max_price_per_hour": "2"}).price_cap().per_hour == 2.0


def test_the_spec_is_what_brev_create_needs_to_make_the_same_instance_again():
    plain = checked_instance_request({"instance_types": ["g6e.xlarge"], "min_vram": 24, "require_docker": "yes"})
    assert plain.spec() == {
        "gpu": None,
        "instance_types": ["g6e.xlarge"],
        "min_vram": 24.0,
        "cloud_cred_id": None,
        "workspace_group_id": None,
        "require_docker": True,
    }
    capped = checked_instance_request(
        {
            "gpu": "L40S:1",
            "cloud_cred_id": "cc-1",
            "workspace_group_id": "wg-1",
            "max_price_per_hour": 2,
            "reuse_key": "k",
            "max_idle": 60,
        }
    )
    assert capped.spec() == {
        "gpu": "L40S:1",
        "instance_types": None,
        "min_vram": None,
        "cloud_cred_id": "cc-1",
        "workspace_group_id": "wg-1",
        "require_docker": False,
        "max_price_per_hour": 2.0,
        "reuse_key": "k",
        "max_idle": 60.0,
    }
