"""The parameter groups of the operators (airflow_provider_brev/utils/mixins.py): each parameter is declared once along
an operator's classes, documented once, templated as its group says, and mappable like any operator argument."""

from __future__ import annotations

import inspect
import re
from collections import Counter, defaultdict

import pytest
from helpers import provider_operator_classes

from airflow_provider_brev._compat import BaseOperator
from airflow_provider_brev.operators.exec import BrevExecOperator
from airflow_provider_brev.operators.lepton import LeptonJobOperator, LeptonStepOperator, LeptonTaoOperator
from airflow_provider_brev.operators.step import BrevStepOperator
from airflow_provider_brev.operators.tao import TaoOperator
from airflow_provider_brev.utils.mixins import (
    BrevConnectionParams,
    CommandParams,
    FollowParams,
    StepDataParams,
    TaoParams,
    parameter_names,
)

GROUPS = [BrevConnectionParams, FollowParams, StepDataParams, CommandParams, TaoParams]
#: Every operator class of the provider (operators, sensors, transfers, bases included) and the groups themselves.
CLASSES = [*provider_operator_classes(), *GROUPS]


def provider_classes(cls: type) -> list[type]:
    """The classes of ``cls``'s MRO that the provider defines (Airflow's own bases are Airflow's)."""
    return [klass for klass in cls.__mro__ if klass.__module__.startswith("airflow_provider_brev.")]


def declared(klass: type) -> list[str]:
    """The parameters ``klass``'s own ``__init__`` declares (not the pass-through ``**kwargs``)."""
    init = klass.__dict__.get("__init__")
    if init is None:
        return []
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [name for name, p in inspect.signature(init).parameters.items() if p.kind in kinds and name != "self"]


def documented(klass: type) -> list[str]:
    return re.findall(r":param (\w+):", klass.__doc__ or "")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_parameter_is_declared_twice_along_an_operators_classes(cls):
    where = defaultdict(list)
    for klass in provider_classes(cls):
        for name in declared(klass):
            where[name].append(klass.__name__)
    assert {name: classes for name, classes in where.items() if len(classes) > 1} == {}


def declaring_classes(cls: type) -> dict[str, type]:
    """Each parameter ``cls`` takes (Airflow's ``BaseOperator`` ones aside) and the provider class that declares it."""
    return {name: klass for klass in reversed(provider_classes(cls)) for name in declared(klass)}


@pytest.mark.parametrize(
    ("brev", "lepton"),
    [
        (BrevStepOperator, LeptonStepOperator),
        (BrevExecOperator, LeptonJobOperator),
        (TaoOperator, LeptonTaoOperator),
    ],
    ids=lambda c: c.__name__,
)
def test_a_parameter_the_brev_and_the_lepton_operator_share_is_declared_once(brev, lepton):
    """How a step is followed, its data and a TAO action are the same on both computes: one declaration each, in a
    group both inherit (not a copy per compute that could drift)."""
    on_brev, on_lepton = declaring_classes(brev), declaring_classes(lepton)
    shared = (set(on_brev) & set(on_lepton)) - set(inspect.signature(BaseOperator.__init__).parameters)
    assert shared
    assert {
        name: (on_brev[name].__name__, on_lepton[name].__name__)
        for name in shared
        if on_brev[name] is not on_lepton[name]
    } == {}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_parameter_is_documented_once_along_an_operators_classes(cls):
    classes = provider_classes(cls)
    parameters = {name for klass in classes for name in declared(klass)}
    docs = Counter(name for klass in classes for name in documented(klass))
    assert {name: docs[name] for name in parameters if docs[name] != 1} == {}
    assert set(docs) - parameters <= {"kwargs"}  # no stale :param:


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_operator_templates_what_its_groups_template(cls):
    for group in GROUPS:
        if issubclass(cls, group):
            assert set(group.template_fields) <= set(cls.template_fields), group.__name__


def test_the_brev_and_the_lepton_steps_share_the_groups():
    assert issubclass(TaoOperator, FollowParams) and issubclass(TaoOperator, StepDataParams)
    assert issubclass(LeptonTaoOperator, FollowParams) and issubclass(LeptonTaoOperator, StepDataParams)
    assert issubclass(TaoOperator, TaoParams) and issubclass(LeptonTaoOperator, TaoParams)
    assert not issubclass(LeptonTaoOperator, BrevConnectionParams)  # a Lepton step has a connection of its own
    assert parameter_names(FollowParams) == (
        "timeout",
        "deferrable",
        "poll_interval",
        "max_poll_failures",
        "on_kill_action",
    )
    assert parameter_names(StepDataParams) == ("inputs", "outputs", "aws_conn_id", "output_sync_interval")


GROUP_PARAMETERS = [
    (cls, name)
    for cls in provider_operator_classes()
    if "Base" not in cls.__name__
    for group in GROUPS
    if issubclass(cls, group)
    for name in parameter_names(group)
]


@pytest.mark.parametrize(("cls", "name"), GROUP_PARAMETERS, ids=lambda value: getattr(value, "__name__", value))
def test_a_group_parameter_can_be_expanded_over(cls, name):
    """Airflow accepts in ``.partial()``/``.expand()`` only the arguments of ``BaseOperator`` subclasses' ``__init__``:
    a group that were a plain mixin would raise TypeError here."""
    mapped = cls.partial(task_id=f"over_{name}").expand(**{name: ["a", "b"]})
    assert mapped.expand_input.value == {name: ["a", "b"]}
