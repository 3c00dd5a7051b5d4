"""The step service: one GPU step, run as explicit phases over a compute and a workload.

The step operators (:mod:`airflow_provider_brev.operators.step`) are templating, a spec and ``defer``; everything
else happens here, phase by phase, each with its own behaviour when the task is killed:

========== ================================================================ =====================================
phase      what                                                             on a kill
========== ================================================================ =====================================
acquire    the instance: an existing one (ready, ours by id) or an ephemeral  creation and waits stop; an ephemeral
           one (:class:`~airflow_provider_brev.steps.compute.BrevInstance-   instance is deleted
           Compute`), re-created when lost
prepare    the workload's preparation (TAO: spec, ``docker login``, the     the foreground command is stopped
           image's pull started in the background: it runs while the
           inputs sync)
launch     the inputs sync, the wait for what the sync did not hide of the  nothing is launched
           pull, the workload's command, then attach to an earlier try's
           job or launch this try's (deterministic job ids, launch guard;
           :func:`~airflow_provider_brev.utils.job_runner.attach_or_launch`)
follow     the job's log into the task log, periodic output syncs, the        the job is killed (or kept:
           deadline -- on the worker, or deferred to the triggerer           ``on_kill_action="keep"``)
collect    the final output sync (success or failure) and the workload's      --
           verdict
release    an ephemeral instance is deleted (by id)                          --
========== ================================================================ =====================================

A lost instance (in acquire, or while the command runs) is re-created by the compute, and the step runs again from
``prepare`` on the new one. What the task remembers across tries and deferrals is its
:class:`~airflow_provider_brev.utils.task_memory.TaskMemory`.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import deferral_settle_seconds
from airflow_provider_brev.cli.instances.cost import check_run_cost
from airflow_provider_brev.cli.instances.identity import InstanceRef
from airflow_provider_brev.cli.instances.recovery import EVENT_INSTANCE_LOST
from airflow_provider_brev.cli.jobs.attempts import EarlierJob, earlier_jobs, generation_start
from airflow_provider_brev.cli.jobs.follower import SYNC_DUE, TIMED_OUT, JobOutcome, outcome_error
from airflow_provider_brev.cli.jobs.handle import generate_job_id
from airflow_provider_brev.cli.jobs.remote import RemoteJob
from airflow_provider_brev.exceptions import BrevError, BrevTaskKilledError, error_from_event
from airflow_provider_brev.steps.compute import BrevInstanceCompute
from airflow_provider_brev.steps.metering import CostMeter
from airflow_provider_brev.steps.workload import StepRun
from airflow_provider_brev.utils.events import raise_for_error_event, validate_event
from airflow_provider_brev.utils.job_runner import JobRunner, attach_or_launch, cleanup_job
from airflow_provider_brev.utils.release import ON_KILL_TIMEOUT
from airflow_provider_brev.utils.step_data import StepData

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.triggers.base import BaseTrigger

    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.steps.spec import StepSpec
    from airflow_provider_brev.steps.workload import Workload
    from airflow_provider_brev.utils.job_runner import JobLaunch
    from airflow_provider_brev.utils.task_memory import TaskMemory


class StepService:
    """Run one step (see the module docstring).

    :param spec: the checked parameters.
    :param workload: what runs.
    :param hook: the task's Brev hook.
    :param log: the task's logger.
    :param memory: the task's memory.
    :param upstream: upstream task ids, nearest first (where the instance records are looked for).
    :param retries: the task's ``retries`` (tries since the last clear are one generation).
    :param killed: returns ``True`` once the task was killed.
    :param defer: defers the task with a trigger (the operator's ``defer``; it does not return).
    """

    def __init__(
        self,
        *,
        spec: StepSpec,
        workload: Workload,
        hook: BrevHook,
        log: Any,
        memory: TaskMemory,
        upstream: list[str],
        retries: int | None,
        killed: Callable[[], bool],
        defer: Callable[[BaseTrigger], None],
    ) -> None:
        self.spec = spec
        self.workload = workload
        self.retries = retries
        self.defer = defer
        data = StepData(
            hook,
            log,
            inputs=spec.data.inputs,
            outputs=spec.data.outputs,
            aws_conn_id=spec.data.aws_conn_id,
            memory=memory,
        )
        self.run = StepRun(hook, log, memory, data, killed)
        self.compute = BrevInstanceCompute(hook, log, spec.compute, upstream=upstream, killed=killed)
        self.meter = CostMeter(memory, log)
        self.deferring = False
        self._handle: dict[str, Any] | None = None
        self._launching: tuple[str, RemoteJob] | None = None  # this try's job while its launch call runs

    @property
    def hook(self) -> BrevHook:
        return self.run.hook

    @property
    def log(self) -> Any:
        return self.run.log

    # -- entry points ------------------------------------------------------------------------------
    def execute(self) -> Any:
        """Run the step from the start (``execute``)."""
        workload = self.workload
        workload.check()
        workload.mask()
        self.run.data.check_locations()  # every S3 location reachable, before anything is created
        timeout = self.spec.follow.timeout
        deadline = None if timeout is None else time.time() + timeout
        if not self.compute.ephemeral:  # the instance bills already: the step owns its time from now on
            self.meter.begin()
            if self.spec.compute.limits.max_run_cost is not None:  # from the DAG run's record: no `brev` call
                recorded = InstanceRef(str(self.spec.compute.instance_name))
                self._check_run_cost(self.compute.billing(self.run.memory, recorded))
        try:
            ref = self.acquire()
            return self._with_recovery(ref, deadline, lambda current: self._from_prepare(current, deadline))
        finally:
            self._end()

    def execute_complete(self, event: dict[str, Any] | None) -> Any:
        """Resume after a deferral with the trigger's ``event`` (``execute_complete``)."""
        event = validate_event(event, "instance_name", "job")
        stale = RemoteJob.from_dict(event["job"]).job_id
        if self._from_an_earlier_try(stale):
            self.log.warning(
                "Resumed with the event of job %s, which an earlier try deferred on (Airflow 3.0 hands a retry its "
                "previous try's deferral): running this try from the start, which collects that job if it "
                "succeeded, re-attaches to it if it runs, and relaunches otherwise.",
                stale,
            )
            return self.execute()
        self.workload.mask()  # this worker process never saw them
        ref = self.compute.resume(event["instance_name"], event.get("instance_id"))
        try:
            deadline = event.get("deadline")
            return self._with_recovery(ref, deadline, lambda current: self._from_event(current, event))
        finally:
            self._end()

    def on_kill(self) -> None:
        """Undo what killing the task leaves behind (fast: Airflow allows about 5 s); runs in a thread."""
        handle = self._handle or self.run.memory.job_handle()
        if self.compute.ephemeral:  # deleting the instance stops everything on it: stop local calls, then delete
            with contextlib.suppress(Exception):
                self.hook.stop_running(grace_seconds=0.2)
            handled = (
                InstanceRef(str(handle["instance_name"]), str(handle.get("instance_id") or "")) if handle else None
            )
            deleted = self.compute.release_on_kill(also=handled)
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

    # -- phases ------------------------------------------------------------------------------------
    def acquire(self) -> InstanceRef:
        """The instance to run on (recovered when it is lost before the launch); an ephemeral one bills its boot,
        and a step on an existing one refuses to start when its estimate exceeds ``max_run_cost``."""
        if self.compute.ephemeral:
            self.meter.begin()
            with self.meter.phase("boot"):
                ref = self.compute.acquire(self.run.memory)
        else:
            ref = self.compute.acquire(self.run.memory)
        billing = self._bill(ref)
        if not self.compute.ephemeral:  # an ephemeral instance was created within the cap
            self._check_run_cost(billing, ref)
        return ref

    def prepare(self, ref: InstanceRef) -> None:
        """The workload's preparation on the ready instance (billed as ``pull``)."""
        with self.meter.phase("pull"):
            self.workload.prepare(self.run, ref)

    def launch(self, ref: InstanceRef) -> JobLaunch:
        """Right before a launch: sync the inputs while the workload's preparation (the image pull) goes on in the
        background, wait for it (billed as ``pull``), ask the workload what to launch (billed as ``stage``);
        nothing after a kill."""
        with self.meter.phase("stage"):
            self.run.data.sync_inputs(ref.name)
        with self.meter.phase("pull"):  # what the inputs' sync did not hide of the image pull
            self.workload.ready(self.run, ref)
        with self.meter.phase("stage"):
            launch = self.workload.launch(self.run, ref)
        if self.run.killed():  # on_kill found no job to kill then: nothing may be launched after it
            raise BrevTaskKilledError("The task was killed before its job was launched: not launching it.")
        return launch

    def follow(self, ref: InstanceRef, job: RemoteJob, deadline: float | None) -> JobOutcome:
        """Follow the job on the worker (or defer: the triggerer follows it)."""
        if self.spec.follow.deferrable:
            self._defer_following(ref, job, deadline)
        policy = self.spec.follow.policy(deadline, self.spec.data.periodic_sync)
        runner = JobRunner(self.hook, ref.name, job, policy, self.log)
        return runner.follow(on_sync=lambda: self.run.data.periodic_sync(ref.name))

    def collect(self, ref: InstanceRef, job: RemoteJob | None, exit_code: int, last_line: str) -> Any:
        """Upload the outputs (success or failure: a failed upload never masks the command's error), then the
        workload's verdict; the result gains ``outputs`` and ``sync`` when the step declares data."""
        data = self.run.data
        with self.meter.phase("upload"):
            data.final_sync(ref.name, command_failed=exit_code != 0)
        result = self.workload.result(self.run, ref, job, exit_code, last_line)
        if data.inputs or data.outputs:
            result.update(outputs=data.output_map(), sync=data.recorded())
        return result

    def release(self) -> None:
        """The step ended: an ephemeral instance is deleted."""
        self.compute.release()

    # -- cost --------------------------------------------------------------------------------------
    def _bill(self, ref: InstanceRef) -> tuple[str, float | None]:
        """Bill the step's time on ``ref`` from now on; returns its type and price."""
        instance_type, price = self.compute.billing(self.run.memory, ref)
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

    def _end(self) -> None:
        """The try ends (not deferred): release an ephemeral instance, report what the step cost."""
        if self.deferring:
            self.meter.save()
            return
        try:
            self.release()
        finally:
            self.meter.report()

    # -- the flow ----------------------------------------------------------------------------------
    def _with_recovery(self, ref: InstanceRef, deadline: float | None, step: Callable[[InstanceRef], Any]) -> Any:
        """Run ``step`` on the instance; when it fails because the instance is lost, re-create the instance and
        run the command again on it (within ``max_instance_recoveries``)."""
        while True:
            try:
                return step(ref)
            except BrevError as err:
                self.meter.stop_all()
                with self.meter.phase("boot"):
                    ref = self.compute.recover(self.run.memory, ref, err)
                self._bill(ref)
                self.workload.check()
                self.workload.mask()
                step = lambda current: self._from_prepare(current, deadline)  # noqa: E731

    def _from_prepare(self, ref: InstanceRef, deadline: float | None) -> Any:
        """Prepare, launch (or re-attach), follow and collect."""
        self.prepare(ref)
        if not self.spec.follow.detach:
            launch = self.launch(ref)
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
            return self.collect(ref, None, result.exit_code, result.last_line)
        job = self._attach_or_launch(ref)
        self.meter.start("work")  # launched, or attached to an earlier try's job
        self._handle = {
            "instance_name": ref.name,
            "instance_id": ref.id,
            "job": job.to_dict(),
            "deadline": deadline,
            "ephemeral": self.compute.ephemeral,
            "try_number": int(self.run.memory.ti.try_number),
        }
        self.run.memory.keep_job_handle(self._handle)
        outcome = self.follow(ref, job, deadline)
        return self._complete(ref, job, outcome)

    def _from_event(self, ref: InstanceRef, event: dict[str, Any]) -> Any:
        """Act on the trigger's event: sync outputs and defer again, report a loss, or collect the result."""
        job = RemoteJob.from_dict(event["job"])
        if event["status"] == SYNC_DUE:
            self.run.data.periodic_sync(ref.name)
            offset, last_line = int(event.get("offset", 0)), str(event.get("last_line", ""))
            self._defer_following(ref, job, event.get("deadline"), offset=offset, last_line=last_line)
        if event["status"] == EVENT_INSTANCE_LOST:
            raise error_from_event(str(event.get("message")), event.get("error_type"))
        raise_for_error_event(event, "Following the remote job failed")
        outcome = JobOutcome(
            state=event.get("state", event["status"]),
            exit_code=event.get("exit_code"),
            last_line=event.get("last_line", ""),
            offset=int(event.get("offset", 0)),
        )
        return self._complete(ref, job, outcome)

    def _complete(self, ref: InstanceRef, job: RemoteJob, outcome: JobOutcome) -> Any:
        """Turn a finished job into the task's result; forget the handle once collected."""
        self.meter.stop("work")
        try:
            error = outcome_error(outcome, ref.name, job.job_id)
            if error is not None:
                if outcome.state == TIMED_OUT:  # killed at its deadline: what it wrote is evidence
                    with self.meter.phase("upload"):
                        self.run.data.final_sync(ref.name, command_failed=True)
                raise error
            return self.collect(ref, job, int(outcome.exit_code), outcome.last_line)  # type: ignore[arg-type]
        finally:
            if outcome.collected and not outcome.succeeded:
                # A job that succeeded keeps its directory: if this try does not succeed in Airflow after all (a
                # failure after the job, the scheduler's deferral race), the retry collects it instead of running
                # the command again. The next launch on the instance removes finished jobs a week old.
                cleanup_job(self.hook, ref.name, job)
            if outcome.collected:
                self.run.memory.keep_job_handle(None)

    def _from_an_earlier_try(self, job_id: str) -> bool:
        """Whether a trigger event's job is neither this try's nor one this try chose to follow (re-attached to or
        collected): the event was an earlier try's."""
        _ids, current, try_number, _first = self._try_ids()
        handle = self.run.memory.job_handle()  # XCom survives a resumption: it may be the earlier try's
        job = handle.get("job") if handle else None
        followed = (
            RemoteJob.from_dict(job).job_id
            if handle and isinstance(job, dict) and handle.get("try_number", try_number) == try_number
            else None
        )
        return job_id not in {current.job_id, followed}

    def _try_ids(self) -> tuple[dict[str, Any], RemoteJob, int, int]:
        """The job ids' parts, this try's job, this try's number and the first try of its generation."""
        ti = self.run.memory.ti
        map_index = getattr(ti, "map_index", -1)
        ids: dict[str, Any] = {
            "dag_id": ti.dag_id,
            "task_id": ti.task_id,
            "run_id": ti.run_id,
            "map_index": map_index if isinstance(map_index, int) else -1,
        }
        try_number = int(ti.try_number)
        first_try = generation_start(
            try_number=try_number, max_tries=getattr(ti, "max_tries", None), retries=self.retries
        )
        return ids, RemoteJob(generate_job_id(try_number=try_number, **ids)), try_number, first_try

    def _attach_or_launch(self, ref: InstanceRef) -> RemoteJob:
        """This try's job, or an earlier try's still running or finished well (deterministic ids per try)."""
        ids, current, try_number, first_try = self._try_ids()
        earlier = earlier_jobs(try_number=try_number, first_try=first_try, **ids)
        stored = self._stored_job(ref.name)
        if stored is not None and stored.job_id not in {job.job_id for job in earlier} | {current.job_id}:
            earlier.insert(0, EarlierJob(stored.job_id, None, collectable=True))
        self._launching = (ref.name, current)
        return attach_or_launch(self.hook, self.log, ref.name, current, earlier, lambda: self.launch(ref))

    def _stored_job(self, name: str) -> RemoteJob | None:
        """The job handle an earlier try kept in the task state store for ``name``, if any."""
        stored = self.run.memory.stored_job_handle()
        stored_job = stored.get("job") if stored else None
        if stored and stored.get("instance_name") == name and isinstance(stored_job, dict):
            return RemoteJob.from_dict(stored_job)
        return None

    def _defer_following(
        self, ref: InstanceRef, job: RemoteJob, deadline: float | None, *, offset: int = 0, last_line: str = ""
    ) -> None:
        from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger  # triggerer-side code: lazy

        spec = self.spec
        self.deferring = True
        self.defer(
            BrevRemoteJobTrigger.for_policy(
                instance_name=ref.name,
                instance_id=ref.id or None,
                job=job.to_dict(),
                brev_conn_id=spec.compute.brev_conn_id,
                policy=spec.follow.policy(deadline, spec.data.periodic_sync),
                on_kill_action=spec.follow.on_kill_action,
                ephemeral=self.compute.ephemeral,
                offset=offset,
                last_line=last_line,
                not_before=time.time() + deferral_settle_seconds(),
            )
        )
