"""One style in every operator, sensor and transfer of the provider: thin classes (at most 250 lines each, docstring
included) that build frozen specs from their rendered parameters and never write a parameter back into the task."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
from helpers import provider_operator_classes

from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator, BrevDeleteInstanceOperator
from airflow_provider_brev.operators.janitor import BrevSweepInstancesOperator
from airflow_provider_brev.utils.mixins import (
    BrevConnectionParams,
    CommandParams,
    FollowParams,
    InstanceParams,
    StepDataParams,
    TaoParams,
)

GROUPS = [BrevConnectionParams, InstanceParams, FollowParams, StepDataParams, CommandParams, TaoParams]
CLASSES = [*provider_operator_classes(), *GROUPS]
MAX_CLASS_LINES = 250


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_operator_class_is_at_most_250_lines(cls):
    lines, _ = inspect.getsourcelines(cls)
    assert len(lines) <= MAX_CLASS_LINES, f"{cls.__name__} is {len(lines)} lines"


def parameters_of(cls: type) -> dict[str, type]:
    """Every ``__init__`` parameter along ``cls``'s MRO, and the class that declares it (nearest first)."""
    found: dict[str, type] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            for name in inspect.signature(init).parameters:
                found.setdefault(name, klass)
    return found


def written_back(cls: type) -> set[tuple[str, str]]:
    """``(method, attribute)`` for each assignment to ``self.<parameter>`` outside ``__init__`` in the provider's
    classes of ``cls``. Parameters an Airflow class declares too (a sensor's ``poke_interval``, ``timeout``) are
    Airflow's: its own loop reads them from the task."""
    parameters = parameters_of(cls)
    ours = {n for n, k in parameters.items() if k.__module__.startswith("airflow_provider_brev.")}
    airflows = {n for k in cls.__mro__ if not k.__module__.startswith("airflow_provider_brev.") for n in _own(k)}
    found = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("airflow_provider_brev."):
            continue
        for method in ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body:
            if not isinstance(method, ast.FunctionDef) or method.name == "__init__":
                continue
            for node in ast.walk(method):
                targets = node.targets if isinstance(node, ast.Assign) else []
                targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
                for target in targets:
                    is_self = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    if is_self and target.value.id == "self" and target.attr in ours - airflows:
                        found.add((method.name, target.attr))
    return found


def _own(klass: type) -> list[str]:
    init = klass.__dict__.get("__init__")
    return list(inspect.signature(init).parameters) if init is not None else []


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_method_writes_a_parameter_back_into_the_task(cls):
    """A task resumed after a deferral is rendered anew and must build the same spec: parameters are read, checked
    into a frozen spec, and left as they were rendered."""
    assert written_back(cls) == set()


def test_the_create_task_checks_its_rendered_text_into_a_frozen_spec_and_leaves_it_as_rendered():
    task = BrevCreateInstanceOperator(
        task_id="create",
        gpu=" L40S:1 ",
        ready_timeout="60",
        poll_interval="0.5",
        require_docker="true",
        deferrable="false",
        max_lifetime="3600",
        max_price_per_hour="2.5",
    )
    rendered = {name: getattr(task, name) for name in ("gpu", "ready_timeout", "require_docker", "max_price_per_hour")}
    spec = task.spec()
    assert (spec.ready_timeout, spec.poll_interval, spec.deferrable) == (60.0, 0.5, False)
    assert (spec.request.gpu, spec.request.require_docker, spec.request.max_price_per_hour) == ("L40S:1", True, 2.5)
    assert {name: getattr(task, name) for name in rendered} == rendered
    assert task.spec() == spec


def test_the_delete_and_sweep_tasks_leave_their_parameters_as_rendered():
    delete = BrevDeleteInstanceOperator(
        task_id="delete", instance_name="box", wait_for_deletion="yes", deletion_timeout="30", release="Stop"
    )
    assert delete.spec().stop and delete.spec().deletion_timeout == 30.0
    assert (delete.wait_for_deletion, delete.deletion_timeout, delete.release) == ("yes", "30", "Stop")
    sweep = BrevSweepInstancesOperator(task_id="sweep", dry_run="true", poll_interval="2", cli_retry_limit="3")
    spec = sweep.spec()
    assert (spec.dry_run, spec.poll_interval, spec.cli_retry_limit) == (True, 2.0, 3)
    assert (sweep.dry_run_only, sweep.poll_interval, sweep.cli_retry_limit) == ("true", "2", "3")


#: Parameter names that more than one class declares, and why each is not one parameter declared twice: a different
#: thing under the same word, or a standalone operator whose meaning differs from the step's. Every other parameter
#: (the instance a task creates, a step's following, data, command, TAO action, connection) is declared once, in a
#: parameter group (:mod:`airflow_provider_brev.utils.mixins`) that every class taking it inherits.
SAME_WORD_OTHER_THING = {
    "aws_conn_id": "what the connection is used for differs: a step's data, a transfer's copy, the preflight's checks",
    "deferrable": "a readiness wait (create, sensor) vs following a job (steps): different triggers",
    "poll_interval": "readiness checks (create, default 1 s), a job's polls (steps, 5 s), the janitor's deletion waits",
    "timeout": "BaseSensorOperator's own timeout on the sensor vs a step's absolute job deadline",
    "deletion_timeout": "the delete operator's one instance vs the janitor's sweep",
    "wait_for_deletion": "the delete operator's one instance vs the janitor's sweep",
    "name_prefix": "the prefix a created name gets vs the prefixes the janitor sweeps",
    "instance_name": "the name to create, to wait for, to delete, to copy to or from, or to run a step on",
    "release": "the teardown's stop-or-delete vs an ephemeral step's own",
    "require_docker": "the sensor waits for an instance it did not create; InstanceParams is the instance a task creates",
    "remote_dir": "a transfer's source vs its destination",
    "s3_prefix": "a transfer's destination vs its source",
    "image": "a TAO image (checked for an explicit tag) vs a Lepton job's container image",
    "hf_conn_id": "the preflight checks a token exists; a TAO step passes it to the container",
    "ngc_conn_id": "the preflight checks a key exists; a TAO step logs in to nvcr.io with it",
    "input_paths": "the preflight checks the paths; a TAO step mounts them",
    "instance_paths": "the preflight checks the paths; a TAO step mounts them",
    "s3_inputs": "the preflight checks the URIs exist; a TAO step refuses to start without them",
    "spec": "the preflight validates a spec; a TAO step runs one",
}


def declared_by() -> dict[str, set[str]]:
    """Every keyword parameter a provider class's own ``__init__`` declares, and the classes declaring it."""
    classes = {k for cls in CLASSES for k in cls.__mro__ if k.__module__.startswith("airflow_provider_brev.")}
    found: dict[str, set[str]] = {}
    for klass in classes:
        init = klass.__dict__.get("__init__")
        for parameter in inspect.signature(init).parameters.values() if init is not None else ():
            if parameter.kind is parameter.KEYWORD_ONLY:
                found.setdefault(parameter.name, set()).add(klass.__name__)
    return found


def test_a_parameter_is_declared_once_across_the_operator_classes():
    twice = {name: classes for name, classes in declared_by().items() if len(classes) > 1}
    assert set(twice) - set(SAME_WORD_OTHER_THING) == set(), twice
    assert set(SAME_WORD_OTHER_THING) - set(twice) == set(), "no longer declared twice: drop from the table"


def test_the_instance_a_task_creates_is_described_once_for_the_create_operator_and_an_ephemeral_step():
    from airflow_provider_brev.operators.exec import BrevExecOperator
    from airflow_provider_brev.steps.spec import step_spec
    from airflow_provider_brev.utils.mixins import parameter_names

    owners = declared_by()
    for name in parameter_names(InstanceParams):
        assert owners[name] <= {"InstanceParams", "BrevReadySensor"}, name
        assert name in BrevCreateInstanceOperator.template_fields and name in BrevExecOperator.template_fields
    create = BrevCreateInstanceOperator(task_id="c", gpu="L40S:1", reuse_key="k", max_idle="3600").spec().request
    step = BrevExecOperator(task_id="s", command="true", gpu="L40S:1", reuse_key="k", max_idle="3600", timeout=60)
    ephemeral = step_spec(step.parameters(), deferrable_default=False).compute.request
    assert (create.gpu, create.reuse_key, create.max_idle) == (ephemeral.gpu, ephemeral.reuse_key, ephemeral.max_idle)
