"""The Lepton compute: one step as a DGX Cloud Lepton job, behind the step engine's port.

:class:`LeptonJobCompute` implements :class:`~airflow_provider_brev.steps.compute.Compute` for a Lepton job, which is
its own compute (no instance to acquire, prepare or recover); the engine (:mod:`airflow_provider_brev.steps.service`)
runs its phases as it runs a Brev instance's:

========== ================================================================ =====================================
phase      what                                                             on a kill
========== ================================================================ =====================================
check      the workload's and the data's checks (S3 locations listable)     --
acquire    nothing (the job is submitted at launch)                         --
launch     attach to this try's job or an earlier try's (running: re-attach; nothing is submitted
           succeeded: collect), else plan the data (presigned requests),
           put the plan in a workspace secret and submit this try's job
           (deterministic name per try: :mod:`~airflow_provider_brev.core.lepton.names`)
follow     the job's state and log into the task log, the queue limit and  the job is stopped (or kept:
           the deadline -- on the worker, or deferred to the triggerer      ``on_kill_action="keep"``)
           (:class:`~airflow_provider_brev.triggers.lepton.LeptonJobTrigger`)
collect    the agent's report (exit code, uploads, TAO's report), the       --
           workload's verdict, what the outputs hold, the log's end
release    the plan's secret is deleted; an ended job that did not succeed  --
           is deleted (a succeeded one stays until its TTL: a retry may
           collect it)
========== ================================================================ =====================================

A failure is not recovered (``recover`` re-raises: a retry submits a new job). The job handle the engine keeps in the
task's memory holds its name and log cursor (``job``, ``since_ns``). When the job ended, the step logs one line on how
it ended and reports ``brev_cost`` as a Brev step does -- an estimate: the time the follower saw the job starting
(``boot``) and running (``work``), priced per resource shape (:mod:`~airflow_provider_brev.core.lepton.pricing`:
Lepton's API gives no price).
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import cost_line, step_cost
from airflow_provider_brev.core.jobs.attempts import COLLECT, REATTACH, RELAUNCH, SUPERSEDED
from airflow_provider_brev.core.lepton.agent import (
    AGENT_ENV,
    PLAN_ENV,
    agent_source,
    encode_plan,
    job_command,
    job_plan,
)
from airflow_provider_brev.core.lepton.follower import NS, LeptonJobFollower, LeptonOutcome, outcome_error
from airflow_provider_brev.core.lepton.names import TryJob, earlier_jobs, job_name, secret_name
from airflow_provider_brev.core.lepton.pricing import shape_price
from airflow_provider_brev.core.lepton.states import SUCCEEDED, earlier_job_verdict, job_phase
from airflow_provider_brev.core.secrets import redaction_fragments
from airflow_provider_brev.cost.ledger import CostLedger
from airflow_provider_brev.exceptions import BrevTaskKilledError, LeptonJobExistsError, LeptonResourcesUnavailableError
from airflow_provider_brev.hooks.driver import drive
from airflow_provider_brev.hooks.lepton import LeptonHook
from airflow_provider_brev.staging.lepton_plan import LeptonData, url_lifetime
from airflow_provider_brev.utils.events import raise_for_error_event

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow.triggers.base import BaseTrigger

    from airflow_provider_brev.exceptions import BrevError
    from airflow_provider_brev.steps.compute import Handle, StepTask, Tries
    from airflow_provider_brev.steps.lepton_spec import LeptonStepSpec
    from airflow_provider_brev.steps.lepton_workload import LeptonWorkload

#: Seconds of log before a job's creation that a follower reads (clock skew between worker and platform).
LOG_SLACK_SECONDS = 60


class LeptonJobCompute:
    """A step as one Lepton job (see the module docstring).

    :param spec: the checked parameters.
    :param workload: what runs.
    :param task: the task (logger, memory, kill flag).
    :param hook: the Lepton hook (default: one for the spec's ``lepton_conn_id``).
    """

    event_fields: tuple[str, ...] = ("job",)
    #: A Lepton job is always followed (there is no foreground command).
    foreground = False

    def __init__(
        self, spec: LeptonStepSpec, workload: LeptonWorkload, task: StepTask, *, hook: LeptonHook | None = None
    ) -> None:
        self.spec = spec
        self.workload = workload
        self.hook = hook if hook is not None else LeptonHook(spec.job.lepton_conn_id)
        self.log = task.log
        self.memory = task.memory
        self.killed = task.killed
        self.data = LeptonData(
            spec.data.inputs,
            spec.data.outputs,
            aws_conn_id=spec.data.aws_conn_id,
            url_expires_in=url_lifetime(queue_timeout=spec.job.queue_timeout, timeout=spec.follow.timeout),
        )
        self.current: str | None = None  # the job this try follows (or is submitting)
        self.secret: str | None = None  # the plan's secret this try created

    # -- check, acquire, prepare -------------------------------------------------------------------
    def check(self) -> None:
        self.workload.check()
        self.workload.mask()
        self.hook.config  # noqa: B018 - the connection (its shape_prices too) is checked before anything is submitted
        self.data.check_locations()  # every S3 location reachable, before anything is submitted

    def mask(self) -> None:
        self.workload.mask()

    def redact_fragments(self) -> list[str]:
        """What of the workload's secret values the job's output must not show (the rule of Brev steps)."""
        return redaction_fragments(self.workload.secrets())

    def acquire(self) -> None:
        """Nothing: the job is its own compute, submitted at launch."""

    def prepare(self) -> None:
        """Nothing: the job's container prepares itself (its agent downloads the inputs)."""

    def run_foreground(self, deadline: float | None) -> Any:
        raise NotImplementedError("A Lepton step is always a job the step follows.")

    # -- launch ------------------------------------------------------------------------------------
    def own_job(self, tries: Tries) -> str:
        return job_name(try_number=tries.try_number, **tries.ids)

    def job_of(self, record: Mapping[str, Any]) -> str | None:
        job = record.get("job")
        return str(job) if job else None

    def attach_or_launch(self, tries: Tries) -> Handle:
        """The job this try follows and where its log starts: an earlier try's (re-attached or collected) or this
        try's own (submitted now, or found submitted by this try before its worker was lost)."""
        current = self.own_job(tries)
        earlier = earlier_jobs(try_number=tries.try_number, first_try=tries.first_try, **tries.ids)
        for candidate in [TryJob(current, tries.try_number, collectable=True), *earlier]:
            found = self.hook.get_job(candidate.name)
            verdict = earlier_job_verdict(job_phase(found), collectable=candidate.collectable)
            mine = candidate.name == current
            if verdict == REATTACH or (mine and verdict in (COLLECT, RELAUNCH)):
                self.log.info(
                    "Lepton job %s (try %d) exists (%s): following it, not submitting again.",
                    candidate.name,
                    candidate.try_number,
                    job_phase(found),
                )
                return self._follow_existing(candidate.name, found)
            if verdict == COLLECT:
                self.log.warning(
                    "Lepton job %s of an earlier try succeeded, but that try did not succeed in Airflow: collecting "
                    "its result instead of running it again.",
                    candidate.name,
                )
                return self._follow_existing(candidate.name, found)
            if verdict in (SUPERSEDED, RELAUNCH):
                self.log.info("Lepton job %s of an earlier try ended (%s): deleting it.", candidate.name, verdict)
                self._delete(candidate.name)
        return {"job": self.submit(current), "since_ns": time.time_ns() - LOG_SLACK_SECONDS * NS}

    def submit(self, name: str) -> str:
        """Plan the data, put the plan in a workspace secret, submit this try's job (nothing after a kill)."""
        launch = self.workload.launch()
        inputs = [*self.data.input_plan(), *launch.inputs]
        plan = job_plan(
            command=launch.command,
            secret_env=launch.secret_env,
            inputs=inputs,
            outputs=self.data.output_plan(),
            files=launch.files,
            report=launch.report,
            sync_interval=self.spec.data.sync_interval,
        )
        encoded = encode_plan(plan)
        if self.killed():
            raise BrevTaskKilledError("The task was killed before its Lepton job was submitted: not submitting it.")
        secret = secret_name(name)
        self.hook.create_secret(secret, encoded)
        self.secret = secret
        self.current = name
        body = self.spec.job.body(
            name=name,
            image=launch.image,
            command=job_command(),
            env={**(launch.env or {}), AGENT_ENV: agent_source()},
            secret_env_refs={PLAN_ENV: secret},
            labels={"airflow-provider-brev": "step"},
        )
        try:
            self.hook.create_job(body)
        except LeptonJobExistsError:
            self.log.info("Lepton job %s exists already (this try submitted it before): following it.", name)
            return name
        self.log.info(
            "Submitted Lepton job %s (%s, %d input file(s)).", name, self.spec.job.resource_shape, len(inputs)
        )
        self.workload.submitted(name, self.memory, self.log)
        if self.killed():  # on_kill may have looked before the job existed
            with contextlib.suppress(Exception):
                self.hook.stop_job(name)
            raise BrevTaskKilledError(f"The task was killed while its Lepton job {name} was submitted: stopped it.")
        return name

    def _follow_existing(self, name: str, job: dict[str, Any] | None) -> Handle:
        self.current = name
        created_ms = int(((job or {}).get("metadata") or {}).get("created_at") or 0)
        since = created_ms * 1_000_000 - LOG_SLACK_SECONDS * NS if created_ms else time.time_ns() - 86400 * NS
        return {"job": name, "since_ns": since}

    # -- follow ------------------------------------------------------------------------------------
    def follow(self, handle: Handle, deadline: float | None) -> LeptonOutcome:
        """Follow the job on the worker; one stopped in the queue (it never ran) is deleted."""
        job = self.current = str(handle["job"])
        policy = self.spec.follow.policy(deadline, self.spec.job.queue_timeout)
        machine = LeptonJobFollower(
            policy, job=job, since_ns=int(handle["since_ns"]), redact_fragments=self.redact_fragments()
        )
        try:
            return drive(
                machine,
                lambda action: self.hook.perform(job, action),
                log=self.log,
                interrupted=lambda: BrevTaskKilledError("The task was killed.") if self.killed() else None,
            )
        except LeptonResourcesUnavailableError:
            self._delete(job)  # stopped in the queue: it never ran
            raise

    def trigger(
        self, handle: Handle, deadline: float | None, *, not_before: float, resume: dict[str, Any]
    ) -> BaseTrigger:
        from airflow_provider_brev.triggers.lepton import LeptonJobTrigger  # triggerer-side code: lazy

        spec = self.spec
        return LeptonJobTrigger.for_policy(
            policy=spec.follow.policy(deadline, spec.job.queue_timeout),
            job=str(handle["job"]),
            lepton_conn_id=spec.job.lepton_conn_id,
            since_ns=int(handle["since_ns"]),
            on_kill_action=spec.follow.on_kill_action,
            try_number=int(handle["try_number"]),
            secret=self.secret,
            not_before=not_before,
        )

    def resume(self, event: dict[str, Any]) -> Handle:
        self.current = str(event["job"])
        return {"job": self.current}

    def outcome(self, handle: Handle, event: dict[str, Any]) -> LeptonOutcome:
        """The job's outcome, or its error (a job stopped in the queue, which never ran, is deleted)."""
        if event.get("error_type") == LeptonResourcesUnavailableError.__name__:
            self._delete(str(handle["job"]))  # stopped in the queue: it never ran
        raise_for_error_event(event, "Following the Lepton job failed")
        return LeptonOutcome.from_dict(event["outcome"])

    # -- collect -----------------------------------------------------------------------------------
    def collect(self, handle: Handle, outcome: LeptonOutcome) -> dict[str, Any]:
        """The job's result: the workload's verdict on the agent's report, what the outputs hold, the log's end;
        one line on how it ended and its estimated cost (``brev_cost``), also when it failed."""
        job = str(handle["job"])
        outcome = outcome.redacted(self.redact_fragments())  # the agent redacted them; an older job's agent may not
        self.log.info("%s", outcome.summary(job))
        self._report_cost(job, outcome)
        try:
            error = outcome_error(outcome, job)
            if error is not None:
                raise error
            result = self.workload.result(job, outcome, self.memory)
            report = outcome.report
            if self.data.inputs or self.data.outputs:
                result.update(
                    outputs=self.data.output_map(),
                    sync={
                        "downloaded": report.downloaded if report else 0,
                        "uploaded": report.uploaded if report else 0,
                        "upload_failures": list(report.upload_failures) if report else [],
                        "outputs": self.data.output_report(),
                    },
                )
            return result
        finally:
            if outcome.phase != SUCCEEDED:  # captured: status and the log's end are in the task log and the error
                self._delete(job)

    def _report_cost(self, job: str, outcome: LeptonOutcome) -> None:
        """Tell ``brev_cost`` -- the job's billed time as the follower saw it, priced per resource shape
        (:func:`~airflow_provider_brev.core.lepton.pricing.shape_price`), always an estimate -- and log its line.
        Never raises: a report is not worth failing a task for."""
        try:
            price = shape_price(
                self.spec.job.resource_shape,
                step_prices=self.spec.shape_prices,
                connection_prices=self.hook.config.shape_prices,
            )
            cost = step_cost(
                instance_name=job,
                instance_type=price.shape,
                price_per_hour=price.price_per_hour,
                phases=outcome.seconds,
            )
        except Exception as err:
            self.log.warning("Could not estimate the cost of this task (%s: %s).", type(err).__name__, err)
            return
        cost.update(estimate=True, price_source=price.source)
        CostLedger(self.memory).tell_cost(cost)
        self.log.info("%s, %s.", cost_line(cost).removesuffix("."), price.note())

    # -- recover, release, kill --------------------------------------------------------------------
    def recover(self, error: BrevError) -> None:
        """Nothing to repair: a retry submits a new job."""
        raise error

    def release(self) -> None:
        """The try ends (not deferred): the plan's secret goes (the job has read it, or will never run)."""
        secret = self.secret or (secret_name(self.current) if self.current else None)
        if secret:
            with contextlib.suppress(Exception):
                self.hook.delete_secret(secret)

    def suspend(self) -> None:
        """Nothing to keep: the trigger carries the job and its log cursor, the secret stays for the job."""

    def on_kill(self, handle: Handle | None) -> None:
        """Stop the job (or keep it: ``on_kill_action="keep"``)."""
        self.hook.stop_calls()
        job = self.current or (handle or {}).get("job")
        if not job:
            return
        if self.spec.follow.on_kill_action != "kill":
            self.log.info("Task killed: keeping Lepton job %s running (on_kill_action='keep').", job)
            return
        self.log.warning("Task killed: stopping Lepton job %s.", job)
        with contextlib.suppress(Exception):
            self.hook.stop_job(str(job))

    def _delete(self, job: str) -> None:
        with contextlib.suppress(Exception):
            self.hook.delete_job(job)
