"""Re-creating a step's lost instance under the same name and spec: the I/O around its rules
(:mod:`~airflow_provider_brev.core.instances.recovery`).

When a step's instance is gone -- not listed by ``brev ls``, in FAILURE, or RUNNING but unreachable past the
failure budget -- before its command is launched or while it runs,
:class:`~airflow_provider_brev.operators.exec.BrevExecOperator` (and every TAO operator) asks
:class:`InstanceRecovery` to:

1. confirm the loss (:meth:`InstanceRecovery.diagnose`: one listing, a probe only for a RUNNING instance after a
   transient error; the verdict is :func:`~airflow_provider_brev.core.instances.recovery.diagnose_loss`);
2. find the record of the create task (the upstream task whose XCom ``brev_instance`` names the instance, or
   ``create_task_id``) and decide (:func:`~airflow_provider_brev.core.instances.recovery.decide_recovery`): only an instance
   the DAG owns is re-created, within ``max_instance_recoveries`` per task instance (counted in the task state
   store on Airflow 3.3+, shared by every try, and in XCom, which lasts for the try and its deferrals);
3. clear the name (a FAILURE or unreachable instance of ours is deleted by its id and waited out: never two
   instances of one name), re-create it with the recorded spec and wait until it is ready
   (:class:`~airflow_provider_brev.instances.provisioning.InstanceProvisioner`), and record the new id
   (:meth:`~airflow_provider_brev.instances.records.InstanceRecords.record`), so the teardown and later steps know
   it. The name -- for managed names, with its expiry -- is unchanged, so the teardown and the janitor delete the
   new instance as they would have deleted the old one.

An instance is known by its id: when the instance listed under the name has an id the DAG run never recorded, ours
is gone and someone else created one under the freed name; it is never deleted, used or replaced
(:class:`~airflow_provider_brev.exceptions.BrevInstanceReplacedError`). An instance whose provider-managed name
says it expired is not re-created (the janitor deleted it).

The step then re-syncs its inputs, restores what it needs from its outputs and launches its command again.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.identity import InstanceRef, replaced_message
from airflow_provider_brev.core.instances.recovery import (
    GIVE_UP,
    LOST_REPLACED,
    decide_recovery,
    diagnose_loss,
    may_be_lost,
    needs_probe,
    recoveries_used,
)
from airflow_provider_brev.core.protocol.names import parse_managed_name
from airflow_provider_brev.core.validation import checked_instance_request
from airflow_provider_brev.exceptions import BrevError, BrevInstanceLostError, BrevInstanceReplacedError
from airflow_provider_brev.instances.provisioning import InstanceProvisioner
from airflow_provider_brev.instances.records import InstanceRecords
from airflow_provider_brev.instances.release import clear_for_recreation
from airflow_provider_brev.utils.task_memory import MemoryAccessor

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from airflow_provider_brev.core.instances.records import InstanceRecord
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: XCom key (and state store key) of the recovery count (``{"count": n, "instance": name}``).
XCOM_RECOVERIES = "brev_recoveries"
STATE_STORE_RECOVERIES_KEY = XCOM_RECOVERIES


class RecoveryCount(MemoryAccessor):
    """The instance recoveries a task instance made, kept in its memory (every try's on Airflow 3.3+, this try's
    before)."""

    def used(self) -> int:
        """Recoveries made so far (:func:`~airflow_provider_brev.core.instances.recovery.recoveries_used`)."""
        return recoveries_used(self.memory.stored(STATE_STORE_RECOVERIES_KEY), self.memory.read(XCOM_RECOVERIES))

    def count(self, name: str, number: int) -> None:
        """Recovery ``number`` of instance ``name`` starts (counted before it is made: a crash still spends it)."""
        self.memory.keep(XCOM_RECOVERIES, {"count": number, "instance": name})


def upstream_task_ids(task: Any) -> list[str]:
    """Where a step looks for its create task's record: its direct upstream tasks, then every other upstream (none
    for an operator used outside a DAG)."""
    try:
        direct = sorted(task.upstream_task_ids)
        if getattr(task, "dag", None) is None:
            return direct
    except RuntimeError:  # "has not been assigned to a Dag yet"
        return []
    return direct + sorted(set(task.get_flat_relative_ids(upstream=True)) - set(direct))


class InstanceRecovery:
    """Confirm a loss and re-create the instance (see the module doc).

    :param hook: the step's Brev hook.
    :param log: the task's logger.
    :param budget: ``max_instance_recoveries``.
    :param ephemeral: the step created its instance itself (then ``recreate_ephemeral`` makes it again).
    :param create_task_id: the create task to read the record from, or ``None`` to search ``upstream``.
    :param upstream: task ids to search for the record, nearest first.
    :param ready_timeout: seconds to wait for the re-created instance.
    :param require_docker: readiness also requires ``docker info``.
    :param recreate_ephemeral: ephemeral mode: creates the instance again and waits for it; returns it.
    :param known_ids: the ids the DAG run recorded for the instance's name (what is listed under it with another
        id is someone else's).
    :param cancelled: returns ``True`` once the task was killed: nothing is re-created after that.
    """

    def __init__(
        self,
        hook: BrevHook,
        log: Any,
        *,
        budget: int,
        ephemeral: bool,
        create_task_id: str | None,
        upstream: Sequence[str],
        ready_timeout: float,
        require_docker: bool = False,
        recreate_ephemeral: Callable[[], InstanceRef] | None = None,
        known_ids: Collection[str] = (),
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        self.hook = hook
        self.log = log
        self.budget = budget
        self.ephemeral = ephemeral
        self.create_task_id = create_task_id
        self.upstream = list(upstream)
        self.ready_timeout = float(ready_timeout)
        self.require_docker = require_docker
        self.recreate_ephemeral = recreate_ephemeral
        self.known_ids = {instance_id for instance_id in known_ids if instance_id}
        self.cancelled = cancelled

    # -- is it lost? -----------------------------------------------------------------------------
    def diagnose(self, name: str, error: BaseException) -> str | None:
        """The loss verdict for ``name`` after ``error`` (``None``: not lost, or it cannot be told)."""
        if not may_be_lost(error):
            return None
        try:
            instance = self.hook.get_instance(name)
            reachable = None
            if needs_probe(error, instance, self.known_ids):
                reachable = self.hook.check_readiness(name).ready
        except BrevError as err:
            self.log.warning("Could not check whether instance %s is lost (%s).", name, err)
            return None
        loss = diagnose_loss(error, instance, reachable=reachable, known_ids=self.known_ids)
        if loss == LOST_REPLACED and instance is not None:
            self.log.warning("%s", replaced_message(name, instance, self.known_ids, refused="used or re-created"))
        return loss

    # -- the record and the count ----------------------------------------------------------------
    def find_record(self, memory: TaskMemory, name: str) -> InstanceRecord | None:
        """The create task's record of ``name``: from ``create_task_id``, else the nearest upstream task."""
        for task_id in [self.create_task_id] if self.create_task_id else self.upstream:
            record = next((r for r in InstanceRecords(memory).of(task_id) if r.name == name), None)
            if record is not None:
                return record
        return None

    # -- recovery --------------------------------------------------------------------------------
    def recover_if_lost(
        self, memory: TaskMemory, name: str, error: BaseException, *, launched: bool = True
    ) -> InstanceRef:
        """Re-create ``name`` if ``error`` means it is lost, else re-raise ``error``; returns the new instance.

        :param launched: the step got past its pre-launch check; before it, an instance no create task recorded
            keeps its plain "does not exist" / "not ready" error.
        """
        loss = self.diagnose(name, error)
        if loss is None:
            raise error
        if not launched and not self.ephemeral and self.find_record(memory, name) is None:
            raise error
        return self.recover(memory, name, loss)

    def recover(self, memory: TaskMemory, name: str, loss: str) -> InstanceRef:
        """Re-create the lost instance ``name`` and wait until it is ready; returns the new instance.

        Raises :class:`~airflow_provider_brev.exceptions.BrevInstanceLostError` when it must not or may no longer
        be re-created (adopted, no record, expired, budget spent), and
        :class:`~airflow_provider_brev.exceptions.BrevInstanceReplacedError` when someone else's instance holds the
        name now.
        """
        lost_at = datetime.now(UTC)
        record = None if self.ephemeral else self.find_record(memory, name)
        managed = parse_managed_name(name)
        decision = decide_recovery(
            name=name,
            loss=loss,
            owned=None if record is None else record.owned,
            ephemeral=self.ephemeral,
            used=RecoveryCount(memory).used(),
            budget=self.budget,
            lost_at=lost_at,
            create_task_id=self.create_task_id,
            expires_at=managed.expires_at if managed else None,
        )
        if decision.action == GIVE_UP:
            raise (BrevInstanceReplacedError if loss == LOST_REPLACED else BrevInstanceLostError)(decision.message)
        if self.cancelled is not None and self.cancelled():
            raise BrevInstanceLostError(f"Instance {name!r} is lost and the task was killed: not re-creating it.")
        RecoveryCount(memory).count(name, decision.number)  # counted first: a crash half-way still spends it
        self.log.warning(
            "Instance %s lost (%s): re-creating it under the same name (recovery %d/%d).",
            *(name, loss, decision.number, self.budget),
        )
        clear_for_recreation(self.hook, self.log, name, self.known_ids, timeout=self.ready_timeout)
        if self.ephemeral:
            assert self.recreate_ephemeral is not None
            new = self.recreate_ephemeral()
        else:
            assert record is not None
            new = self._recreate(memory, record)
        self.log.warning("%s", decision.message)
        return new

    def _recreate(self, memory: TaskMemory, record: InstanceRecord) -> InstanceRef:
        spec = record.spec
        types = spec.get("instance_types") or (
            [spec["instance_type"]] if not spec.get("gpu") and spec.get("instance_type") else None
        )
        request = checked_instance_request(
            {
                "instance_name": record.name,
                "gpu": spec.get("gpu") or None,
                "instance_types": types,
                "min_vram": spec.get("min_vram"),
                "cloud_cred_id": spec.get("cloud_cred_id"),
                "workspace_group_id": spec.get("workspace_group_id"),
                "require_docker": bool(spec.get("require_docker")),
                "max_price_per_hour": spec.get("max_price_per_hour"),
            }
        )
        provisioner = InstanceProvisioner(self.hook, self.log, request, poll_interval=1.0, cancelled=self.cancelled)
        provisioned = provisioner.ensure(memory, wait_timeout=self.ready_timeout)
        new = replace(provisioner.record(provisioned), owned=True, adopted=False, spec=dict(spec))
        InstanceRecords(memory).record(new)  # the teardown and later steps now know the new id
        self.known_ids.add(new.id)
        provisioner.wait_ready(
            provisioned,
            timeout=self.ready_timeout,
            require_docker=request.require_docker or self.require_docker,
            delete_on_failure=False,  # the name is the create task's: its teardown deletes it
        )
        return InstanceRef(provisioned.name, provisioned.instance.id)
