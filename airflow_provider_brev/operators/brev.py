"""Operators for the lifecycle of NVIDIA Brev instances and for running commands on them."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import default_deferrable
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevInstanceFailedError,
    BrevInvalidInputError,
    BrevTimeoutError,
)
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.sensors.brev import DEFAULT_READY_TIMEOUT
from airflow_provider_brev.triggers.brev import EVENT_SUCCESS, EVENT_TIMEOUT, BrevInstanceReadyTrigger
from airflow_provider_brev.utils.cli_output import STATUS_DELETING, STATUS_FAILURE, BrevInstance, parse_gpu_spec
from airflow_provider_brev.utils.events import validate_event
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.names import managed_instance_name, parse_managed_name, validate_instance_name

if TYPE_CHECKING:
    from airflow.sdk import Context

XCOM_INSTANCE_NAME = "instance_name"
XCOM_INSTANCE = "instance"
DEFAULT_MAX_LIFETIME = timedelta(hours=24)
#: Airflow 3 gives ``on_kill`` about 5 s before SIGKILL: a delete request must fit.
ON_KILL_TIMEOUT = 4.0


def _as_timedelta(value: timedelta | float | int) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=float(value))


class BrevCreateInstanceOperator(BrevBaseOperator):
    """Create a Brev instance (idempotently), optionally wait until it is usable, and return its name.

    Use it as the setup of a setup/teardown pair so the instance is deleted whatever happens to the work::

        create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1")
        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> work >> delete.as_teardown(setups=create)

    **Idempotent.** Without ``instance_name`` the name is derived from dag id, run id, task id and map index
    (never the try number), carries the owner prefix and an expiry the janitor can read, and a retry or a
    cleared task *adopts* the existing healthy instance instead of creating a second one; it waits out a
    ``DELETING`` one and replaces a ``FAILURE`` one.

    **Cleans up after itself.** A failed setup task gets no teardown, so if anything fails after the
    instance exists inside this task (FAILURE, readiness timeout), the instance is deleted best-effort
    without masking the original error (``delete_on_failure``). ``on_kill`` deletes an instance this try
    created; deferred on Airflow 3.3+, the trigger's ``on_kill`` does.

    The instance name goes to XCom (key ``instance_name``) the moment the instance exists, before any wait.

    :param instance_name: explicit name (templated). Default: the deterministic, expiring, owner-prefixed name.
    :param gpu: GPU request in the form ``"L40S:1"`` (name and count).
    :param instance_types: explicit instance types, tried in order (``brev create --type a,b,c``).
    :param min_vram: minimum VRAM per GPU in GB.
    :param cloud_cred_id: placement id, passed only where the installed CLI accepts it.
    :param workspace_group_id: placement id, passed only where the installed CLI accepts it.
    :param wait_for_ready: wait until the instance passes the layered readiness check.
    :param ready_timeout: seconds to wait for readiness (default 20 minutes, sized for cold starts).
    :param require_docker: readiness also requires ``docker info`` (container work).
    :param poll_interval: seconds between readiness checks.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param delete_on_failure: delete the instance when this task fails after it exists (default on).
    :param max_lifetime: how long after the run the janitor may consider the instance expired.
    :param name_prefix: owner prefix of derived names (default: connection extra ``name_prefix`` or ``afbrev``).
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    """

    template_fields = brev_template_fields(
        "instance_name", "gpu", "instance_types", "min_vram", "cloud_cred_id", "workspace_group_id", "ready_timeout"
    )

    def __init__(
        self,
        *,
        instance_name: str | None = None,
        gpu: str | None = None,
        instance_types: list[str] | str | None = None,
        min_vram: float | None = None,
        cloud_cred_id: str | None = None,
        workspace_group_id: str | None = None,
        wait_for_ready: bool = True,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        require_docker: bool = False,
        poll_interval: float = 1.0,
        deferrable: bool | None = None,
        delete_on_failure: bool = True,
        max_lifetime: timedelta | float = DEFAULT_MAX_LIFETIME,
        name_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.gpu = gpu
        self.instance_types = instance_types
        self.min_vram = min_vram
        self.cloud_cred_id = cloud_cred_id
        self.workspace_group_id = workspace_group_id
        self.wait_for_ready = wait_for_ready
        self.ready_timeout = ready_timeout
        self.require_docker = require_docker
        self.poll_interval = poll_interval
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.delete_on_failure = delete_on_failure
        self.max_lifetime = _as_timedelta(max_lifetime)
        self.name_prefix = name_prefix
        self._created_name: str | None = None
        self._pending_name: str | None = None

    # -- input ---------------------------------------------------------------------------------
    def _instance_types(self) -> list[str] | None:
        if self.instance_types is None or self.instance_types == "":
            return None
        if isinstance(self.instance_types, str):
            return [t.strip() for t in self.instance_types.split(",") if t.strip()]
        return [str(t) for t in self.instance_types]

    def _validate_request(self) -> None:
        """Reject bad input before anything is created or paid for."""
        if self.gpu and self._instance_types():
            raise BrevInvalidInputError(
                "Pass either gpu (e.g. 'L40S:1') or instance_types (e.g. ['g6e.xlarge']), not both."
            )
        if self.gpu:
            parse_gpu_spec(self.gpu)
        if self.min_vram is not None and float(self.min_vram) <= 0:
            raise BrevInvalidInputError("min_vram must be a positive number of GB.")
        if self.max_lifetime <= timedelta(0):
            raise BrevInvalidInputError("max_lifetime must be positive.")
        try:
            if float(self.ready_timeout) <= 0:
                raise ValueError
        except (TypeError, ValueError):
            raise BrevInvalidInputError(
                f"ready_timeout must be a positive number of seconds, got {self.ready_timeout!r}."
            ) from None

    def _resolve_name(self, context: Context) -> tuple[str, bool]:
        """The instance name and whether it is a provider-managed (task-owned) name."""
        if self.instance_name:
            return validate_instance_name(self.instance_name), False
        ti = context["ti"]
        dag_run = context.get("dag_run")
        run_after = getattr(dag_run, "run_after", None) or getattr(dag_run, "logical_date", None)
        now = datetime.now(UTC)
        base = max(run_after, now) if isinstance(run_after, datetime) else now
        name = managed_instance_name(
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=getattr(ti, "map_index", -1) if isinstance(getattr(ti, "map_index", -1), int) else -1,
            expires_at=base + self.max_lifetime,
            prefix=self.name_prefix or self.hook.config.name_prefix,
        )
        return name, True

    def _find_existing(self, name: str, managed: bool) -> BrevInstance | None:
        """The instance a previous try of this task left behind (same name, or same owner prefix+hash)."""
        if not managed:
            return self.hook.get_instance(name)
        wanted = parse_managed_name(name)
        assert wanted is not None
        matches = []
        for instance in self.hook.list_instances():
            parsed = parse_managed_name(instance.name)
            if parsed and (parsed.prefix, parsed.digest) == (wanted.prefix, wanted.digest):
                matches.append(instance)
        # Prefer a live instance over one being deleted or failed.
        matches.sort(key=lambda i: (i.status in (STATUS_DELETING, STATUS_FAILURE), i.name))
        return matches[0] if matches else None

    # -- execution -----------------------------------------------------------------------------
    def execute(self, context: Context) -> str:
        self._validate_request()
        name, managed = self._resolve_name(context)
        hook = self.hook
        existing = self._find_existing(name, managed)
        if existing is not None and existing.status == STATUS_DELETING:
            self.log.info("Instance %s is still being deleted; waiting for its name to be released.", existing.name)
            hook.wait_until_gone(existing.name, timeout=float(self.ready_timeout), poll_interval=self.poll_interval)
            existing = None
        if existing is not None and (existing.status == STATUS_FAILURE or existing.build_status == "CREATE_FAILED"):
            self.log.warning("Instance %s from an earlier try is in %s: replacing it.", existing.name, existing.status)
            hook.delete_instance(
                existing.name, wait=True, timeout=float(self.ready_timeout), poll_interval=self.poll_interval
            )
            existing = None

        created = False
        if existing is not None:
            name = existing.name
            self.log.info("Adopting existing instance %s (%s) instead of creating a second one.", name, existing.status)
            instance = existing
        else:
            self._pending_name = name
            try:
                instance = hook.create_instance(
                    name,
                    gpu=self.gpu or None,
                    instance_types=self._instance_types(),
                    min_vram=float(self.min_vram) if self.min_vram else None,
                    cloud_cred_id=self.cloud_cred_id or None,
                    workspace_group_id=self.workspace_group_id or None,
                )
            except (BrevInstanceFailedError, BrevTimeoutError) as err:
                self._cleanup_after_failure(name, responsible=True, reason=str(err))
                raise
            finally:
                self._pending_name = None
            created = True
            self._created_name = name

        ti = context["ti"]
        ti.xcom_push(key=XCOM_INSTANCE_NAME, value=name)
        ti.xcom_push(key=XCOM_INSTANCE, value=instance.to_dict())
        if not self.wait_for_ready:
            return name

        responsible = created or managed
        if self.deferrable:
            self.defer(
                trigger=BrevInstanceReadyTrigger(
                    instance_name=name,
                    brev_conn_id=self.brev_conn_id,
                    deadline=time.time() + float(self.ready_timeout),
                    poll_interval=float(self.poll_interval),
                    require_docker=self.require_docker,
                    delete_on_kill=self.delete_on_failure and responsible,
                    created=responsible,
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=float(self.ready_timeout) + 60),
            )
        try:
            hook.wait_until_ready(
                name,
                float(self.ready_timeout),
                poll_interval=float(self.poll_interval),
                require_docker=self.require_docker,
            )
        except Exception as err:
            self._cleanup_after_failure(name, responsible=responsible, reason=str(err))
            raise
        return name

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> str:
        event = validate_event(event, "instance_name")
        name = event["instance_name"]
        if event["status"] == EVENT_SUCCESS:
            self.log.info("%s", event["message"])
            return name
        self._cleanup_after_failure(name, responsible=bool(event.get("created")), reason=event["message"])
        if event["status"] == EVENT_TIMEOUT:
            raise BrevTimeoutError(event["message"])
        raise BrevInstanceFailedError(event["message"])

    def _cleanup_after_failure(self, name: str, *, responsible: bool, reason: str) -> None:
        """Best-effort delete after a post-create failure; never masks the original error."""
        if not (self.delete_on_failure and responsible):
            self.log.warning("Not deleting instance %s after the failure (delete_on_failure off or not ours).", name)
            return
        self.log.warning("Deleting instance %s because this setup task failed after creating it: %s", name, reason)
        try:
            self.hook.delete_instance(name)
        except Exception:
            self.log.exception("Could not delete instance %s; the janitor will remove it once it expires.", name)

    def on_kill(self) -> None:
        name = self._created_name or self._pending_name
        if not name or not self.delete_on_failure:
            return
        self.log.warning("Task killed: deleting instance %s created by this try.", name)
        with contextlib.suppress(Exception):
            self.hook.run_cli(["delete", name], timeout=ON_KILL_TIMEOUT, retry=False)


class BrevDeleteInstanceOperator(BrevBaseOperator):
    """Delete a Brev instance. Idempotent: an instance that is already gone counts as success.

    Meant as the teardown of the create operator, so it runs even when the work failed::

        delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
        create >> work >> delete.as_teardown(setups=create)

    Transient Brev errors are retried inside the task (the hook's backoff); deletion is asynchronous on
    Brev's side, so ``wait_for_deletion`` also waits until the instance has disappeared.

    :param instance_name: the instance to delete (templated; usually ``create.output``).
    :param wait_for_deletion: wait until ``brev ls`` no longer lists it.
    :param deletion_timeout: seconds to wait for the deletion.
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    """

    template_fields = brev_template_fields("instance_name")

    def __init__(
        self,
        *,
        instance_name: str,
        wait_for_deletion: bool = False,
        deletion_timeout: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.wait_for_deletion = wait_for_deletion
        self.deletion_timeout = deletion_timeout

    def execute(self, context: Context) -> dict[str, Any]:
        name = validate_instance_name(self.instance_name)
        try:
            deleted = self.hook.delete_instance(name, wait=self.wait_for_deletion, timeout=float(self.deletion_timeout))
        except BrevError:
            self.log.error("Deleting %s failed; retry the task or delete it with `brev delete %s`.", name, name)
            raise
        return {"instance_name": name, "deleted": deleted}
