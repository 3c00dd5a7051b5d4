"""A step's spec (airflow_provider_brev/steps/spec.py): a frozen, checked value built from the task's parameters alone
(the import contract that keeps it pure is tested in test_spec_contract.py)."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.instances.release import RELEASE_DELETE, RELEASE_STOP
from airflow_provider_brev.core.instances.request import InstanceRequest
from airflow_provider_brev.exceptions import BrevInvalidInputError
from airflow_provider_brev.operators.exec import BrevExecOperator
from airflow_provider_brev.steps.spec import step_spec


def rendered(**changes):
    task = BrevExecOperator(task_id="step", command="true", **{"gpu": "L40S:1", "timeout": 600, **changes})
    return task.parameters()


def test_an_ephemeral_step_spec_carries_a_checked_frozen_request():
    parameters = rendered(min_vram="24", max_price_per_hour="2", max_run_cost="1", reuse_key="k", release="stop")
    before = dict(parameters)
    spec = step_spec(parameters, deferrable_default=False)
    assert parameters == before  # read, never changed: a resumed task builds the same spec
    assert spec == step_spec(parameters, deferrable_default=False)
    request = spec.compute.request
    assert isinstance(request, InstanceRequest)
    assert (request.gpu, request.min_vram, request.max_price_per_hour, request.max_run_cost) == (
        "L40S:1",
        24.0,
        2.0,
        1.0,
    )
    assert request.estimate_seconds == spec.compute.ready_timeout + 600
    assert (request.reuse_key, spec.compute.release) == ("k", RELEASE_STOP)


def test_a_step_on_an_existing_instance_has_no_request_and_refuses_a_release_policy():
    spec = step_spec(rendered(gpu=None, instance_name="box"), deferrable_default=False)
    assert (spec.compute.request, spec.compute.release) == (None, RELEASE_DELETE)
    with pytest.raises(BrevInvalidInputError, match="reuse_key and release apply to the instance a step creates"):
        step_spec(rendered(gpu=None, instance_name="box", release="stop"), deferrable_default=False)
