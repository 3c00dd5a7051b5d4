"""Airflow's own provider conventions for operator arguments, checked on every operator and sensor of the package
(the end-to-end mapping run is tests/integration/test_mapping.py)."""

from __future__ import annotations

import inspect

import pytest

from airflow_provider_brev.operators.brev import (
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
)
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.operators.tao import (
    BrevPreflightOperator,
    TaoOperator,
    VisualChangeNetEvaluateOperator,
    VisualChangeNetExportOperator,
    VisualChangeNetGapAnalysisOperator,
    VisualChangeNetInferenceOperator,
    VisualChangeNetTrainOperator,
)
from airflow_provider_brev.sensors.brev import BrevReadySensor
from airflow_provider_brev.transfers.s3 import BrevToS3Operator, S3ToBrevOperator

OPERATORS = [
    BrevCreateInstanceOperator,
    BrevDeleteInstanceOperator,
    BrevExecOperator,
    BrevSweepInstancesOperator,
    BrevPreflightOperator,
    TaoOperator,
    VisualChangeNetEvaluateOperator,
    VisualChangeNetExportOperator,
    VisualChangeNetGapAnalysisOperator,
    VisualChangeNetInferenceOperator,
    VisualChangeNetTrainOperator,
    BrevReadySensor,
    S3ToBrevOperator,
    BrevToS3Operator,
]


def init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """Every keyword parameter of the ``__init__`` methods along the class's MRO, nearest first."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for name, parameter in inspect.signature(init).parameters.items():
            if parameter.kind == parameter.KEYWORD_ONLY:
                found.setdefault(name, parameter)
    return found


@pytest.mark.parametrize("cls", OPERATORS, ids=lambda c: c.__name__)
def test_every_conn_id_argument_is_templated(cls):
    conn_ids = [name for name in init_parameters(cls) if name.endswith("_conn_id")]
    assert "brev_conn_id" in conn_ids
    assert set(conn_ids) <= set(cls.template_fields), sorted(set(conn_ids) - set(cls.template_fields))


DEFERRING = [cls for cls in OPERATORS if "deferrable" in init_parameters(cls)]


def test_the_operators_that_defer():
    assert {cls.__name__ for cls in DEFERRING} >= {"BrevCreateInstanceOperator", "BrevExecOperator", "BrevReadySensor"}


@pytest.mark.parametrize("cls", DEFERRING, ids=lambda c: c.__name__)
def test_deferrable_defaults_to_the_airflow_setting_itself(cls):
    parameter = init_parameters(cls)["deferrable"]
    assert parameter.default is False  # conf.getboolean("operators", "default_deferrable", fallback=False)


#: What each class is mapped over in the test below (any mappable argument will do).
EXPAND = {BrevSweepInstancesOperator: {"name_prefix": ["afbrev"]}, BrevPreflightOperator: {"s3_inputs": [["s3://b/"]]}}


@pytest.mark.parametrize("cls", OPERATORS, ids=lambda c: c.__name__)
def test_brev_conn_id_is_a_mappable_task_argument(cls):
    # Airflow registers only arguments of BaseOperator subclasses' __init__ for .partial(): a mixin's would raise.
    mapped = cls.partial(task_id=f"mapped_{cls.__name__}", brev_conn_id="brev_other").expand(
        **EXPAND.get(cls, {"instance_name": ["a", "b"]})
    )
    assert mapped.partial_kwargs["brev_conn_id"] == "brev_other"
