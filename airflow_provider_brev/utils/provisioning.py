"""Create-or-adopt, wait for and clean up one Brev instance on behalf of a task.

Shared by :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator` and the ephemeral mode of
:class:`~airflow_provider_brev.operators.brev.BrevExecOperator`, so the lifecycle rules live in one place:

* a deterministic, owner-prefixed, expiring name derived from dag id, run id, task id and map index (never the
  try number), so a retry or a cleared task *adopts* the instance instead of creating a second one;
* an instance still DELETING is waited out, a FAILURE one is replaced;
* bad input is rejected before anything is created;
* after a failure past creation, the instance is deleted best-effort without masking the original error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.names import managed_instance_name, parse_managed_name, validate_instance_name
from airflow_provider_brev.cli.output import STATUS_DELETING, STATUS_FAILURE, BrevInstance, parse_gpu_spec
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLINotFoundError,
    BrevDuplicateNameError,
    BrevError,
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevTimeoutError,
)

if TYPE_CHECKING:
    import logging

    from airflow_provider_brev.hooks.brev import BrevHook

DEFAULT_MAX_LIFETIME = timedelta(hours=24)
#: Failures of ``create_instance`` that happen before Brev creates anything (no cleanup needed).
_NOTHING_CREATED = (
    BrevInvalidInputError,
    BrevDuplicateNameError,
    BrevNoCapacityError,
    BrevAuthError,
    BrevCLINotFoundError,
)


def as_timedelta(value: timedelta | float | int | str) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=float(value))


def instance_types_list(value: list[str] | str | None) -> list[str] | None:
    """``"a,b"`` / ``["a", "b"]`` / empty → a list or ``None``."""
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()] or None
    return [str(t) for t in value]


@dataclass
class InstanceRequest:
    """What instance a task wants (all values already rendered)."""

    instance_name: str | None = None
    gpu: str | None = None
    instance_types: list[str] | str | None = None
    min_vram: float | str | None = None
    cloud_cred_id: str | None = None
    workspace_group_id: str | None = None
    max_lifetime: timedelta | float = DEFAULT_MAX_LIFETIME
    name_prefix: str | None = None

    def validate(self) -> None:
        """Reject bad input before anything is created or paid for."""
        if self.gpu and instance_types_list(self.instance_types):
            raise BrevInvalidInputError(
                "Pass either gpu (e.g. 'L40S:1') or instance_types (e.g. ['g6e.xlarge']), not both."
            )
        if self.gpu:
            parse_gpu_spec(self.gpu)
        if self.min_vram not in (None, ""):
            try:
                if float(self.min_vram) <= 0:  # type: ignore[arg-type]
                    raise ValueError
            except (TypeError, ValueError):
                raise BrevInvalidInputError(
                    f"min_vram must be a positive number of GB, got {self.min_vram!r}."
                ) from None
        if as_timedelta(self.max_lifetime) <= timedelta(0):
            raise BrevInvalidInputError("max_lifetime must be positive.")
        if self.instance_name:
            validate_instance_name(self.instance_name)


@dataclass
class ProvisionedInstance:
    """The outcome of :meth:`InstanceProvisioner.ensure`."""

    name: str
    instance: BrevInstance
    created: bool
    managed: bool

    @property
    def owned(self) -> bool:
        """Whether this task may delete it on failure (created now, or a task-owned managed name)."""
        return self.created or self.managed


class InstanceProvisioner:
    """Lifecycle rules for one task's instance.

    :param hook: the task's :class:`~airflow_provider_brev.hooks.brev.BrevHook`.
    :param log: the task's logger.
    :param request: the wanted instance.
    :param poll_interval: seconds between status checks while waiting.
    """

    def __init__(
        self, hook: BrevHook, log: logging.Logger | Any, request: InstanceRequest, *, poll_interval: float = 1.0
    ):
        self.hook = hook
        self.log = log
        self.request = request
        self.poll_interval = poll_interval
        #: Name being created right now (for ``on_kill`` while ``brev create`` runs).
        self.pending_name: str | None = None

    def resolve_name(self, context: Any) -> tuple[str, bool]:
        """The instance name and whether it is a provider-managed (task-owned) name."""
        if self.request.instance_name:
            return validate_instance_name(self.request.instance_name), False
        ti = context["ti"]
        dag_run = context.get("dag_run")
        run_after = getattr(dag_run, "run_after", None) or getattr(dag_run, "logical_date", None)
        now = datetime.now(UTC)
        base = max(run_after, now) if isinstance(run_after, datetime) else now
        map_index = getattr(ti, "map_index", -1)
        name = managed_instance_name(
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=map_index if isinstance(map_index, int) else -1,
            expires_at=base + as_timedelta(self.request.max_lifetime),
            prefix=self.request.name_prefix or self.hook.config.name_prefix,
        )
        return name, True

    def find_existing(self, name: str, managed: bool) -> BrevInstance | None:
        """The instance an earlier try of this task left behind (same name, or same owner prefix + hash)."""
        if not managed:
            return self.hook.get_instance(name)
        wanted = parse_managed_name(name)
        assert wanted is not None
        matches = [
            instance
            for instance in self.hook.list_instances()
            if (parsed := parse_managed_name(instance.name))
            and (parsed.prefix, parsed.digest) == (wanted.prefix, wanted.digest)
        ]
        matches.sort(key=lambda i: (i.status in (STATUS_DELETING, STATUS_FAILURE), i.name))
        return matches[0] if matches else None

    def ensure(self, context: Any, *, wait_timeout: float) -> ProvisionedInstance:
        """Adopt a healthy instance of this task, or create one (waiting out DELETING, replacing FAILURE)."""
        self.request.validate()
        name, managed = self.resolve_name(context)
        existing = self.find_existing(name, managed)
        if existing is not None and existing.status == STATUS_DELETING:
            self.log.info("Instance %s is still being deleted; waiting for its name to be released.", existing.name)
            self.hook.wait_until_gone(existing.name, timeout=wait_timeout, poll_interval=self.poll_interval)
            existing = None
        if existing is not None and (existing.status == STATUS_FAILURE or existing.build_status == "CREATE_FAILED"):
            self.log.warning("Instance %s from an earlier try is in %s: replacing it.", existing.name, existing.status)
            self.hook.delete_instance(existing.name, wait=True, timeout=wait_timeout, poll_interval=self.poll_interval)
            existing = None
        if existing is not None:
            self.log.info(
                "Adopting existing instance %s (%s) instead of creating a second one.", existing.name, existing.status
            )
            return ProvisionedInstance(existing.name, existing, created=False, managed=managed)

        request = self.request
        self.pending_name = name
        try:
            instance = self.hook.create_instance(
                name,
                gpu=request.gpu or None,
                instance_types=instance_types_list(request.instance_types),
                min_vram=float(request.min_vram) if request.min_vram not in (None, "") else None,  # type: ignore[arg-type]
                cloud_cred_id=request.cloud_cred_id or None,
                workspace_group_id=request.workspace_group_id or None,
            )
        except (BrevInstanceFailedError, BrevTimeoutError) as err:
            self.cleanup_after_failure(name, owned=True, reason=str(err))
            raise
        except BrevError as err:
            # The request may have reached Brev although the call failed afterwards (a 5xx after the POST, the
            # status read failing): the name did not exist before, so an instance of that name is ours, and a
            # failed setup gets no teardown. Errors raised before anything is created need no cleanup.
            if not isinstance(err, _NOTHING_CREATED):
                self.cleanup_after_failure(name, owned=True, reason=str(err))
            raise
        finally:
            self.pending_name = None
        return ProvisionedInstance(name, instance, created=True, managed=managed)

    def wait_ready(
        self, provisioned: ProvisionedInstance, *, timeout: float, require_docker: bool, delete_on_failure: bool
    ) -> None:
        """Wait (in this process) until the instance is ready; delete it on failure if allowed and owned."""
        try:
            self.hook.wait_until_ready(
                provisioned.name, timeout, poll_interval=self.poll_interval, require_docker=require_docker
            )
        except Exception as err:
            if delete_on_failure:
                self.cleanup_after_failure(provisioned.name, owned=provisioned.owned, reason=str(err))
            raise

    def cleanup_after_failure(self, name: str, *, owned: bool, reason: str) -> None:
        """Best-effort delete after a post-create failure; never masks the original error."""
        if not owned:
            self.log.warning("Not deleting instance %s after the failure: this task does not own it.", name)
            return
        self.log.warning("Deleting instance %s because the task failed after it existed: %s", name, reason)
        try:
            self.hook.delete_instance(name)
        except Exception:
            self.log.exception("Could not delete instance %s; the janitor will remove it once it expires.", name)
