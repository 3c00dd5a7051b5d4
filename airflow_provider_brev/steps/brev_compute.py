"""The Brev compute: a step's job as a detached job (or a foreground command) on a Brev instance.

:class:`BrevInstanceCompute` implements the step engine's port (:class:`~airflow_provider_brev.steps.compute.Compute`)
over a Brev instance (:class:`~airflow_provider_brev.steps.brev_instance.StepInstance`), the step's S3 data
(:class:`~airflow_provider_brev.staging.step_data.StepData`) and its workload (:mod:`.workload`, :mod:`.tao`):

========== ================================================================ =====================================
phase      what                                                             on a kill
========== ================================================================ =====================================
acquire    the instance: an existing one (ready, ours by id) or an ephemeral  creation and waits stop; an ephemeral
           one, re-created when lost                                         instance is deleted
prepare    the workload's preparation (TAO: spec, ``docker login``, the     the foreground command is stopped
           image's pull started in the background: it runs while the
           inputs sync)
launch     the inputs sync, the wait for what the sync did not hide of the  nothing is launched
           pull, the workload's command, then attach to an earlier try's
           job or launch this try's (deterministic job ids, launch guard;
           :func:`~airflow_provider_brev.jobs.runner.attach_or_launch`)
follow     the job's log into the task log, periodic output syncs, the        the job is killed (or kept:
           deadline -- on the worker, or deferred to the triggerer           ``on_kill_action="keep"``)
           (:class:`~airflow_provider_brev.triggers.brev.BrevRemoteJobTrigger`)
collect    the final output sync (success or failure) and the workload's      --
           verdict
release    an ephemeral instance is deleted (by id)                          --
========== ================================================================ =====================================

A lost instance (in acquire, or while the command runs) is re-created by :meth:`BrevInstanceCompute.recover`, and the
engine runs the step again from ``prepare`` on the new one. Every phase is billed (:class:`~airflow_provider_brev.cost.meter.CostMeter`:
boot, pull, stage, work, resume, upload); ``work`` ends when the job ended (the trigger's event says when), and the
time until Airflow resumed the task is ``resume``; ``release`` reports ``brev_cost``.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import check_run_cost
from airflow_provider_brev.core.instances.identity import InstanceRef
from airflow_provider_brev.core.instances.recovery import EVENT_INSTANCE_LOST
from airflow_provider_brev.core.jobs.attempts import EarlierJob, earlier_jobs
from airflow_provider_brev.core.jobs.follower import SYNC_DUE, TIMED_OUT, JobOutcome, outcome_error
from airflow_provider_brev.core.jobs.handle import generate_job_id
from airflow_provider_brev.core.jobs.remote import RemoteJob
from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.exceptions import BrevTaskKilledError, error_from_event
from airflow_provider_brev.instances.recovery import upstream_task_ids
from airflow_provider_brev.instances.release import ON_KILL_TIMEOUT
from airflow_provider_brev.jobs.handle import KeptJobHandle
from airflow_provider_brev.jobs.runner import JobRunner, attach_or_launch, cleanup_job
from airflow_provider_brev.staging.step_data import StepData
from airflow_provider_brev.steps.brev_instance import StepInstance
from airflow_provider_brev.steps.compute import FollowAgain
from airflow_provider_brev.steps.workload import StepRun
from airflow_provider_brev.utils.events import raise_for_error_event

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow.triggers.base import BaseTrigger

    from airflow_provider_brev.exceptions import BrevError
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.jobs.runner import JobLaunch
    from airflow_provider_brev.steps.compute import Handle, StepTask, Tries
    from airflow_provider_brev.steps.spec import StepSpec
    from airflow_provider_brev.steps.workload import Workload
    from airflow_provider_brev.utils.task_memory import TaskMemory


class BrevInstanceCompute:
    """A step on a Brev instance (see the module docstring).

    :param spec: the checked parameters.
    :param workload: what runs.
    :param task: the task (its operator's hook and upstream tasks, logger, memory, kill flag).
    :param hook: the Brev hook (default: the operator's).
    """

    event_fields: tuple[str, ...] = ("instance_name", "job")

    def __init__(self, spec: StepSpec, workload: Workload, task: StepTask, *, hook: BrevHook | None = None) -> None:
        hook = hook if hook is not None else task.operator.hook
        self.spec = spec
        self.workload = workload
        data = StepData(
            hook,
            task.log,
            inputs=spec.data.inputs,
            outputs=spec.data.outputs,
            aws_conn_id=spec.data.aws_conn_id,
            memory=task.memory,
            killed=task.killed,
        )
        self.run = StepRun(hook, task.log, task.memory, data, task.killed)
        upstream = upstream_task_ids(task.operator) if task.operator is not None else []
        self.instance = StepInstance(hook, task.log, spec.compute, upstream=upstream, killed=task.killed)
        self.meter = CostMeter(task.memory, task.log)
        self._launching: tuple[str, RemoteJob] | None = None  # this try's job while its launch call runs

    @property
    def hook(self) -> BrevHook:
        return self.run.hook

    @property
    def log(self) -> Any:
        return self.run.log

    @property
    def memory(self) -> TaskMemory:
        return self.run.memory

    @property
    def ephemeral(self) -> bool:
        return self.instance.ephemeral

    @property
    def ref(self) -> InstanceRef:
        """The instance the step runs on now."""
        assert self.instance.current is not None, "no instance acquired"
        return self.instance.current

    @property
    def foreground(self) -> bool:
        return not self.spec.follow.detach

    # -- check, acquire, prepare -------------------------------------------------------------------
    def check(self) -> None:
        """The workload's checks, every S3 location reachable; on an existing instance the step's billed time starts
        now, and ``max_run_cost`` is checked from the DAG run's record (no ``brev`` call)."""
        self.workload.check()
        self.workload.mask()
        self.run.data.check_locations()  # every S3 location reachable, before anything is created
        if not self.ephemeral:  # the instance bills already: the step owns its time from now on
            self.meter.begin()
            if self.spec.compute.limits.max_run_cost is not None:
                recorded = InstanceRef(str(self.spec.compute.instance_name))
                self._check_run_cost(self.instance.billing(self.memory, recorded))

    def mask(self) -> None:
        self.workload.mask()

    def acquire(self) -> None:
        """The instance to run on (recovered when it is lost before the launch); an ephemeral one bills its boot,
        and a step on an existing one refuses to start when its estimate exceeds ``max_run_cost``."""
        if self.ephemeral:
            self.meter.begin()
            with self.meter.phase("boot"):
                ref = self.instance.acquire(self.memory)
            if self.instance.stopped is not None:  # a warm start: its stopped disk time, billed to its reuse key
                self.meter.note(stopped=self.instance.stopped)
        else:
            ref = self.instance.acquire(self.memory)
        billing = self._bill(ref)
        if not self.ephemeral:  # an ephemeral instance was created within the cap
            self._check_run_cost(billing, ref)

    def prepare(self) -> None:
        """The workload's preparation on the ready instance (billed as ``pull``)."""
        with self.meter.phase("pull"):
            self.workload.prepare(self.run, self.ref)

    # -- launch ------------------------------------------------------------------------------------
    def launch(self) -> JobLaunch:
        """Right before a launch: sync the inputs while the workload's preparation (the image pull) goes on in the
        background, wait for it (billed as ``pull``), ask the workload what to launch (billed as ``stage``);
        nothing after a kill."""
        ref = self.ref
        with self.meter.phase("stage"):
            self.run.data.sync_inputs(ref.name)
        with self.meter.phase("pull"):  # what the inputs' sync did not hide of the image pull
            self.workload.ready(self.run, ref)
        with self.meter.phase("stage"):
            launch = self.workload.launch(self.run, ref)
        if self.run.killed():  # on_kill found no job to kill then: nothing may be launched after it
            raise BrevTaskKilledError("The task was killed before its job was launched: not launching it.")
        return launch

    def run_foreground(self, deadline: float | None) -> Any:
        """``detach=False``: the command in the foreground (exactly once, its real exit code), then collect."""
        ref = self.ref
        launch = self.launch()
        remaining = None if deadline is None else max(deadline - time.time(), 1.0)
        with self.meter.phase("work"):
            result = self.hook.run_command(
                ref.name,
                launch.command,
                timeout=remaining,
                env=launch.env,
                cwd=launch.cwd,
                secret_env=launch.secret_env,
            )
        return self._collect(ref, None, result.exit_code, result.last_line)

    def own_job(self, tries: Tries) -> str:
        return generate_job_id(try_number=tries.try_number, **tries.ids)

    def job_of(self, record: Mapping[str, Any]) -> str | None:
        job = record.get("job")
        return RemoteJob.from_dict(job).job_id if isinstance(job, dict) else None

    def attach_or_launch(self, tries: Tries) -> Handle:
        """This try's job, or an earlier try's still running or finished well (deterministic ids per try, and the
        handle an earlier try kept in the task state store); its ``work`` is billed from now on."""
        ref = self.ref
        current = RemoteJob(self.own_job(tries))
        earlier = earlier_jobs(try_number=tries.try_number, first_try=tries.first_try, **tries.ids)
        stored = self._stored_job(ref.name)
        if stored is not None and stored.job_id not in {job.job_id for job in earlier} | {current.job_id}:
            earlier.insert(0, EarlierJob(stored.job_id, None, collectable=True))
        self._launching = (ref.name, current)
        job = attach_or_launch(self.hook, self.log, ref.name, current, earlier, self.launch)
        self.meter.start("work")  # launched, or attached to an earlier try's job
        return {"instance_name": ref.name, "instance_id": ref.id, "job": job.to_dict(), "ephemeral": self.ephemeral}

    def _stored_job(self, name: str) -> RemoteJob | None:
        """The job handle an earlier try kept in the task state store for ``name``, if any."""
        stored = KeptJobHandle(self.memory).stored()
        stored_job = stored.get("job") if stored else None
        if stored and stored.get("instance_name") == name and isinstance(stored_job, dict):
            return RemoteJob.from_dict(stored_job)
        return None

    # -- follow ------------------------------------------------------------------------------------
    def follow(self, handle: Handle, deadline: float | None) -> JobOutcome:
        """Follow the job on the worker, the step's outputs synced when due."""
        ref, job = self.ref, RemoteJob.from_dict(handle["job"])
        policy = self.spec.follow.policy(deadline, self.spec.data.periodic_sync)
        runner = JobRunner(self.hook, ref.name, job, policy, self.log)
        return runner.follow(on_sync=lambda: self.run.data.periodic_sync(ref.name))

    def trigger(
        self, handle: Handle, deadline: float | None, *, not_before: float, resume: dict[str, Any]
    ) -> BaseTrigger:
        from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger  # triggerer-side code: lazy

        spec, ref = self.spec, self.ref
        return BrevRemoteJobTrigger.for_policy(
            instance_name=ref.name,
            instance_id=ref.id or None,
            job=RemoteJob.from_dict(handle["job"]).to_dict(),
            brev_conn_id=spec.compute.brev_conn_id,
            policy=spec.follow.policy(deadline, spec.data.periodic_sync),
            on_kill_action=spec.follow.on_kill_action,
            ephemeral=self.ephemeral,
            offset=int(resume.get("offset", 0)),
            last_line=str(resume.get("last_line", "")),
            not_before=not_before,
        )

    def resume(self, event: dict[str, Any]) -> Handle:
        """After a deferral: the instance the trigger followed (its id came back in the event)."""
        ref = self.instance.resume(event["instance_name"], event.get("instance_id"))
        return {"instance_name": ref.name, "instance_id": ref.id, "job": event["job"], "ephemeral": self.ephemeral}

    def outcome(self, handle: Handle, event: dict[str, Any]) -> JobOutcome | FollowAgain:
        """The event: outputs due (synced here, then the triggerer follows on), the instance lost (its error: the
        engine recovers), an error, or the job's end."""
        if event["status"] == SYNC_DUE:
            self.run.data.periodic_sync(self.ref.name)
            return FollowAgain({"offset": int(event.get("offset", 0)), "last_line": str(event.get("last_line", ""))})
        self.meter.resumed("work", event.get("ended_at"))  # the job ended there; since then the task was resuming
        if event["status"] == EVENT_INSTANCE_LOST:
            raise error_from_event(str(event.get("message")), event.get("error_type"))
        raise_for_error_event(event, "Following the remote job failed")
        return JobOutcome(
            state=event.get("state", event["status"]),
            exit_code=event.get("exit_code"),
            last_line=event.get("last_line", ""),
            offset=int(event.get("offset", 0)),
        )

    # -- collect -----------------------------------------------------------------------------------
    def collect(self, handle: Handle, outcome: JobOutcome) -> Any:
        """The job ended: its error (a job killed at its deadline uploads what it wrote first), or the result."""
        ref, job = self.ref, RemoteJob.from_dict(handle["job"])
        self.meter.stop("work")
        try:
            error = outcome_error(outcome, ref.name, job.job_id)
            if error is not None:
                if outcome.state == TIMED_OUT:  # killed at its deadline: what it wrote is evidence
                    with self.meter.phase("upload"):
                        self.run.data.final_sync(ref.name, command_failed=True)
                raise error
            return self._collect(ref, job, int(outcome.exit_code), outcome.last_line)  # type: ignore[arg-type]
        finally:
            if outcome.collected and not outcome.succeeded:
                # A job that succeeded keeps its directory: if this try does not succeed in Airflow after all (a
                # failure after the job, the scheduler's deferral race), the retry collects it instead of running
                # the command again. The next launch on the instance removes finished jobs a week old.
                cleanup_job(self.hook, ref.name, job)

    def _collect(self, ref: InstanceRef, job: RemoteJob | None, exit_code: int, last_line: str) -> Any:
        """Upload the outputs (success or failure: a failed upload never masks the command's error), then the
        workload's verdict; the result gains ``outputs`` and ``sync`` when the step declares data."""
        data = self.run.data
        with self.meter.phase("upload"):
            data.final_sync(ref.name, command_failed=exit_code != 0)
        result = self.workload.result(self.run, ref, job, exit_code, last_line)
        if data.inputs or data.outputs:
            result.update(outputs=data.output_map(), sync=data.recorded())
        return result

    # -- recover, release, kill --------------------------------------------------------------------
    def recover(self, error: BrevError) -> None:
        """Re-create the instance if ``error`` means it is lost (billed as ``boot``; the workload's checks run
        again), else re-raise ``error``."""
        self.meter.stop_all()
        with self.meter.phase("boot"):
            ref = self.instance.recover(self.memory, self.ref, error)
        self._bill(ref)
        self.workload.check()
        self.workload.mask()

    def release(self) -> None:
        """The step ended: an ephemeral instance is deleted (or stopped); report what the step cost."""
        try:
            self.instance.release()
        finally:
            self.meter.report()

    def suspend(self) -> None:
        """The task defers: its cost clock goes to its memory (the resumed task reads it back)."""
        self.meter.save()

    def on_kill(self, handle: Handle | None) -> None:
        """An ephemeral instance is deleted (that stops everything on it); else the foreground command is stopped
        and the job killed (or kept: ``on_kill_action="keep"``)."""
        if self.ephemeral:  # deleting the instance stops everything on it: stop local calls, then delete
            with contextlib.suppress(Exception):
                self.hook.stop_running(grace_seconds=0.2)
            handled = (
                InstanceRef(str(handle["instance_name"]), str(handle.get("instance_id") or "")) if handle else None
            )
            deleted = self.instance.release_on_kill(also=handled)
            if deleted:
                self.log.warning("Task killed: deleting its ephemeral instance %s.", ", ".join(deleted))
            return
        follow = self.spec.follow
        if not follow.detach or follow.on_kill_action == "kill":  # foreground work (also TAO's docker login/pull)
            with contextlib.suppress(Exception):
                self.hook.stop_foreground(timeout=ON_KILL_TIMEOUT / 2)
        if handle:
            name, job = str(handle["instance_name"]), RemoteJob.from_dict(handle["job"])
        elif self._launching:  # killed while the launch call ran: this try's job may already be running
            name, job = self._launching
        else:
            return
        if follow.on_kill_action != "kill":
            self.log.info("Task killed: keeping job %s on %s running (on_kill_action='keep').", job.job_id, name)
            return
        self.log.warning("Task killed: killing job %s on %s.", job.job_id, name)
        with contextlib.suppress(Exception):
            self.hook.kill_job(name, job, grace_seconds=1, timeout=ON_KILL_TIMEOUT)

    # -- cost --------------------------------------------------------------------------------------
    def _bill(self, ref: InstanceRef) -> tuple[str, float | None]:
        """Bill the step's time on ``ref`` from now on; returns its type and price."""
        instance_type, price = self.instance.billing(self.memory, ref)
        self.meter.bill_on(ref.name, instance_type, price)
        return instance_type, price

    def _check_run_cost(self, billing: tuple[str, float | None], ref: InstanceRef | None = None) -> None:
        """``max_run_cost`` on an existing instance: ``price x timeout`` within it, checked before any launch --
        first from the DAG run's record (no ``brev`` call), then once the instance is known (``ref``)."""
        limits, estimate = self.spec.compute.limits, self.spec.compute.estimate_seconds
        instance_type, price = billing
        if limits.max_run_cost is None or estimate is None or (ref is None and price is None):
            return
        name = ref.name if ref is not None else str(self.spec.compute.instance_name)
        check_run_cost(
            limits.max_run_cost,
            price_per_hour=price,
            estimate_seconds=estimate,
            instance_name=name,
            instance_type=instance_type,
        )
