"""Airflow's own provider conventions for operator arguments, checked on every operator, sensor and transfer of the
package, found by walking its packages (the end-to-end mapping runs are tests/integration/test_mapping.py)."""

from __future__ import annotations

import inspect

import pytest
from helpers import provider_operator_classes

from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.operators.tao import BrevPreflightOperator

#: Every operator class of the provider: operators, sensors and transfers, bases included (found, not listed).
ALL_OPERATORS = provider_operator_classes()
#: The Brev ones DAG authors use (they take ``brev_conn_id``; a Lepton step does not), without the bases.
OPERATORS = [cls for cls in ALL_OPERATORS if "brev_conn_id" in cls.template_fields and "Base" not in cls.__name__]


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


def conn_id_parameters(cls: type) -> list[str]:
    return sorted(name for name in init_parameters(cls) if name.endswith("_conn_id"))


def test_the_walk_finds_every_kind_of_operator():
    names = {cls.__name__ for cls in ALL_OPERATORS}
    assert {"BrevCreateInstanceOperator", "BrevReadySensor", "S3ToBrevOperator", "BrevPreflightOperator"} <= names
    assert {"TaoOperator", "LeptonJobOperator", "LeptonTaoOperator", "LeptonStepOperator"} <= names
    assert {name for cls in ALL_OPERATORS for name in conn_id_parameters(cls)} == {
        "aws_conn_id",
        "brev_conn_id",
        "hf_conn_id",
        "lepton_conn_id",
        "ngc_conn_id",
    }


@pytest.mark.parametrize("cls", ALL_OPERATORS, ids=lambda c: c.__name__)
def test_every_conn_id_argument_is_templated(cls):
    conn_ids = conn_id_parameters(cls)
    assert conn_ids or "Base" in cls.__name__, f"{cls.__name__} takes no connection"
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


@pytest.mark.parametrize(
    ("cls", "conn_id"),
    [(cls, name) for cls in ALL_OPERATORS for name in conn_id_parameters(cls)],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_every_conn_id_can_be_expanded_over(cls, conn_id):
    """``.partial(...).expand(<x>_conn_id=[...])``: one mapped task per connection (the end-to-end run is
    tests/integration/test_mapping.py)."""
    mapped = cls.partial(task_id=f"over_{conn_id}").expand(**{conn_id: ["conn_a", "conn_b"]})
    assert mapped.expand_input.value == {conn_id: ["conn_a", "conn_b"]}
    assert conn_id in mapped.template_fields
