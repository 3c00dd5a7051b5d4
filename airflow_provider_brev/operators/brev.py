"""Operators for the lifecycle of NVIDIA Brev instances; :class:`BrevExecOperator` is re-exported from
:mod:`airflow_provider_brev.operators.exec` so ``from airflow_provider_brev.operators.brev import BrevExecOperator``
keeps working."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import conf, default_deferrable, deferral_settle_seconds
from airflow_provider_brev.core.cost import lifetime_cost, money, unset_cap_warnings
from airflow_provider_brev.core.instances.warm_pool import DEFAULT_MAX_IDLE
from airflow_provider_brev.core.protocol.names import DEFAULT_MAX_LIFETIME
from airflow_provider_brev.core.validation import instance_name
from airflow_provider_brev.core.values import bool_value, conn_id, duration_seconds, optional
from airflow_provider_brev.cost.ledger import CostLedger
from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.exceptions import BrevInstanceFailedError, BrevTimeoutError
from airflow_provider_brev.instances.provisioning import (
    InstanceProvisioner,
    InstanceRequest,
    ProvisionedInstance,
)
from airflow_provider_brev.instances.records import XCOM_INSTANCE, XCOM_INSTANCE_NAME, InstanceRecords
from airflow_provider_brev.instances.release import (
    RELEASE_DELETE,
    RELEASE_STOP,
    Reuse,
    delete_named,
    release_on_kill,
    release_policy,
    release_recorded,
)
from airflow_provider_brev.instances.warm_pool import next_run_at
from airflow_provider_brev.jobs.handle import XCOM_JOB
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.sensors.brev import DEFAULT_READY_TIMEOUT
from airflow_provider_brev.utils.events import EVENT_SUCCESS, EVENT_TIMEOUT, raise_for_error_event, validate_event
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_brev.operators.exec import BrevExecOperator


class BrevCreateInstanceOperator(BrevBaseOperator):
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

    :param instance_name: explicit name (templated). Default: the deterministic, expiring, owner-prefixed name.
    :param adopt_existing: use an instance that already exists under ``instance_name`` although this task did
        not create it (it is then never deleted by the provider). Default: fail instead.
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
    :param max_lifetime: how long after the run the janitor may consider the instance expired (default 24 hours).
    :param name_prefix: owner prefix of derived names (default: connection extra ``name_prefix`` or ``afbrev``).
    :param max_price_per_hour: the highest price (dollars per hour, ``brev search``) of the instance to create.
    :param reuse_key: warm reuse across DAG runs (templated): first look for a STOPPED instance this provider created
        and recorded under this key (identity by id), ``brev start`` it, wait for readiness as usual and return its
        name -- its image cache and synced inputs are still there; otherwise create as usual and record the
        instance under the key. A teardown with ``release="stop"`` then stops it instead of deleting it
        (:class:`BrevDeleteInstanceOperator`). Two runs never share an instance: only one ``brev start`` of it
        succeeds, the other run creates a fresh one. Each instance's record is the Airflow Variable
        ``brev_warm_instance.<instance id>`` (:mod:`airflow_provider_brev.instances.warm_pool`), and only a record
        that proves the provider created the instance is ever acted on (docs/howto/warm-reuse.md).
    :param max_idle: how long the instance may stay stopped before the janitor
        (:class:`~airflow_provider_brev.operators.janitor.BrevSweepInstancesOperator`) deletes it (``timedelta`` or
        seconds; default 24 h); also the expected idle time of the stop-or-delete break-even when the DAG has no
        schedule.
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    """

    template_fields = brev_template_fields(
        "reuse_key",
        "max_idle",
        "max_price_per_hour",
        "instance_name",
        "gpu",
        "instance_types",
        "min_vram",
        "cloud_cred_id",
        "workspace_group_id",
        "wait_for_ready",
        "ready_timeout",
        "require_docker",
        "poll_interval",
        "deferrable",
        "delete_on_failure",
        "max_lifetime",
        "name_prefix",
        "adopt_existing",
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
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        delete_on_failure: bool = True,
        max_lifetime: timedelta | float = DEFAULT_MAX_LIFETIME,
        name_prefix: str | None = None,
        adopt_existing: bool = False,
        max_price_per_hour: float | str | None = None,
        reuse_key: str | None = None,
        max_idle: timedelta | float | str = DEFAULT_MAX_IDLE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.reuse_key = reuse_key
        self.max_idle = max_idle
        self.adopt_existing = adopt_existing
        self.max_price_per_hour = max_price_per_hour
        self.gpu = gpu
        self.instance_types = instance_types
        self.min_vram = min_vram
        self.cloud_cred_id = cloud_cred_id
        self.workspace_group_id = workspace_group_id
        self.wait_for_ready = wait_for_ready
        self.ready_timeout = ready_timeout
        self.require_docker = require_docker
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.delete_on_failure = delete_on_failure
        self.max_lifetime = max_lifetime
        self.name_prefix = name_prefix
        self._provisioner: InstanceProvisioner | None = None

    def _validate(self) -> InstanceRequest:
        """Check every rendered parameter before any ``brev`` call (bad input costs nothing) and normalise them in
        place (numbers from text, booleans from ``"true"``/``"false"``); returns the checked instance request."""
        optional(conn_id, "brev_conn_id", self.brev_conn_id)
        request = InstanceRequest(
            instance_name=self.instance_name,
            gpu=self.gpu,
            instance_types=self.instance_types,
            min_vram=self.min_vram,
            cloud_cred_id=self.cloud_cred_id,
            workspace_group_id=self.workspace_group_id,
            max_lifetime=self.max_lifetime,
            name_prefix=self.name_prefix,
            require_docker=self.require_docker,
            adopt_existing=self.adopt_existing,
            max_price_per_hour=self.max_price_per_hour,
            reuse_key=self.reuse_key,
            max_idle=self.max_idle,
        )
        request.validate()
        self.require_docker, self.adopt_existing = request.require_docker, request.adopt_existing
        self.max_price_per_hour = request.max_price_per_hour
        self.ready_timeout = duration_seconds("ready_timeout", self.ready_timeout)
        self.poll_interval = duration_seconds("poll_interval", self.poll_interval)
        self.wait_for_ready = bool_value("wait_for_ready", self.wait_for_ready, default=True)
        self.deferrable = bool_value("deferrable", self.deferrable, default=default_deferrable())
        self.delete_on_failure = bool_value("delete_on_failure", self.delete_on_failure, default=True)
        return request

    def provisioner(self, request: InstanceRequest) -> InstanceProvisioner:
        """The lifecycle rules for ``request`` (from :meth:`_validate`), kept for ``on_kill``."""
        self._provisioner = InstanceProvisioner(
            self.hook, self.log, request, poll_interval=self.poll_interval, delete_on_failure=self.delete_on_failure
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
        provisioner = self.provisioner(self._validate())
        timeout = self.ready_timeout
        memory = TaskMemory(context, self.log)
        provisioned = provisioner.ensure(memory, wait_timeout=timeout)
        name = provisioned.name
        records = InstanceRecords(memory)
        records.tell_instance(name, provisioned.instance.to_dict())
        records.tell(provisioner.record(provisioned))
        meter = self._boot_meter(memory, provisioned)
        try:
            return self._wait(memory, provisioner, provisioned, meter)
        finally:
            if not meter.reported and not self._deferring:
                meter.report()

    #: the try defers (its cost is reported when it resumes)
    _deferring = False

    def _boot_meter(self, memory: TaskMemory, provisioned: ProvisionedInstance) -> CostMeter:
        """The create task's cost clock: ``boot`` from ``brev create`` (or from now, for an adopted instance)."""
        meter = CostMeter(memory, self.log)
        meter.begin(at=provisioned.created_at)
        meter.start("boot", at=meter.started_at)
        meter.bill_on(provisioned.name, provisioned.instance.instance_type, provisioned.price_per_hour)
        return meter

    def _ready(self, memory: TaskMemory, meter: CostMeter) -> None:
        """The instance is ready: its record says when (a later step prices its own time from then on)."""
        records = InstanceRecords(memory)
        record = records.own()
        if record is not None:
            records.tell(replace(record, ready_at=time.time()))
        meter.report()

    def _wait(
        self, memory: TaskMemory, provisioner: InstanceProvisioner, provisioned: ProvisionedInstance, meter: CostMeter
    ) -> str:
        name, timeout = provisioned.name, self.ready_timeout
        if not self.wait_for_ready:
            return name
        if self.deferrable:
            from airflow_provider_brev.triggers.brev import BrevInstanceReadyTrigger  # triggerer-side code: lazy

            self._deferring = True
            meter.save()
            self.defer(
                trigger=BrevInstanceReadyTrigger(
                    instance_name=name,
                    brev_conn_id=self.brev_conn_id,
                    deadline=time.time() + timeout,
                    poll_interval=self.poll_interval,
                    require_docker=self.require_docker,
                    delete_on_kill=self.delete_on_failure and provisioned.owned,
                    created=provisioned.owned,
                    instance_id=provisioned.instance.id or None,
                    not_before=time.time() + deferral_settle_seconds(),
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=timeout + 60),
            )
        provisioner.wait_ready(
            provisioned, timeout=timeout, require_docker=self.require_docker, delete_on_failure=self.delete_on_failure
        )
        self._ready(memory, meter)
        return name

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> str:
        try:
            return self._complete(context, event)
        finally:
            self.wait_for_kill_cleanup()

    def _complete(self, context: Context, event: dict[str, Any] | None) -> str:
        request = self._validate()  # a resumed task is rendered anew: the same checks and normalisation
        event = validate_event(event, "instance_name")
        name = event["instance_name"]
        memory = TaskMemory(context, self.log)
        meter = CostMeter(memory, self.log)
        if event["status"] == EVENT_SUCCESS:
            self.log.info("%s", event["message"])
            self._ready(memory, meter)
            return name
        meter.report()  # the instance billed its failed boot too
        if self.delete_on_failure:
            self.provisioner(request).cleanup_after_failure(
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
        """Delete the instance this try created (by its id), is creating under a provider-managed name, or started
        from the warm pool (by its id, from its ``brev start`` on: a kill cannot wait for a stop and its record);
        nothing else."""
        provisioner = self._provisioner
        if provisioner is None or not self.delete_on_failure:
            return
        created, pending, claimed = provisioner.created, provisioner.pending_name, provisioner.claimed
        if created is not None:
            self.log.warning("Task killed: deleting instance %s created by this try.", created.name)
            release_on_kill(self.hook, created.name, created.id or None)
        elif claimed is not None:
            self.log.warning("Task killed: deleting instance %s, which this try started for warm reuse.", claimed.name)
            release_on_kill(self.hook, claimed.name, claimed.id or None)
        elif pending:
            self.log.warning("Task killed: deleting instance %s created by this try.", pending)
            release_on_kill(self.hook, pending, None)


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
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    """

    template_fields = brev_template_fields("instance_name", "wait_for_deletion", "deletion_timeout", "release")

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

    def _validate(self) -> str:
        """Check every rendered parameter before any ``brev`` call; returns the instance name."""
        optional(conn_id, "brev_conn_id", self.brev_conn_id)
        name = instance_name("instance_name", self.instance_name)
        self.wait_for_deletion = bool_value("wait_for_deletion", self.wait_for_deletion, default=False)
        self.deletion_timeout = duration_seconds("deletion_timeout", self.deletion_timeout)
        self.release = release_policy(self.release)
        return name

    def execute(self, context: Context) -> dict[str, Any]:
        name = self._validate()
        memory = TaskMemory(context, self.log)
        instances = InstanceRecords(memory)
        creates = self._upstream_create_task_ids()
        created = [record for task_id in creates for record in instances.of(task_id) if record.name == name]
        if created:  # the DAG run created (or adopted) it: release it by a recorded id (re-creations included)
            steps = [t for t in self._upstream_brev_task_ids() if t not in creates]
            records = created + instances.named(name, steps)
            released = release_recorded(
                self.hook,
                self.log,
                name,
                records,
                wait=self.wait_for_deletion,
                timeout=self.deletion_timeout,
                reuse=self._reuse(memory, context, name, records, [*creates, *steps]),
            )
            self._report_lifetime(memory, records, released.instance_id if released.deleted else None)
            if released.left:
                self.log.info("Leaving instance %s: %s.", name, released.left)
            result = {"instance_name": name, "deleted": released.deleted}
            return {**result, "stopped": True} if released.stopped else result
        silent = [task_id for task_id in creates if not instances.of(task_id)]
        if silent:  # it failed before creating anything, e.g. because the name belonged to someone else
            reason = f"its create task ({', '.join(silent)}) recorded no instance it created under that name"
            self.log.info("Leaving instance %s: %s.", name, reason)
            return {"instance_name": name, "deleted": False}
        deleted = delete_named(self.hook, self.log, name, wait=self.wait_for_deletion, timeout=self.deletion_timeout)
        return {"instance_name": name, "deleted": deleted}

    def _reuse(
        self, memory: TaskMemory, context: Context, name: str, records: list[Any], task_ids: list[str]
    ) -> Reuse | None:
        """How to release an instance its create task recorded under a reuse key (``None``: none did): stop or
        delete, with what this run measured of its boot, pulls and staging (XCom ``brev_cost``)."""
        keyed = next((r for r in reversed(records) if r.owned and r.spec.get("reuse_key")), None)
        if keyed is None:
            if self.release == RELEASE_STOP:
                self.log.info("release='stop' for %s: its create task set no reuse_key, so deleting it.", name)
            return None
        phases = {"boot": 0.0, "pull": 0.0, "stage": 0.0}
        for _task_id, cost in CostLedger(memory).costs_of(task_ids):
            if cost.get("instance_name") == name:
                for phase in phases:
                    phases[phase] += float((cost.get("seconds") or {}).get(phase) or 0.0)
        return Reuse(
            key=str(keyed.spec["reuse_key"]),
            stop=self.release == RELEASE_STOP,
            max_idle=float(keyed.spec.get("max_idle") or DEFAULT_MAX_IDLE.total_seconds()),
            boot_seconds=phases["boot"],
            pull_seconds=phases["pull"],
            stage_seconds=phases["stage"],
            next_run_at=next_run_at(context) if self.release == RELEASE_STOP else None,
            price_per_hour=keyed.price_per_hour,
        )

    def _report_lifetime(self, memory: TaskMemory, records: list[Any], instance_id: str | None) -> None:
        """The deleted instance's whole life, ``brev create`` to now, priced (XCom ``brev_lifetime_cost``), when its
        record says when it was created and at what price (no ``brev`` call)."""
        record = next((r for r in reversed(records) if r.id == instance_id and r.created_at is not None), None)
        if record is None or instance_id is None:
            return
        cost = lifetime_cost(
            instance_name=record.name,
            instance_type=str(record.spec.get("instance_type") or ""),
            price_per_hour=record.price_per_hour,
            created_at=float(record.created_at),
            ended_at=time.time(),
        )
        CostLedger(memory).tell_lifetime(cost)
        self.log.info(
            "Instance %s lived %.1f s (brev create to brev delete): %s.",
            *(record.name, cost["total_seconds"], money(cost["total_dollars"])),
        )

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
