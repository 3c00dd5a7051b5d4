"""The instance one step runs on, known by name *and id*: acquired, recovered when lost, released.

Serves :class:`~airflow_provider_brev.operators.exec.BrevExecOperator` and the TAO operators. A step runs either on
an instance a create task made (``instance_name``) or on one it creates itself (ephemeral mode):

* **acquire** -- an explicit instance must be ready, and its id one the DAG run recorded creating under that name
  (:mod:`airflow_provider_brev.utils.instance_records`): an instance someone else created under the freed name after
  ours was lost is never used (:class:`~airflow_provider_brev.exceptions.BrevInstanceReplacedError`). An instance no
  record names (one the DAG did not create) is used by name, as asked. An ephemeral instance is created (the create
  operator's idempotent rules), recorded with its id and waited for;
* **recover** -- a lost instance is re-created (:class:`~airflow_provider_brev.utils.recovery.InstanceRecovery`);
  the step then runs on the new one, whose id is recorded;
* **release** -- an ephemeral instance is deleted by its id when the step ends; on a kill, every ephemeral instance
  this try created or is creating is (:func:`~airflow_provider_brev.utils.release.release_on_kill`), and a kill stops
  any creation, wait or recovery still under way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.identity import REPLACED, InstanceRef, identity_verdict, replaced_message
from airflow_provider_brev.cli.names import validate_instance_name
from airflow_provider_brev.cli.readiness import STAGE_MISSING
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInstanceReplacedError,
)
from airflow_provider_brev.utils.instance_records import (
    InstanceRecord,
    publish_record,
    recorded_ids,
    records_for,
    republish_records,
)
from airflow_provider_brev.utils.provisioning import InstanceProvisioner, InstanceRequest
from airflow_provider_brev.utils.recovery import InstanceRecovery
from airflow_provider_brev.utils.release import delete_created, release_on_kill

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_provider_brev.hooks.brev import BrevHook

#: XCom key of the instance a step runs on (its name).
XCOM_INSTANCE_NAME = "instance_name"


class StepInstance:
    """The instance of one step (see the module docstring).

    :param hook: the step's hook.
    :param log: the step's logger.
    :param instance_name: the explicit instance, or ``None`` for ephemeral mode.
    :param request: ephemeral mode: what to create.
    :param ready_timeout: seconds to wait for a created instance.
    :param require_docker: readiness also requires ``docker info``.
    :param max_recoveries: ``max_instance_recoveries``.
    :param create_task_id: the task that created the explicit instance (else the nearest upstream record).
    :param upstream: upstream task ids, nearest first (where records are looked for).
    :param killed: returns ``True`` once the task was killed.
    """

    def __init__(
        self,
        hook: BrevHook,
        log: Any,
        *,
        instance_name: str | None,
        request: InstanceRequest | None,
        ready_timeout: float,
        require_docker: bool,
        max_recoveries: int,
        create_task_id: str | None,
        upstream: Sequence[str],
        killed: Callable[[], bool],
    ) -> None:
        self.hook = hook
        self.log = log
        self.instance_name = instance_name
        self.request = request
        self.ready_timeout = float(ready_timeout)
        self.require_docker = bool(require_docker)
        self.max_recoveries = int(max_recoveries)
        self.create_task_id = create_task_id
        self.upstream = list(upstream)
        self.killed = killed
        #: The instance the step runs on now (``None`` before :meth:`acquire`).
        self.current: InstanceRef | None = None
        #: Every ephemeral instance this try created (deleted on a kill).
        self.created: list[InstanceRef] = []
        self._provisioner: InstanceProvisioner | None = None
        self._known: set[str] = set()

    @property
    def ephemeral(self) -> bool:
        return not self.instance_name

    # -- acquire ---------------------------------------------------------------------------------
    def acquire(self, context: Any) -> InstanceRef:
        """The instance to run on: the given one (ready, and ours by id, or recovered), or a new ephemeral one."""
        if self.ephemeral:
            return self._create_ephemeral(context)
        name = validate_instance_name(self.instance_name)
        republish_records(context, self.log)  # a retry: XCom lost what this task recorded, its state store kept it
        self._known = recorded_ids(records_for(context, name, self.upstream))
        try:
            self.current = self._check_target(name)
        except BrevInstanceReplacedError:
            raise
        except BrevError as err:
            return self.recover(context, InstanceRef(name), err, launched=False)
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
            return InstanceRef(name, live.id if live is not None else "")
        if readiness.stage == STAGE_MISSING:
            raise BrevInstanceNotFoundError(
                f"Instance {name!r} does not exist: create it first (BrevCreateInstanceOperator) or check the name."
            )
        raise BrevInstanceNotReadyError(
            f"Instance {name!r} is not ready ({readiness.message}); wait for it with BrevReadySensor first."
        )

    def _create_ephemeral(self, context: Any) -> InstanceRef:
        assert self.request is not None
        provisioner = self._provisioner = InstanceProvisioner(
            self.hook, self.log, self.request, poll_interval=1.0, cancelled=self.killed
        )
        provisioned = provisioner.ensure(context, wait_timeout=self.ready_timeout)
        ref = self.current = InstanceRef(provisioned.name, provisioned.instance.id)
        self.created.append(ref)
        self._known.add(ref.id)
        context["ti"].xcom_push(key=XCOM_INSTANCE_NAME, value=ref.name)
        publish_record(context, InstanceRecord(ref.name, ref.id, owned=True, adopted=False), self.log)
        provisioner.wait_ready(
            provisioned,
            timeout=self.ready_timeout,
            require_docker=self.require_docker,
            delete_on_failure=False,  # release() deletes it
        )
        return ref

    # -- recover ---------------------------------------------------------------------------------
    def recover(self, context: Any, lost: InstanceRef, error: BaseException, *, launched: bool = True) -> InstanceRef:
        """Re-create ``lost`` if ``error`` means it is gone, else re-raise ``error``; returns the new instance."""
        if self.killed():  # on_kill deleted the instance or killed the job: that loss is not to be repaired
            raise error
        known = self._known | ({lost.id} if lost.id else set())
        recovery = InstanceRecovery(
            self.hook,
            self.log,
            budget=self.max_recoveries,
            ephemeral=self.ephemeral,
            create_task_id=self.create_task_id or None,
            upstream=self.upstream,
            ready_timeout=self.ready_timeout,
            require_docker=self.require_docker,
            recreate_ephemeral=lambda: self._create_ephemeral(context),
            known_ids=known,
            cancelled=self.killed,
        )
        self.current = recovery.recover_if_lost(context, lost.name, error, launched=launched)
        self._known = known | recovery.known_ids | {self.current.id}
        return self.current

    # -- release ---------------------------------------------------------------------------------
    def release(self) -> None:
        """The step ended (not deferred): delete its ephemeral instance, by id."""
        if self.ephemeral and self.current is not None:
            delete_created(self.hook, self.log, self.current.name, self.current.id or None, why="ephemeral instance")

    def release_on_kill(self, also: InstanceRef | None = None) -> list[str]:
        """The task was killed: delete every ephemeral instance this try created, is creating, or (``also``) an
        earlier handle named; returns their names. One fast call each, never raises."""
        if not self.ephemeral:
            return []
        refs: list[InstanceRef] = [*self.created, *([self.current] if self.current else []), *([also] if also else [])]
        provisioner = self._provisioner
        if provisioner is not None and provisioner.created is not None:
            refs.append(InstanceRef(provisioner.created.name, provisioner.created.id))
        if provisioner is not None and provisioner.pending_name:  # ``brev create`` still runs: by name
            refs.append(InstanceRef(provisioner.pending_name))
        targets = list(dict.fromkeys(refs))  # a pending provider-managed name is ours by construction: by name
        for ref in targets:
            release_on_kill(self.hook, ref.name, ref.id or None)
        return sorted({ref.name for ref in targets})
