"""The Brev instance of one step: acquired, resumed after a deferral, recovered when lost, released.

:class:`StepInstance` is what the Brev compute (:class:`~airflow_provider_brev.steps.brev_compute.BrevInstanceCompute`)
runs its step on; its identity is an :class:`~airflow_provider_brev.core.instances.identity.InstanceRef` (name *and*
id). A step runs either on an instance a create task made (``instance_name``) or on one it creates itself (ephemeral
mode):

* **acquire** -- an explicit instance must be ready, and its id one the DAG run recorded creating under that name
  (:mod:`airflow_provider_brev.core.instances.records`): an instance someone else created under the freed name after
  ours was lost is never used (:class:`~airflow_provider_brev.exceptions.BrevInstanceReplacedError`). An instance no
  record names (one the DAG did not create) is used by name, as asked. An ephemeral instance is created (the create
  operator's idempotent rules), recorded with its id and waited for;
* **recover** -- a lost instance is re-created (:class:`~airflow_provider_brev.instances.recovery.InstanceRecovery`);
  the step then runs on the new one, whose id is recorded;
* **release** -- an ephemeral instance is deleted by its id when the step ends; on a kill, every ephemeral instance
  this try created or is creating is (:func:`~airflow_provider_brev.instances.release.release_on_kill`), and a kill stops
  any creation, wait or recovery still under way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.identity import REPLACED, InstanceRef, identity_verdict, replaced_message
from airflow_provider_brev.core.instances.readiness import STAGE_MISSING
from airflow_provider_brev.core.instances.records import InstanceRecord, recorded_ids
from airflow_provider_brev.core.instances.release import RELEASE_STOP
from airflow_provider_brev.core.protocol.names import validate_instance_name
from airflow_provider_brev.cost.pricing import price_of
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInstanceReplacedError,
)
from airflow_provider_brev.instances.provisioning import InstanceProvisioner
from airflow_provider_brev.instances.records import InstanceRecords
from airflow_provider_brev.instances.recovery import InstanceRecovery
from airflow_provider_brev.instances.release import Reuse, release_created, release_on_kill

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.steps.spec import ComputeSpec
    from airflow_provider_brev.utils.task_memory import TaskMemory


class StepInstance:
    """The Brev instance of one step (see the module docstring).

    :param hook: the step's hook.
    :param log: the step's logger.
    :param spec: the explicit instance or the ephemeral request, and the readiness and recovery settings.
    :param upstream: upstream task ids, nearest first (where records are looked for).
    :param killed: returns ``True`` once the task was killed.
    """

    def __init__(
        self,
        hook: BrevHook,
        log: Any,
        spec: ComputeSpec,
        *,
        upstream: Sequence[str],
        killed: Callable[[], bool],
    ) -> None:
        self.hook = hook
        self.log = log
        self.spec = spec
        self.upstream = list(upstream)
        self.killed = killed
        #: The instance the step runs on now (``None`` before :meth:`acquire`).
        self.current: InstanceRef | None = None
        #: Every ephemeral instance this try created (deleted on a kill).
        self.created: list[InstanceRef] = []
        #: a warm instance this step started: its disk time while stopped (``brev_cost["stopped"]``)
        self.stopped: dict[str, Any] | None = None
        self._provisioner: InstanceProvisioner | None = None
        self._known: set[str] = set()
        self._types: dict[str, str] = {}  # instance id -> type, as listed

    @property
    def ephemeral(self) -> bool:
        return self.spec.ephemeral

    # -- acquire ---------------------------------------------------------------------------------
    def acquire(self, memory: TaskMemory) -> InstanceRef:
        """The instance to run on: the given one (ready, and ours by id, or recovered), or a new ephemeral one."""
        if self.ephemeral:
            return self._create_ephemeral(memory)
        name = validate_instance_name(self.spec.instance_name)
        records = InstanceRecords(memory)
        stored = records.stored()
        if stored is not None:  # a retry: XCom lost what this task recorded, its state store kept it
            records.record(stored)
        self._known = recorded_ids(records.named(name, self.upstream))
        try:
            self.current = self._check_target(name)
        except BrevInstanceReplacedError:
            raise
        except BrevError as err:
            return self.recover(memory, InstanceRef(name), err, launched=False)
        return self.current

    def resume(self, name: str, instance_id: str | None) -> InstanceRef:
        """After a deferral: the instance the trigger followed (its id came back in the event)."""
        self.current = InstanceRef(name, instance_id or "")
        if instance_id:
            self._known.add(instance_id)
            if self.ephemeral:
                self.created.append(self.current)
        return self.current

    def _check_target(self, name: str) -> InstanceRef:
        """The instance must exist, be ready and -- when the DAG run recorded it -- be the same instance (id)."""
        readiness = self.hook.check_readiness(name)
        live = readiness.listed
        if live is not None and identity_verdict(live, self._known) == REPLACED:
            message = replaced_message(name, live, self._known, refused="used")
            raise BrevInstanceReplacedError(f"{message} Nothing was run.")
        if readiness.ready:
            if live is not None:
                self._types[live.id] = live.instance_type
            return InstanceRef(name, live.id if live is not None else "")
        if readiness.stage == STAGE_MISSING:
            raise BrevInstanceNotFoundError(
                f"Instance {name!r} does not exist: create it first (BrevCreateInstanceOperator) or check the name."
            )
        raise BrevInstanceNotReadyError(
            f"Instance {name!r} is not ready ({readiness.message}); wait for it with BrevReadySensor first."
        )

    def _create_ephemeral(self, memory: TaskMemory) -> InstanceRef:
        assert self.spec.request is not None
        provisioner = self._provisioner = InstanceProvisioner(
            self.hook, self.log, self.spec.request, poll_interval=1.0, cancelled=self.killed
        )
        provisioned = provisioner.ensure(memory, wait_timeout=self.spec.ready_timeout)
        ref = self.current = InstanceRef(provisioned.name, provisioned.instance.id)
        self.stopped = provisioned.stopped  # a warm start: the disk time while it was stopped
        self.created.append(ref)
        self._known.add(ref.id)
        self._types[ref.id] = provisioned.instance.instance_type
        records = InstanceRecords(memory)
        records.tell_instance(ref.name)
        records.record(
            InstanceRecord(
                ref.name,
                ref.id,
                owned=True,
                adopted=False,
                spec={"instance_type": provisioned.instance.instance_type or None},
                price_per_hour=provisioned.price_per_hour,
                created_at=provisioned.created_at,
            )
        )
        provisioner.wait_ready(
            provisioned,
            timeout=self.spec.ready_timeout,
            require_docker=self.spec.require_docker,
            delete_on_failure=False,  # release() deletes it
        )
        return ref

    def billing(self, memory: TaskMemory, ref: InstanceRef) -> tuple[str, float | None]:
        """The type and price per hour ``ref`` bills at: from the DAG run's record of it (the create task's, a
        re-creation's, this step's own; without an id: the newest record of the name), else the type ``brev ls``
        listed priced by ``brev search``."""
        for record in reversed(InstanceRecords(memory).named(ref.name, self.upstream)):
            if (record.id == ref.id or not ref.id) and record.price_per_hour is not None:
                instance_type = str(record.spec.get("instance_type") or self._types.get(ref.id) or "")
                return instance_type, record.price_per_hour
        instance_type = self._types.get(ref.id, "")
        return instance_type, price_of(self.hook, instance_type)

    # -- recover ---------------------------------------------------------------------------------
    def recover(
        self, memory: TaskMemory, lost: InstanceRef, error: BaseException, *, launched: bool = True
    ) -> InstanceRef:
        """Re-create ``lost`` if ``error`` means it is gone, else re-raise ``error``; returns the new instance."""
        if self.killed():  # on_kill deleted the instance or killed the job: that loss is not to be repaired
            raise error
        known = self._known | ({lost.id} if lost.id else set())
        spec = self.spec
        recovery = InstanceRecovery(
            self.hook,
            self.log,
            budget=spec.max_recoveries,
            ephemeral=self.ephemeral,
            create_task_id=spec.create_task_id,
            upstream=self.upstream,
            ready_timeout=spec.ready_timeout,
            require_docker=spec.require_docker,
            recreate_ephemeral=lambda: self._create_ephemeral(memory),
            known_ids=known,
            cancelled=self.killed,
        )
        self.current = recovery.recover_if_lost(memory, lost.name, error, launched=launched)
        self._known = known | recovery.known_ids | {self.current.id}
        return self.current

    # -- release ---------------------------------------------------------------------------------
    def release(self) -> None:
        """The step ended (not deferred): delete its ephemeral instance, by id -- or, with a ``reuse_key`` and
        ``release="stop"``, stop it for the next run when the break-even favours it
        (:func:`~airflow_provider_brev.instances.release.release_created`)."""
        if self.ephemeral and self.current is not None:
            release_created(self.hook, self.log, self.current.name, self.current.id or None, self._reuse())

    def _reuse(self) -> Reuse | None:
        """How the ephemeral instance ends when its request has a reuse key (``None``: plain delete). The step's own
        boot, pulls and staging are not known here: the saving is the type's catalog boot time, or what the
        instance's cold run recorded."""
        request = self.spec.request
        if request is None or not request.reuse_key:
            return None
        return Reuse(
            key=request.reuse_key,
            stop=self.spec.release == RELEASE_STOP,
            max_idle=request.max_idle.total_seconds(),
        )

    def release_on_kill(self, also: InstanceRef | None = None) -> list[str]:
        """The task was killed: delete every ephemeral instance this try created, is creating, started from the warm
        pool, or (``also``) an earlier handle named; returns their names. One fast call each, never raises."""
        if not self.ephemeral:
            return []
        refs: list[InstanceRef] = [*self.created, *([self.current] if self.current else []), *([also] if also else [])]
        provisioner = self._provisioner
        if provisioner is not None and provisioner.created is not None:
            refs.append(InstanceRef(provisioner.created.name, provisioner.created.id))
        if provisioner is not None and provisioner.claimed is not None:  # started from the warm pool, by id
            refs.append(InstanceRef(provisioner.claimed.name, provisioner.claimed.id))
        if provisioner is not None:  # a warm start still running: whose start won is unknown
            provisioner.leave_start_in_flight()
        if provisioner is not None and provisioner.pending_name:  # ``brev create`` still runs: by name
            refs.append(InstanceRef(provisioner.pending_name))
        # Newest first: Airflow SIGKILLs a killed task about 5 s after SIGTERM, and the instance being created or
        # used now is the one that bills (a lost one recovery replaced is usually gone already). A pending
        # provider-managed name is ours by construction: by name.
        targets = list(dict.fromkeys(reversed(refs)))
        for ref in targets:
            release_on_kill(self.hook, ref.name, ref.id or None)
        return sorted({ref.name for ref in targets})
