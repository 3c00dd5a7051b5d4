"""A GPU step's parameters, checked once and frozen: what the step service runs.

:func:`step_spec` turns the rendered parameters of a step operator (a mapping: the operator's attributes after
templating) into a :class:`StepSpec` -- or raises
:class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` naming the parameter, before any ``brev`` call
(bad input costs nothing). It reads the parameters and changes nothing: a task resumed after a deferral is
rendered anew and builds the same spec from the same values. Numbers and booleans may be rendered text
(``"{{ params.timeout }}"``, ``"true"``); empty text means "not given". The checks are the pure ones of
:mod:`airflow_provider_brev.core.validation`: a spec is built from the pure core alone (an import contract pins it).

A spec has three parts, one per collaborator of the step service (:mod:`airflow_provider_brev.steps.service`):
:class:`ComputeSpec` (where the step runs), :class:`FollowSpec` (how its job is followed) and :class:`DataSpec`
(its S3 inputs and outputs). What runs is the workload's (:mod:`airflow_provider_brev.steps.workload`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import CostLimits, cost_limits
from airflow_provider_brev.core.instances.release import RELEASE_DELETE, release_policy
from airflow_provider_brev.core.instances.request import InstanceRequest, instance_types_list
from airflow_provider_brev.core.instances.warm_pool import DEFAULT_MAX_IDLE, reuse_key_value
from airflow_provider_brev.core.jobs.follower import FollowPolicy
from airflow_provider_brev.core.staging.manifest import validate_inputs, validate_outputs
from airflow_provider_brev.core.validation import checked_instance_request, instance_name
from airflow_provider_brev.core.values import (
    bool_value,
    choice,
    conn_id,
    duration_seconds,
    integer,
    is_empty,
    optional,
    positive_int,
    regex,
    safe_text,
)
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

#: What ``on_kill`` does with a detached job: kill it, or keep it running so a retry can re-attach.
ON_KILL_ACTIONS = ("kill", "keep")


@dataclass(frozen=True)
class ComputeSpec:
    """Where a step runs: an existing instance, or an ephemeral one it creates and deletes.

    :param brev_conn_id: the Brev connection.
    :param instance_name: the existing instance (``None``: ephemeral).
    :param request: ephemeral mode: what to create (validated).
    :param ready_timeout: seconds to wait for a created instance.
    :param require_docker: readiness also requires ``docker info``.
    :param max_recoveries: ``max_instance_recoveries``.
    :param create_task_id: the task that created the instance (default: the nearest upstream record).
    :param limits: ``max_price_per_hour`` (ephemeral only) and ``max_run_cost``.
    :param timeout: the step's ``timeout`` in seconds (``None``: no limit), for the cost estimate.
    :param release: how an ephemeral instance ends: ``delete`` or ``stop`` (with the request's ``reuse_key``).
    """

    brev_conn_id: str
    instance_name: str | None
    request: InstanceRequest | None
    ready_timeout: float
    require_docker: bool
    max_recoveries: int
    create_task_id: str | None
    limits: CostLimits = field(default_factory=CostLimits)
    timeout: float | None = None
    release: str = RELEASE_DELETE

    @property
    def ephemeral(self) -> bool:
        return self.instance_name is None

    @property
    def estimate_seconds(self) -> float | None:
        """The step's longest billed time: ``ready_timeout`` (an instance it creates boots) plus ``timeout``."""
        if self.timeout is None:
            return None
        return self.timeout + (self.ready_timeout if self.ephemeral else 0.0)


@dataclass(frozen=True)
class FollowSpec:
    """How a step's command runs and is followed.

    :param detach: a detached job (else the foreground).
    :param deferrable: follow it from the triggerer.
    :param timeout: seconds for the whole command (``None``: no limit).
    :param poll_interval: seconds between polls while the job prints nothing.
    :param log_chunk_bytes: log bytes per poll.
    :param max_poll_failures: consecutive failed polls tolerated.
    :param progress_regex: ``(done, total)`` lines logged as a percentage.
    :param checkpoint_regex: a log line matching it makes an output sync due at once.
    :param on_kill_action: ``kill`` or ``keep`` the job when the task is killed.
    """

    detach: bool
    deferrable: bool
    timeout: float | None
    poll_interval: float
    log_chunk_bytes: int
    max_poll_failures: int
    progress_regex: str | None
    checkpoint_regex: str | None
    on_kill_action: str

    def policy(self, deadline: float | None, sync_interval: float | None) -> FollowPolicy:
        """The job follower's policy (the worker's and the triggerer's alike)."""
        return FollowPolicy(
            poll_interval=self.poll_interval,
            max_bytes=self.log_chunk_bytes,
            max_poll_failures=self.max_poll_failures,
            deadline=deadline,
            progress_regex=self.progress_regex,
            sync_interval=sync_interval,
            checkpoint_regex=self.checkpoint_regex if sync_interval is not None else None,
        )


@dataclass(frozen=True)
class DataSpec:
    """A step's data (on a Brev instance or in a Lepton job alike).

    :param inputs: S3 URI prefix -> directory on the instance, or below the job's working directory (``{}``: none).
    :param outputs: directory on the instance, or below the job's working directory -> S3 URI prefix (``{}``: none).
    :param aws_conn_id: the Amazon connection that lists and presigns.
    :param sync_interval: seconds between output syncs while the command runs.
    """

    inputs: dict[str, str]
    outputs: dict[str, str]
    aws_conn_id: str | None
    sync_interval: float

    @property
    def periodic_sync(self) -> float | None:
        """The periodic sync interval, when the step has outputs to sync."""
        return self.sync_interval if self.outputs else None


@dataclass(frozen=True)
class StepSpec:
    """Everything the step service needs besides the workload.

    :param compute: where the step runs.
    :param follow: how its command is followed.
    :param data: its inputs and outputs.
    """

    compute: ComputeSpec
    follow: FollowSpec
    data: DataSpec


def compute_spec(params: Mapping[str, Any]) -> ComputeSpec:
    """``instance_name`` (an existing instance) or ``gpu``/``instance_types`` (ephemeral), exactly one of them."""
    name = optional(instance_name, "instance_name", params.get("instance_name"))
    wants_instance = not is_empty(params.get("gpu")) or bool(instance_types_list(params.get("instance_types")))
    if name and wants_instance:
        raise BrevInvalidInputError(
            "Pass either instance_name (run on an existing instance) or gpu/instance_types (ephemeral "
            "instance for this task), not both."
        )
    if not name and not wants_instance:
        raise BrevInvalidInputError(
            "No instance: pass instance_name (e.g. create.output), or gpu / instance_types for an ephemeral "
            "instance created and deleted by this task."
        )
    require_docker = bool_value("require_docker", params.get("require_docker"), default=False)
    timeout = step_timeout(params)
    limits = cost_limits(params.get("max_price_per_hour"), params.get("max_run_cost"), timeout=timeout)
    if name and limits.max_price_per_hour is not None:
        raise BrevInvalidInputError(
            "max_price_per_hour caps the price of an instance the step creates (gpu/instance_types), and this step "
            f"runs on {name!r}: set max_price_per_hour on the task that creates it (BrevCreateInstanceOperator), "
            "or use max_run_cost to cap this step's cost."
        )
    ready_timeout = duration_seconds("ready_timeout", params["ready_timeout"])
    release = release_policy(params.get("release"))
    if name and (release != RELEASE_DELETE or reuse_key_value(params.get("reuse_key"))):
        raise BrevInvalidInputError(
            f"reuse_key and release apply to the instance a step creates (gpu/instance_types), and this step runs on "
            f"{name!r}: set reuse_key on its BrevCreateInstanceOperator and release on its BrevDeleteInstanceOperator."
        )
    request = None
    if not name:
        request = checked_instance_request(
            {
                "gpu": params.get("gpu"),
                "instance_types": params.get("instance_types"),
                "min_vram": params.get("min_vram"),
                "max_lifetime": params["max_lifetime"],
                "require_docker": require_docker,
                "max_price_per_hour": limits.max_price_per_hour,
                "max_run_cost": limits.max_run_cost,
                "estimate_seconds": None if timeout is None else ready_timeout + timeout,
                "reuse_key": params.get("reuse_key"),
                "max_idle": params.get("max_idle") or DEFAULT_MAX_IDLE,
            }
        )
    return ComputeSpec(
        brev_conn_id=conn_id("brev_conn_id", params["brev_conn_id"]),
        instance_name=name,
        request=request,
        ready_timeout=ready_timeout,
        require_docker=require_docker,
        max_recoveries=integer("max_instance_recoveries", params["max_instance_recoveries"], minimum=0),
        create_task_id=optional(safe_text, "create_task_id", params.get("create_task_id")),
        limits=limits,
        timeout=timeout,
        release=release,
    )


def step_timeout(params: Mapping[str, Any]) -> float | None:
    """The step's ``timeout`` in seconds (``None``: no limit)."""
    return optional(duration_seconds, "timeout", params.get("timeout"))


def following(params: Mapping[str, Any], *, deferrable_default: bool) -> dict[str, Any]:
    """What every compute's follow settings share, checked: ``deferrable``, ``timeout``, ``poll_interval``,
    ``max_poll_failures`` (consecutive failures tolerated: 0 gives up at the first one) and ``on_kill_action``."""
    return {
        "deferrable": bool_value("deferrable", params.get("deferrable"), default=deferrable_default),
        "timeout": step_timeout(params),
        "poll_interval": duration_seconds("poll_interval", params["poll_interval"]),
        "max_poll_failures": integer("max_poll_failures", params["max_poll_failures"], minimum=0),
        "on_kill_action": choice("on_kill_action", params.get("on_kill_action", "kill"), ON_KILL_ACTIONS),
    }


def follow_spec(params: Mapping[str, Any], *, deferrable_default: bool) -> FollowSpec:
    """How the command runs and is followed (every number positive, the regexes compile)."""
    return FollowSpec(
        detach=bool_value("detach", params.get("detach", True), default=True),
        **following(params, deferrable_default=deferrable_default),
        log_chunk_bytes=positive_int("log_chunk_bytes", params["log_chunk_bytes"]),
        progress_regex=optional(regex, "progress_regex", params.get("progress_regex")),
        checkpoint_regex=optional(regex, "checkpoint_regex", params.get("checkpoint_regex")),
    )


def data_spec(params: Mapping[str, Any]) -> DataSpec:
    """The step's S3 inputs and outputs (shapes checked, directories below a home) and their connection."""
    inputs, outputs = params.get("inputs") or {}, params.get("outputs") or {}
    validate_inputs(inputs)
    validate_outputs(outputs)
    return DataSpec(
        inputs=dict(inputs),
        outputs=dict(outputs),
        aws_conn_id=optional(conn_id, "aws_conn_id", params.get("aws_conn_id")),
        sync_interval=duration_seconds("output_sync_interval", params["output_sync_interval"]),
    )


def step_spec(params: Mapping[str, Any], *, deferrable_default: bool) -> StepSpec:
    """A step operator's rendered parameters, checked and frozen (see the module docstring).

    :param params: the rendered parameters by name.
    :param deferrable_default: what an empty ``deferrable`` means (``[operators] default_deferrable``).
    """
    return StepSpec(
        compute=compute_spec(params),
        follow=follow_spec(params, deferrable_default=deferrable_default),
        data=data_spec(params),
    )
