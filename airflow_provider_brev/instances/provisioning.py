"""Create-or-adopt, wait for and clean up one Brev instance on behalf of a task.

Shared by :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator` and the ephemeral mode of
:class:`~airflow_provider_brev.operators.brev.BrevExecOperator`, so the lifecycle rules live in one place:

* a deterministic, owner-prefixed, expiring name derived from dag id, run id, task id and map index (never the
  try number) is the provider's by construction, so a retry or a cleared task *adopts* the instance instead of
  creating a second one;
* an explicit name is the task's only if it *recorded* creating it: right after ``brev create`` the instance id
  goes to the task state store (Airflow 3.3+, shared by every try of the task), and a retry adopts the existing
  instance only when that record names its id. Anything else is a person's (or another run's) instance:
  :class:`~airflow_provider_brev.exceptions.BrevInstanceNotOwnedError` before anything is created or deleted,
  unless ``adopt_existing`` asks to use it -- then it is never deleted by the provider;
* an instance still DELETING is waited out, a FAILURE one of this task is replaced;
* the request (:class:`~airflow_provider_brev.core.instances.request.InstanceRequest`) comes checked and frozen
  (:func:`~airflow_provider_brev.core.validation.checked_instance_request`): bad input was rejected before anything
  is created;
* after a failure past creation, an instance this task owns is deleted best-effort without masking the original
  error; a kill deletes what this try created or started (:meth:`InstanceProvisioner.release_on_kill`).

:class:`~airflow_provider_brev.core.instances.records.InstanceRecord` is what the create task pushes to XCom (key
``brev_instance``): name, id, ownership and the spec to re-create it; :func:`read_instance_record` reads it back in a
later task (both are re-exported here: the record lives in :mod:`airflow_provider_brev.core.instances.records`, the
reading in :mod:`airflow_provider_brev.instances.records`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.bill import disk_cost
from airflow_provider_brev.core.instances.records import InstanceRecord
from airflow_provider_brev.core.instances.warm_pool import STATE_STOPPED, WarmRequest
from airflow_provider_brev.core.protocol.names import managed_instance_name, parse_managed_name, validate_instance_name
from airflow_provider_brev.core.protocol.output import STATUS_DELETING, STATUS_FAILURE, BrevInstance
from airflow_provider_brev.cost.pricing import price_of
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLINotFoundError,
    BrevCostCapError,
    BrevDuplicateNameError,
    BrevError,
    BrevInstanceFailedError,
    BrevInstanceNotOwnedError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevTaskKilledError,
)
from airflow_provider_brev.instances.records import (  # the records' public names, for DAG code that reads them
    STATE_STORE_INSTANCE_KEY,
    XCOM_INSTANCE_RECORD,
    InstanceRecords,
    read_instance_record,
    read_instance_records,
)
from airflow_provider_brev.instances.release import delete_after_failure, release_on_kill, replace_failed
from airflow_provider_brev.instances.warm_pool import ReuseRegistry, claim_warm, record_in_use, task_identity

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

    from airflow_provider_brev.core.instances.request import InstanceRequest
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: Failures of ``create_instance`` that happen before Brev creates anything (no cleanup needed).
_NOTHING_CREATED = (
    BrevInvalidInputError,
    BrevNoMatchingTypeError,
    BrevTaskKilledError,
    BrevDuplicateNameError,
    BrevNoCapacityError,
    BrevAuthError,
    BrevCLINotFoundError,
    BrevCostCapError,
)


@dataclass
class ProvisionedInstance:
    """The outcome of :meth:`InstanceProvisioner.ensure`."""

    name: str
    instance: BrevInstance
    created: bool
    managed: bool
    #: an earlier try of this task recorded creating it (explicit names)
    recorded: bool = False
    #: the price per hour of its type (``brev search``), when known
    price_per_hour: float | None = None
    #: when ``brev create`` was called for it (epoch seconds), when known
    created_at: float | None = None
    #: a warm instance this task started: its disk time while it was stopped
    #: (:func:`~airflow_provider_brev.core.bill.disk_cost`), billed to its reuse key
    stopped: dict[str, Any] | None = None

    @property
    def owned(self) -> bool:
        """Whether this task may delete it: created now, a provider-managed name, or recorded as created earlier."""
        return self.created or self.managed or self.recorded


class InstanceProvisioner:
    """Lifecycle rules for one task's instance.

    :param hook: the task's :class:`~airflow_provider_brev.hooks.brev.BrevHook`.
    :param log: the task's logger.
    :param request: the wanted instance.
    :param poll_interval: seconds between status checks while waiting.
    :param cancelled: returns ``True`` once the task was killed: nothing more is created, and a wait ends.
    :param delete_on_failure: delete an instance whose creation failed after it reached Brev (``False`` keeps it
        for inspection).
    """

    def __init__(
        self,
        hook: BrevHook,
        log: logging.Logger | Any,
        request: InstanceRequest,
        *,
        poll_interval: float = 1.0,
        cancelled: Callable[[], bool] | None = None,
        delete_on_failure: bool = True,
    ):
        self.hook = hook
        self.delete_on_failure = delete_on_failure
        self.log = log
        self.request = request
        self.poll_interval = poll_interval
        self.cancelled = cancelled
        #: The instance this provisioner created, as listed right after ``brev create`` returned (for ``on_kill``).
        self.created: BrevInstance | None = None
        #: Provider-managed name being created right now (for ``on_kill`` while ``brev create`` runs). An explicit
        #: name is never set here: until ``brev create`` returns, the task cannot tell its instance from one another
        #: run created under the same name meanwhile.
        self.pending_name: str | None = None
        #: The stopped instance whose ``brev start`` runs right now (for ``on_kill``, which leaves it alone: until
        #: the start returns, the task cannot tell its own start from another run's that won).
        self.starting: BrevInstance | None = None
        #: The stopped instance this provisioner started for warm reuse (from its successful ``brev start`` on: a
        #: kill then releases it as it would one this task created).
        self.claimed: BrevInstance | None = None
        self._stopped: dict[str, Any] | None = None  # the disk time of the stopped instance being started

    def resolve_name(self, memory: TaskMemory) -> tuple[str, bool]:
        """The instance name and whether it is a provider-managed (task-owned) name."""
        if self.request.instance_name:
            return validate_instance_name(self.request.instance_name), False
        ti = memory.ti
        dag_run = memory.context.get("dag_run")
        run_after = getattr(dag_run, "run_after", None) or getattr(dag_run, "logical_date", None)
        now = datetime.now(UTC)
        base = max(run_after, now) if isinstance(run_after, datetime) else now
        map_index = getattr(ti, "map_index", -1)
        name = managed_instance_name(
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=map_index if isinstance(map_index, int) else -1,
            expires_at=base + self.request.max_lifetime,
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

    # -- ownership of explicit names ---------------------------------------------------------
    def record(self, provisioned: ProvisionedInstance) -> InstanceRecord:
        """The :class:`InstanceRecord` of ``provisioned`` (what the create task pushes to XCom)."""
        spec = {
            **self.request.spec(),
            "brev_conn_id": self.hook.brev_conn_id,
            "instance_type": provisioned.instance.instance_type or None,
        }
        owned = provisioned.owned
        return InstanceRecord(
            provisioned.name,
            provisioned.instance.id,
            owned=owned,
            adopted=not owned,
            spec=spec,
            price_per_hour=provisioned.price_per_hour,
            created_at=provisioned.created_at,
        )

    def priced(self, memory: TaskMemory, provisioned: ProvisionedInstance) -> ProvisionedInstance:
        """``provisioned`` with its price and creation time: this try's, else an earlier try's record of the same
        instance, else the price ``brev search`` lists for its type (the creation time then stays unknown)."""
        stored = InstanceRecords(memory).stored()
        earlier = stored if stored is not None and stored.id == provisioned.instance.id else None
        price = provisioned.price_per_hour
        if price is None and earlier is not None:
            price = earlier.price_per_hour
        if price is None:
            price = price_of(self.hook, provisioned.instance.instance_type)
        created_at = provisioned.created_at or (earlier.created_at if earlier is not None else None)
        return replace(provisioned, price_per_hour=price, created_at=created_at)

    def recorded_creation(self, memory: TaskMemory, instance: BrevInstance) -> bool:
        """Whether an earlier try of this task recorded creating exactly this instance (same Brev id)."""
        stored = InstanceRecords(memory).stored()
        return bool(stored and stored.owned and stored.id and (stored.name, stored.id) == (instance.name, instance.id))

    def remember_creation(self, memory: TaskMemory, provisioned: ProvisionedInstance) -> None:
        """Record in the task state store that this task created the instance (read by its retries)."""
        if memory.has_store:
            InstanceRecords(memory).record(self.record(provisioned), alone=True)

    def _remember_listed(self, memory: TaskMemory, name: str) -> None:
        """Record the instance ``brev ls`` lists under ``name`` as created by this task (after a failed create)."""
        if not memory.has_store:
            return
        try:
            instance = self.hook.get_instance(name)
        except Exception:
            self.log.warning("Could not list instance %s to record it.", name, exc_info=True)
            return
        if instance is not None:
            self.remember_creation(memory, ProvisionedInstance(name, instance, created=True, managed=False))

    def not_owned_error(self, memory: TaskMemory, name: str, status: str | None) -> BrevInstanceNotOwnedError:
        state = f" ({status})" if status else ""
        hint = (
            ""
            if memory.has_store
            else " (Airflow before 3.3 has no task state store, so a retry cannot recognise an instance its earlier"
            " try created: omit instance_name for a provider-managed name if the task retries.)"
        )
        return BrevInstanceNotOwnedError(
            f"Instance {name!r}{state} exists and was not created by this task; pass adopt_existing=True to use it "
            f"(it will then never be deleted by the provider), or choose another name.{hint}"
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def ensure(self, memory: TaskMemory, *, wait_timeout: float) -> ProvisionedInstance:
        """Adopt this task's healthy instance, or create one (waiting out DELETING, replacing its FAILURE one).

        An existing instance under an explicit name that this task did not record creating raises
        :class:`~airflow_provider_brev.exceptions.BrevInstanceNotOwnedError` before anything is created or deleted,
        unless ``adopt_existing`` is set: then it is used and never deleted.
        """
        if self.request.reuse_key:
            warm = self._warm(memory)
            if warm is not None:
                return warm
        name, managed = self.resolve_name(memory)
        existing = self.find_existing(name, managed)
        recorded = False
        if existing is not None and not managed:
            recorded = self.recorded_creation(memory, existing)
            if not recorded and not self.request.adopt_existing:
                raise self.not_owned_error(memory, name, existing.status)
        ours = managed or recorded
        if existing is not None and existing.status == STATUS_DELETING:
            self.log.info("Instance %s is still being deleted; waiting for its name to be released.", existing.name)
            self.hook.wait_until_gone(existing.name, timeout=wait_timeout, poll_interval=self.poll_interval)
            existing = None
        if existing is not None and (existing.status == STATUS_FAILURE or existing.build_status == "CREATE_FAILED"):
            if not ours:
                raise BrevInstanceFailedError(
                    f"Instance {name!r} is in {existing.status} and was not created by this task, so the provider "
                    "leaves it as it is: delete it yourself or choose another name."
                )
            replace_failed(self.hook, self.log, existing, timeout=wait_timeout, poll_interval=self.poll_interval)
            existing = None
        if existing is not None:
            if ours:
                self.log.info(
                    "Adopting existing instance %s (%s) instead of creating a second one.",
                    existing.name,
                    existing.status,
                )
            else:
                self.log.info(
                    "Using existing instance %s (%s) as asked (adopt_existing=True): it was not created by this task,"
                    " so the provider will never delete it.",
                    existing.name,
                    existing.status,
                )
            adopted = ProvisionedInstance(existing.name, existing, created=False, managed=managed, recorded=recorded)
            return self.priced(memory, adopted)
        created_at = time.time()
        instance = self._create(memory, name, managed)
        provisioned = ProvisionedInstance(
            name,
            instance,
            created=True,
            managed=managed,
            price_per_hour=self.hook.known_prices.get(instance.instance_type),
            created_at=created_at,
        )
        if not managed:
            self.remember_creation(memory, provisioned)
        self._record_reuse(memory, provisioned)
        return provisioned

    # -- warm reuse ---------------------------------------------------------------------------------
    def _warm(self, memory: TaskMemory) -> ProvisionedInstance | None:
        """The stopped instance recorded under the reuse key, started (or the one an earlier try started), or
        ``None`` (:func:`~airflow_provider_brev.instances.warm_pool.claim_warm`)."""
        key = self.request.reuse_key
        assert key is not None
        self._stop_if_cancelled(f"starting a stopped instance for reuse key {key!r}")
        wanted = self.warm_request()
        started_at = time.time()
        instance = claim_warm(
            self.hook,
            self.log,
            ReuseRegistry(self.log),
            key,
            task_identity(memory.ti),
            prefix=self.request.name_prefix or self.hook.config.name_prefix,
            request=wanted,
            on_claim=self._claiming,
            cancelled=self.cancelled,
            poll_interval=self.poll_interval,
        )
        self._stop_if_cancelled(f"using a stopped instance for reuse key {key!r}")
        if instance is None:
            self.log.info("Reuse key %r: no stopped instance to start; creating one.", key)
            return None
        warm = ProvisionedInstance(instance.name, instance, created=False, managed=False, recorded=True)
        stopped = self._stopped if self.claimed is not None and self.claimed.id == instance.id else None
        if stopped is not None:  # its billed time starts at this start request
            started_at = float(stopped["started_at"])
        warm = self.priced(memory, replace(warm, created_at=started_at, stopped=stopped))
        self._record_reuse(memory, warm)
        return warm

    def warm_request(self) -> WarmRequest:
        """The request a warm candidate must satisfy: the types a create would choose from (``gpu`` resolved through
        ``brev search``, or ``instance_types``) and the same price cap. Raises as the create would -- an unknown
        GPU or type, no type within the cap -- before anything is started or created."""
        request = self.request
        types = self.hook.resolve_instance_types(
            gpu=request.gpu or None,
            instance_types=request.types,
            min_vram=request.min_vram,
        )
        cap = request.price_cap()
        prices = dict(self.hook.known_prices)
        if cap is not None:
            cap.admit(types, prices)  # none within the cap: the create path's own refusal, before any start
        return WarmRequest(tuple(types), prices, cap)

    def _claiming(self, instance: BrevInstance | None, requested_at: float | None) -> None:
        """``claim_warm``'s ``on_claim``: a start in flight (``requested_at`` ``None``), one that went through, or
        one that failed (``instance`` ``None``)."""
        self._stopped = None
        if instance is None or requested_at is None:
            self.starting, self.claimed = instance, None
            return
        self.starting, self.claimed = None, instance
        entry = ReuseRegistry(self.log).find(instance.id) if instance.id else None
        if entry is not None and entry.state == STATE_STOPPED and entry.since:
            self._stopped = disk_cost(
                reuse_key=entry.key,
                instance_name=entry.name,
                stopped_at=entry.since,
                started_at=requested_at,
                disk_price_per_hour=entry.disk_price_per_hour,
            )

    def _record_reuse(self, memory: TaskMemory, provisioned: ProvisionedInstance) -> None:
        """Record the instance under the reuse key as in use by this task (the teardown's stop finds it there)."""
        key = self.request.reuse_key
        if not key or not provisioned.owned or not provisioned.instance.id:
            return
        record_in_use(
            ReuseRegistry(self.log),
            key,
            provisioned.instance,
            task_identity(memory.ti),
            max_idle=self.request.max_idle.total_seconds(),
            max_lifetime=self.request.max_lifetime.total_seconds(),
            price_per_hour=provisioned.price_per_hour,
            created_at=provisioned.created_at,
            conn_id=self.hook.brev_conn_id or "",
        )

    def _create(self, memory: TaskMemory, name: str, managed: bool) -> BrevInstance:
        request = self.request
        self._stop_if_cancelled(f"creating instance {name}")
        self.pending_name = name if managed else None
        try:
            instance = self.hook.create_instance(
                name,
                gpu=request.gpu or None,
                instance_types=request.types,
                min_vram=request.min_vram,
                cloud_cred_id=request.cloud_cred_id or None,
                workspace_group_id=request.workspace_group_id or None,
                price_cap=request.price_cap(),
            )
        except BrevDuplicateNameError as err:
            if managed:
                raise
            # Another run (or a person) created the name between our check and our create: theirs, not ours.
            existing = self.hook.get_instance(name)
            raise self.not_owned_error(memory, name, existing.status if existing else None) from err
        except BrevError as err:
            # The request may have reached Brev although the call failed afterwards (FAILURE, a 5xx after the POST,
            # the status read failing): the name did not exist before, so an instance of that name is ours, and a
            # failed setup gets no teardown. Errors raised before anything is created need no cleanup.
            if not isinstance(err, _NOTHING_CREATED):
                if not managed:
                    self._remember_listed(memory, name)  # a retry then recognises it (being deleted, or kept)
                if self.delete_on_failure:
                    self.cleanup_after_failure(name, owned=True, reason=str(err))
                else:
                    self.log.warning(
                        "Keeping instance %s after its creation failed, as delete_on_failure=False asks "
                        "(it bills until it is deleted).",
                        name,
                    )
            raise
        finally:
            self.pending_name = None
        self.created = instance
        return instance

    def _stop_if_cancelled(self, what: str) -> None:
        if self.cancelled is not None and self.cancelled():
            raise BrevTaskKilledError(f"The task was killed: not {what}.")

    def wait_ready(
        self, provisioned: ProvisionedInstance, *, timeout: float, require_docker: bool, delete_on_failure: bool
    ) -> None:
        """Wait (in this process) until the instance is ready; delete it on failure if allowed and owned. A kill
        (``cancelled``) ends the wait at the next check."""
        try:
            self.hook.wait_until_ready(
                provisioned.name,
                timeout,
                poll_interval=self.poll_interval,
                require_docker=require_docker,
                should_stop=self.cancelled,
            )
        except Exception as err:
            if delete_on_failure:
                self.cleanup_after_failure(
                    provisioned.name, owned=provisioned.owned, reason=str(err), instance_id=provisioned.instance.id
                )
            raise

    def release_on_kill(self) -> None:
        """The task was killed: delete the instance this provisioner created (by its id), is creating under a
        provider-managed name, or started from the warm pool (by its id, once its ``brev start`` went through: a
        kill cannot wait for a stop and its record); nothing else. One fast call, never raises. A kill while that
        start runs leaves the instance as it is: the start may be another run's that won; if it was this try's,
        the instance runs under a record that says stopped, and the janitor stops it."""
        created, claimed, pending = self.created, self.claimed, self.pending_name
        if created is not None:
            self.log.warning("Task killed: deleting instance %s created by this try.", created.name)
            release_on_kill(self.hook, created.name, created.id or None)
        elif claimed is not None:
            self.log.warning("Task killed: deleting instance %s, which this try started for warm reuse.", claimed.name)
            release_on_kill(self.hook, claimed.name, claimed.id or None)
        elif pending:
            self.log.warning("Task killed: deleting instance %s created by this try.", pending)
            release_on_kill(self.hook, pending, None)
        else:
            self.leave_start_in_flight()

    def leave_start_in_flight(self) -> None:
        """The task was killed while a warm ``brev start`` ran: say that the instance is left as it is."""
        if self.starting is not None:
            self.log.warning(
                "Task killed while `brev start` of %s (id %s) ran: leaving it as it is (another run may have started "
                "it first); if this try's start went through, the janitor stops it.",
                *(self.starting.name, self.starting.id),
            )

    def cleanup_after_failure(self, name: str, *, owned: bool, reason: str, instance_id: str | None = None) -> None:
        """Best-effort delete after a post-create failure
        (:func:`~airflow_provider_brev.instances.release.delete_after_failure`); never masks the original error."""
        delete_after_failure(self.hook, self.log, name, owned=owned, reason=reason, instance_id=instance_id)


def record_ready(memory: TaskMemory) -> None:
    """The task's instance is ready: its record says when (a later step prices its own time from then on)."""
    records = InstanceRecords(memory)
    record = records.own()
    if record is not None:
        records.tell(replace(record, ready_at=time.time()))


__all__ = [
    "STATE_STORE_INSTANCE_KEY",
    "XCOM_INSTANCE_RECORD",
    "InstanceProvisioner",
    "InstanceRecord",
    "ProvisionedInstance",
    "read_instance_record",
    "read_instance_records",
    "record_ready",
]
