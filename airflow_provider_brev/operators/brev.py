"""Operators for the lifecycle of NVIDIA Brev instances; :class:`BrevExecOperator` is re-exported from
:mod:`airflow_provider_brev.operators.exec` so ``from airflow_provider_brev.operators.brev import BrevExecOperator``
keeps working."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_provider_brev._compat import conf, default_deferrable, deferral_settle_seconds
from airflow_provider_brev.core.cost import unset_cap_warnings
from airflow_provider_brev.core.instances.release import RELEASE_DELETE
from airflow_provider_brev.core.validation import create_spec, delete_spec
from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.cost.report import report_lifetime
from airflow_provider_brev.exceptions import BrevInstanceFailedError, BrevTimeoutError
from airflow_provider_brev.instances.provisioning import InstanceProvisioner, record_ready
from airflow_provider_brev.instances.records import XCOM_INSTANCE, XCOM_INSTANCE_NAME, InstanceRecords
from airflow_provider_brev.instances.release import delete_named, release_recorded, teardown_reuse
from airflow_provider_brev.instances.warm_pool import next_run_at
from airflow_provider_brev.jobs.handle import XCOM_JOB
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.utils.events import EVENT_SUCCESS, EVENT_TIMEOUT, raise_for_error_event, validate_event
from airflow_provider_brev.utils.mixins import InstanceParams, brev_template_fields, parameter_names
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_brev.core.instances.release import DeleteSpec
    from airflow_provider_brev.core.instances.request import CreateSpec
    from airflow_provider_brev.instances.provisioning import ProvisionedInstance
    from airflow_provider_brev.operators.exec import BrevExecOperator

#: The create operator's parameters besides ``brev_conn_id``: every one templated, and read by its ``spec()``.
CREATE_PARAMETERS = (
    "instance_name",
    "cloud_cred_id",
    "workspace_group_id",
    "wait_for_ready",
    "poll_interval",
    "deferrable",
    "delete_on_failure",
    "name_prefix",
    "adopt_existing",
    *parameter_names(InstanceParams),
)
#: The delete operator's parameters besides ``brev_conn_id`` (every one templated).
DELETE_PARAMETERS = ("instance_name", "wait_for_deletion", "deletion_timeout", "release")


class BrevCreateInstanceOperator(InstanceParams, BrevBaseOperator):
    """Create a Brev instance (idempotently), optionally wait until it is usable, and return its name.

    Use it as the setup of a setup/teardown pair so the instance is deleted whatever happens to the work:

    ```python
    create = BrevCreateInstanceOperator(task_id="create", gpu="L40S:1")
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> work >> delete.as_teardown(setups=create)
    ```

    **Idempotent.** Without ``instance_name`` the name is derived from dag id, run id, task id and map index
    (never the try number), carries the owner prefix and an expiry the janitor can read, and a retry or a
    cleared task *adopts* the existing healthy instance instead of creating a second one; it waits out a
    ``DELETING`` one and replaces a ``FAILURE`` one.

    **Never takes what it did not create.** An explicit ``instance_name`` that already exists (any status) and
    that this task did not create fails with :class:`~airflow_provider_brev.exceptions.BrevInstanceNotOwnedError`
    (no retry) before anything is created or deleted -- also when another run creates the name first. A retry
    recognises its own earlier instance from the id the task recorded right after ``brev create`` (the task
    state store, Airflow 3.3+). ``adopt_existing=True`` uses an existing instance instead; it is then never
    deleted by the provider (not by the failure cleanup, ``on_kill`` or the teardown).

    **Cleans up after itself.** A failed setup task gets no teardown, so if anything fails after the
    instance exists inside this task (FAILURE, readiness timeout), the instance is deleted best-effort
    without masking the original error (``delete_on_failure``). ``on_kill`` deletes an instance this try
    created; deferred on Airflow 3.3+, the trigger's ``on_kill`` does.

    The instance name goes to XCom (key ``instance_name``, and the return value) the moment the instance exists,
    before any wait, with its :class:`~airflow_provider_brev.instances.provisioning.InstanceRecord` (key
    ``brev_instance``: name, id, ``owned``, ``adopted`` and the ``spec`` to re-create it; read it with
    :func:`~airflow_provider_brev.instances.provisioning.read_instance_record`), which also carries the type's
    ``price_per_hour`` and when the instance was created and ready: later steps price their own time with it.

    **What it costs.** The create log names the chosen type and its price ("type g6e.xlarge at $2.24/h, cheapest
    of 2"); the task pushes XCom ``brev_cost`` (its ``boot``: ``brev create`` until ready, in seconds and dollars).
    ``max_price_per_hour`` drops candidate types above it; none left fails with
    :class:`~airflow_provider_brev.exceptions.BrevPriceCapError` before ``brev create``.

    **Bad input costs nothing.** Every parameter is templated and checked at the start of ``execute``, before any
    ``brev`` call: numbers and booleans may be rendered text (``"{{ params.ready_timeout }}"``, ``"true"``); a bad
    value fails the task at once, without a retry, with
    :class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` naming the parameter.

    The instance it creates is described by the parameters of
    :class:`~airflow_provider_brev.utils.mixins.InstanceParams` (``gpu``, ``instance_types``, ``min_vram``,
    ``ready_timeout``, ``require_docker``, ``max_lifetime``, ``max_price_per_hour``, ``reuse_key``, ``max_idle``),
    shared with a step's ephemeral instance; its own are:

    :param instance_name: explicit name (templated). Default: the deterministic, expiring, owner-prefixed name.
    :param adopt_existing: use an instance that already exists under ``instance_name`` although this task did
        not create it (it is then never deleted by the provider). Default: fail instead.
    :param cloud_cred_id: placement id, passed only where the installed CLI accepts it.
    :param workspace_group_id: placement id, passed only where the installed CLI accepts it.
    :param wait_for_ready: wait until the instance passes the layered readiness check.
    :param poll_interval: seconds between readiness checks.
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param delete_on_failure: delete the instance when this task fails after it exists (default on).
    :param name_prefix: owner prefix of derived names (default: connection extra ``name_prefix`` or ``afbrev``).
    """

    template_fields = brev_template_fields(*CREATE_PARAMETERS)

    def __init__(
        self,
        *,
        instance_name: str | None = None,
        cloud_cred_id: str | None = None,
        workspace_group_id: str | None = None,
        wait_for_ready: bool = True,
        poll_interval: float = 1.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        delete_on_failure: bool = True,
        name_prefix: str | None = None,
        adopt_existing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.adopt_existing = adopt_existing
        self.cloud_cred_id = cloud_cred_id
        self.workspace_group_id = workspace_group_id
        self.wait_for_ready = wait_for_ready
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.delete_on_failure = delete_on_failure
        self.name_prefix = name_prefix
        self._provisioner: InstanceProvisioner | None = None

    def spec(self) -> CreateSpec:
        """The rendered parameters, checked and frozen before any ``brev`` call (bad input costs nothing); read, never
        changed: a task resumed after a deferral is rendered anew and builds the same spec."""
        rendered = {name: getattr(self, name) for name in ("brev_conn_id", *CREATE_PARAMETERS)}
        return create_spec(rendered, deferrable_default=default_deferrable())

    def provisioner(self, spec: CreateSpec) -> InstanceProvisioner:
        """The lifecycle rules of the instance ``spec`` asks for, kept for ``on_kill``."""
        self._provisioner = InstanceProvisioner(
            self.hook,
            self.log,
            spec.request,
            poll_interval=spec.poll_interval,
            delete_on_failure=spec.delete_on_failure,
            cancelled=lambda: self._killed,
        )
        return self._provisioner

    def execute(self, context: Context) -> str:
        try:
            return self._create(context)
        finally:
            self.wait_for_kill_cleanup()

    def _create(self, context: Context) -> str:
        for warning in unset_cap_warnings({"max_price_per_hour": self.max_price_per_hour}):
            self.log.warning("%s", warning)
        spec = self.spec()
        provisioner = self.provisioner(spec)
        memory = TaskMemory(context, self.log)
        provisioned = provisioner.ensure(memory, wait_timeout=spec.ready_timeout)
        records = InstanceRecords(memory)
        records.tell_instance(provisioned.name, provisioned.instance.to_dict())
        records.tell(provisioner.record(provisioned))
        meter = CostMeter.booting(memory, self.log, created_at=provisioned.created_at)
        meter.bill_on(provisioned.name, provisioned.instance.instance_type, provisioned.price_per_hour)
        if provisioned.stopped is not None:  # a warm start: its disk time while stopped, billed to its reuse key
            meter.note(stopped=provisioned.stopped)
        try:
            if spec.wait_for_ready and spec.deferrable:
                meter.save()
                self._defer_until_ready(spec, provisioned)
            if spec.wait_for_ready:
                provisioner.wait_ready(
                    provisioned,
                    timeout=spec.ready_timeout,
                    require_docker=spec.request.require_docker,
                    delete_on_failure=spec.delete_on_failure,
                )
                record_ready(memory)
            return provisioned.name
        finally:
            if not self._deferring:
                meter.report()

    #: the try defers (its cost is reported when it resumes)
    _deferring = False

    def _defer_until_ready(self, spec: CreateSpec, provisioned: ProvisionedInstance) -> NoReturn:
        from airflow_provider_brev.triggers.brev import BrevInstanceReadyTrigger  # triggerer-side code: lazy

        self._deferring = True
        self.defer(
            trigger=BrevInstanceReadyTrigger(
                instance_name=provisioned.name,
                brev_conn_id=self.brev_conn_id,
                deadline=time.time() + spec.ready_timeout,
                poll_interval=spec.poll_interval,
                require_docker=spec.request.require_docker,
                delete_on_kill=spec.delete_on_failure and provisioned.owned,
                created=provisioned.owned,
                instance_id=provisioned.instance.id or None,
                not_before=time.time() + deferral_settle_seconds(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=spec.ready_timeout + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> str:
        try:
            return self._complete(context, event)
        finally:
            self.wait_for_kill_cleanup()

    def _complete(self, context: Context, event: dict[str, Any] | None) -> str:
        spec = self.spec()  # a resumed task is rendered anew: the same checks
        event = validate_event(event, "instance_name")
        name = event["instance_name"]
        memory = TaskMemory(context, self.log)
        meter = CostMeter(memory, self.log)
        meter.resumed("boot", event.get("ended_at"))  # ready (or failed) there; since then the task was resuming
        if event["status"] == EVENT_SUCCESS:
            self.log.info("%s", event["message"])
            record_ready(memory)
            meter.report()
            return name
        meter.report()  # the instance billed its failed boot too
        if spec.delete_on_failure:
            self.provisioner(spec).cleanup_after_failure(
                name,
                owned=bool(event.get("created")),
                reason=event["message"],
                instance_id=event.get("instance_id") or None,
            )
        raise_for_error_event(event, "Waiting for the instance failed")
        if event["status"] == EVENT_TIMEOUT:
            raise BrevTimeoutError(event["message"])
        raise BrevInstanceFailedError(event["message"])

    def _cleanup_on_kill(self) -> None:
        """What this try created or started (:meth:`~airflow_provider_brev.instances.provisioning.InstanceProvisioner.release_on_kill`),
        unless ``delete_on_failure`` is off."""
        provisioner = self._provisioner
        if provisioner is not None and provisioner.delete_on_failure:
            provisioner.release_on_kill()


class BrevDeleteInstanceOperator(BrevBaseOperator):
    """Delete a Brev instance this DAG run created. Idempotent: an instance that is already gone counts as success.

    Meant as the teardown of the create operator, so it runs even when the work failed:

    ```python
    delete = BrevDeleteInstanceOperator(task_id="delete", instance_name=create.output)
    create >> work >> delete.as_teardown(setups=create)
    ```

    **Deletes only what the DAG run owns, known by its id.** The records upstream tasks pushed (XCom key
    ``brev_instance``: the create task's, and the new ids of instances a step re-created after a loss) decide:

    * a record names this instance and says the DAG run created it (``owned``): the instance ``brev ls`` lists
      under the name is deleted -- by its id -- if that id is one the DAG run recorded. An instance of another id
      is someone else's (ours was lost and someone created a new one under the freed name): it is left alone, with
      a warning naming both ids;
    * the records say it was adopted (``adopt_existing=True``): it is left alone ("leaving instance X: it was
      adopted, not created by this DAG run");
    * no record names it, and an upstream create task recorded nothing (it failed before creating anything, e.g.
      because the name belonged to someone else): it is left alone too.

    With no create task upstream (a standalone delete the user asked for explicitly), or when every upstream
    create task recorded an instance of another name, the instance is deleted by name. The result
    (``{"instance_name", "deleted"}``) says whether a deletion was requested.

    Transient Brev errors are retried inside the task (the hook's backoff); deletion is asynchronous on
    Brev's side, so ``wait_for_deletion`` also waits until the instance has disappeared.

    Every parameter is templated and checked before any ``brev`` call (a bad value fails the task at once, naming
    the parameter).

    **Stop instead of delete** (``release="stop"``, for an instance its create task made with a ``reuse_key``): the
    instance is stopped -- its disk kept, only the disk billed -- when its type can stop (``brev search``'s
    ``stoppable``) and the break-even favours it: the disk's price over the expected idle time (until the DAG's next
    scheduled run, else the create task's ``max_idle``) against the GPU price of the cold start a warm start saves
    (boot -- at least the type's catalog boot time --, image pulls and input staging, as this run's ``brev_cost``
    measured them). Otherwise it is deleted; the log line gives both numbers either way. The result then says
    ``"stopped": True``. Without a reuse key nothing could find the stopped instance again: it is deleted.

    :param instance_name: the instance to delete (templated; usually ``create.output``).
    :param wait_for_deletion: wait until ``brev ls`` no longer lists it.
    :param deletion_timeout: seconds (or a ``timedelta``) to wait for the deletion.
    :param release: ``"delete"`` (default) or ``"stop"`` (see above; templated).
    """

    template_fields = brev_template_fields(*DELETE_PARAMETERS)

    def __init__(
        self,
        *,
        instance_name: str,
        wait_for_deletion: bool = False,
        deletion_timeout: float = 600.0,
        release: str = RELEASE_DELETE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.wait_for_deletion = wait_for_deletion
        self.deletion_timeout = deletion_timeout
        self.release = release

    def spec(self) -> DeleteSpec:
        """The rendered parameters, checked and frozen before any ``brev`` call."""
        return delete_spec({name: getattr(self, name) for name in ("brev_conn_id", *DELETE_PARAMETERS)})

    def execute(self, context: Context) -> dict[str, Any]:
        spec = self.spec()
        name, wait, timeout = spec.instance_name, spec.wait_for_deletion, spec.deletion_timeout
        memory = TaskMemory(context, self.log)
        instances = InstanceRecords(memory)
        creates = self._upstream_create_task_ids()
        created = [record for task_id in creates for record in instances.of(task_id) if record.name == name]
        if created:  # the DAG run created (or adopted) it: release it by a recorded id (re-creations included)
            meter = CostMeter(memory, self.log)  # its time until the delete (or stop) request is billed: idle
            meter.begin()
            steps = [t for t in self._upstream_brev_task_ids() if t not in creates]
            records = created + instances.named(name, steps)
            next_run = next_run_at(context) if spec.stop else None
            reuse = teardown_reuse(
                memory, self.log, name, records, [*creates, *steps], stop=spec.stop, next_run_at=next_run
            )
            released = release_recorded(self.hook, self.log, name, records, wait=wait, timeout=timeout, reuse=reuse)
            if released.requested_at is not None:
                priced = next((r for r in reversed(records) if r.id == released.instance_id), records[-1])
                meter.bill_on(name, str(priced.spec.get("instance_type") or ""), priced.price_per_hour)
                meter.report(until=released.requested_at)
            report_lifetime(
                memory,
                self.log,
                records,
                released.instance_id if released.deleted or released.stopped else None,
                ended_at=released.requested_at,
                stopped=released.stopped,
            )
            if released.left:
                self.log.info("Leaving instance %s: %s.", name, released.left)
            result = {"instance_name": name, "deleted": released.deleted}
            return {**result, "stopped": True} if released.stopped else result
        silent = [task_id for task_id in creates if not instances.of(task_id)]
        if silent:  # it failed before creating anything, e.g. because the name belonged to someone else
            reason = f"its create task ({', '.join(silent)}) recorded no instance it created under that name"
            self.log.info("Leaving instance %s: %s.", name, reason)
            return {"instance_name": name, "deleted": False}
        deleted = delete_named(self.hook, self.log, name, wait=wait, timeout=timeout)
        return {"instance_name": name, "deleted": deleted}

    def _upstream_brev_task_ids(self) -> list[str]:
        """Every upstream task that may have recorded (re-)creating an instance (create tasks, steps)."""
        dag = getattr(self, "dag", None)
        if dag is None:
            return []
        upstream = self.get_flat_relative_ids(upstream=True)
        return sorted(t for t in upstream if isinstance(dag.task_dict.get(t), BrevBaseOperator))

    def _upstream_create_task_ids(self) -> list[str]:
        """The create tasks directly upstream (its setups, ``create.output``); with none, every upstream one."""
        dag = getattr(self, "dag", None)
        if dag is None:
            return []

        def creates(task_ids: set[str]) -> list[str]:
            return sorted(t for t in task_ids if isinstance(dag.task_dict.get(t), BrevCreateInstanceOperator))

        return creates(set(self.upstream_task_ids)) or creates(self.get_flat_relative_ids(upstream=True))


def __getattr__(name: str) -> Any:
    """``BrevExecOperator``, imported from :mod:`airflow_provider_brev.operators.exec` when asked for: a DAG that only
    creates and deletes instances does not import the step engine."""
    if name == "BrevExecOperator":
        from airflow_provider_brev.operators.exec import BrevExecOperator

        return BrevExecOperator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "XCOM_INSTANCE",
    "XCOM_INSTANCE_NAME",
    "XCOM_JOB",
    "BrevCreateInstanceOperator",
    "BrevDeleteInstanceOperator",
    "BrevExecOperator",
]
