"""What instance a task wants, and how a create task waits for it: checked, normalised, frozen (pure).

:class:`InstanceRequest` is what a create task (:class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator`),
an ephemeral step (:mod:`airflow_provider_brev.steps.spec`) or a recovery asks
:class:`~airflow_provider_brev.instances.provisioning.InstanceProvisioner` for; :class:`CreateSpec` adds what a create
task does with it (wait for readiness, where, how long, delete on failure). Both are built from rendered parameters by
:func:`~airflow_provider_brev.core.validation.checked_instance_request` and
:func:`~airflow_provider_brev.core.validation.create_spec`, which raise
:class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` naming the parameter before any ``brev`` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_brev.core.cost import CostLimits, PriceCap
from airflow_provider_brev.core.instances.warm_pool import DEFAULT_MAX_IDLE
from airflow_provider_brev.core.protocol.names import DEFAULT_MAX_LIFETIME


def as_timedelta(value: timedelta | float | str) -> timedelta:
    """A duration given as a ``timedelta`` or as seconds (a number or its text)."""
    return value if isinstance(value, timedelta) else timedelta(seconds=float(value))


def instance_types_list(value: Any) -> list[str] | None:
    """``"a,b"`` / ``["a", "b"]`` / empty → a list or ``None``."""
    if value is None or value == []:
        return None
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()] or None
    return [str(t) for t in value]


@dataclass(frozen=True)
class InstanceRequest:
    """What instance a task wants, checked and normalised (build it with
    :func:`~airflow_provider_brev.core.validation.checked_instance_request`).

    :param instance_name: an explicit name (``None``: the provider-managed name of the task).
    :param gpu: a GPU request such as ``"L40S:1"`` (``None``: ``instance_types``).
    :param instance_types: explicit instance types, tried in order (``None``: ``gpu``).
    :param min_vram: minimum VRAM per GPU in GB.
    :param cloud_cred_id: placement id.
    :param workspace_group_id: placement id.
    :param max_lifetime: how long after the run the janitor may consider the instance expired.
    :param name_prefix: owner prefix of the managed name (``None``: the connection's).
    :param require_docker: readiness also requires ``docker info``.
    :param adopt_existing: use an instance of ``instance_name`` this task did not create (never deleted then).
    :param max_price_per_hour: the highest price per hour of the instance to create.
    :param max_run_cost: ephemeral steps: their ``max_run_cost``, which with ``estimate_seconds`` (their longest
        billed time, ``ready_timeout + timeout``) caps the price of the instance they create (:meth:`price_cap`).
    :param estimate_seconds: see ``max_run_cost``.
    :param reuse_key: warm reuse (:mod:`airflow_provider_brev.instances.warm_pool`): start a stopped instance recorded
        under this key instead of creating one.
    :param max_idle: with ``reuse_key``: how long the instance may then stay stopped.
    """

    instance_name: str | None = None
    gpu: str | None = None
    instance_types: tuple[str, ...] | None = None
    min_vram: float | None = None
    cloud_cred_id: str | None = None
    workspace_group_id: str | None = None
    max_lifetime: timedelta = DEFAULT_MAX_LIFETIME
    name_prefix: str | None = None
    require_docker: bool = False
    adopt_existing: bool = False
    max_price_per_hour: float | None = None
    max_run_cost: float | None = None
    estimate_seconds: float | None = None
    reuse_key: str | None = None
    max_idle: timedelta = DEFAULT_MAX_IDLE

    @property
    def types(self) -> list[str] | None:
        """``instance_types`` as ``brev create --type`` takes them (``None``: none given)."""
        return list(self.instance_types) if self.instance_types else None

    def price_cap(self) -> PriceCap | None:
        """The highest price per hour this request may create an instance at (``None``: no cap)."""
        return CostLimits(self.max_price_per_hour, self.max_run_cost).price_cap(self.estimate_seconds)

    def spec(self) -> dict[str, Any]:
        """What ``brev create`` needs to make the same instance again (JSON-serialisable)."""
        return {
            "gpu": self.gpu,
            "instance_types": self.types,
            "min_vram": self.min_vram,
            "cloud_cred_id": self.cloud_cred_id,
            "workspace_group_id": self.workspace_group_id,
            "require_docker": self.require_docker,
            # a re-creation keeps the cap (only when there is one: a record without it reads as before)
            **({"max_price_per_hour": self.max_price_per_hour} if self.max_price_per_hour is not None else {}),
            # the teardown's release="stop" finds the key (and how long the instance may stay stopped) here
            **({"reuse_key": self.reuse_key, "max_idle": self.max_idle.total_seconds()} if self.reuse_key else {}),
        }


@dataclass(frozen=True)
class CreateSpec:
    """A create task's checked parameters (built by :func:`~airflow_provider_brev.core.validation.create_spec`).

    :param request: the instance it wants.
    :param wait_for_ready: wait until the instance passes the readiness check.
    :param ready_timeout: seconds to wait for it.
    :param poll_interval: seconds between readiness checks.
    :param deferrable: wait in the triggerer.
    :param delete_on_failure: delete the instance when the task fails after it exists.
    """

    request: InstanceRequest
    wait_for_ready: bool
    ready_timeout: float
    poll_interval: float
    deferrable: bool
    delete_on_failure: bool


__all__ = ["CreateSpec", "InstanceRequest", "as_timedelta", "instance_types_list"]
