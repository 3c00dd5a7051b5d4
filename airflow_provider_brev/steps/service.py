"""The step service: one GPU step, run as explicit phases over a compute and a workload.

The step operators (:mod:`airflow_provider_brev.operators.step`, :mod:`airflow_provider_brev.operators.lepton`) are
templating, a spec and ``defer``; they name their compute (:data:`COMPUTES`), and the flow happens here, once for
every compute (the Kubernetes provider's ``PodManager`` idea), phase by phase:

========== ============================================================ =========================================
phase      what the engine does                                         what the compute does (:mod:`.compute`)
========== ============================================================ =========================================
check      first, before anything is created or paid for                the workload's and the data's checks
acquire    --                                                           the instance (Brev); nothing (Lepton)
prepare    before every launch, again after a recovery                  TAO's login and background pull (Brev)
launch     hands it this try's :class:`~.compute.Tries` (deterministic   attach to an earlier try's job (the
           names, the generation); keeps the job handle in the task's    verdicts of ``core/jobs/attempts.py``)
           memory before any wait                                        or launch this try's
follow     on the worker, or deferred (deadline, settling time); an     the job's log, output syncs, deadline
           event an earlier try deferred on runs this try from the start
collect    forgets the handle once the job was collected                the verdict, the outputs
release    in a ``finally``, unless the task deferred (then ``suspend``)  what the compute holds
========== ============================================================ =========================================

A failure after ``acquire`` goes to the compute's ``recover``, which repairs the compute (a lost Brev instance is
re-created) and the step runs again from ``prepare``, or re-raises. ``on_kill`` hands the compute the job handle.
What the task remembers across tries and deferrals is in its :class:`~airflow_provider_brev.utils.task_memory.TaskMemory`
(the job handle: :class:`~airflow_provider_brev.jobs.handle.KeptJobHandle`).

**Adding a compute** is a module implementing :class:`~.compute.Compute` (with its spec, workload and trigger) and one
line in :data:`COMPUTES`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_provider_brev._compat import deferral_settle_seconds
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.jobs.handle import KeptJobHandle
from airflow_provider_brev.steps.brev_compute import BrevInstanceCompute
from airflow_provider_brev.steps.compute import FollowAgain, Tries
from airflow_provider_brev.steps.lepton import LeptonJobCompute
from airflow_provider_brev.utils.events import validate_event

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.triggers.base import BaseTrigger

    from airflow_provider_brev.steps.compute import Compute, Handle, Outcome, StepTask
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: The computes a step can run on, by the name its operator gives (``compute_kind``): each is built as
#: ``Compute(spec, workload, task)`` from the operator's checked spec and workload.
COMPUTES: dict[str, Callable[..., Compute]] = {
    "brev": BrevInstanceCompute,
    "lepton": LeptonJobCompute,
}


class StepService:
    """Run one step (see the module docstring).

    :param compute_kind: the compute's name in :data:`COMPUTES`.
    :param spec: the checked parameters (its ``follow`` has ``timeout`` and ``deferrable``).
    :param workload: what runs.
    :param task: what the task gives the compute (operator, logger, memory, kill flag).
    :param retries: the task's ``retries`` (tries since the last clear are one generation).
    :param defer: defers the task with a trigger (the operator's ``defer``; it does not return).
    """

    def __init__(
        self,
        compute_kind: str,
        *,
        spec: Any,
        workload: Any,
        task: StepTask,
        retries: int | None,
        defer: Callable[[BaseTrigger], NoReturn],
    ) -> None:
        self.spec = spec
        self.task = task
        self.retries = retries
        self.defer = defer
        self.compute: Compute = COMPUTES[compute_kind](spec, workload, task)
        self.deferring = False
        self._handle: Handle | None = None

    @property
    def log(self) -> Any:
        return self.task.log

    @property
    def memory(self) -> TaskMemory:
        return self.task.memory

    @property
    def kept_handle(self) -> KeptJobHandle:
        """The handle of the job the task follows, in its memory."""
        return KeptJobHandle(self.memory)

    # -- entry points ------------------------------------------------------------------------------
    def execute(self) -> Any:
        """Run the step from the start (``execute``)."""
        self.compute.check()
        timeout = self.spec.follow.timeout
        deadline = None if timeout is None else time.time() + timeout
        try:
            self.compute.acquire()
            return self._recovering(lambda: self._from_prepare(deadline), deadline)
        finally:
            self._end()

    def execute_complete(self, event: dict[str, Any] | None) -> Any:
        """Resume after a deferral with the trigger's ``event`` (``execute_complete``)."""
        compute = self.compute
        event = validate_event(event, *compute.event_fields)
        if self._from_an_earlier_try(event):
            self.log.warning(
                "Resumed with the event of job %s, which an earlier try deferred on (Airflow 3.0 hands a retry its "
                "previous try's deferral): running this try from the start, which collects that job if it "
                "succeeded, re-attaches to it if it runs, and launches this try's otherwise.",
                compute.job_of(event),
            )
            return self.execute()
        compute.mask()  # this worker process never saw them
        handle = compute.resume(event)
        deadline = event.get("deadline")
        try:
            return self._recovering(lambda: self._from_event(handle, event, deadline), deadline)
        finally:
            self._end()

    def on_kill(self) -> None:
        """Undo what killing the task leaves behind (fast: Airflow allows about 5 s); runs in a thread."""
        self.compute.on_kill(self._handle or self.kept_handle.read())

    # -- the flow ----------------------------------------------------------------------------------
    def _recovering(self, step: Callable[[], Any], deadline: float | None) -> Any:
        """Run ``step``; when it fails, the compute recovers (and the step runs again from ``prepare``) or
        re-raises."""
        while True:
            try:
                return step()
            except BrevError as err:
                self.compute.recover(err)
                step = lambda: self._from_prepare(deadline)  # noqa: E731

    def _from_prepare(self, deadline: float | None) -> Any:
        """Prepare, launch (or re-attach), follow and collect."""
        compute = self.compute
        compute.prepare()
        if compute.foreground:
            return compute.run_foreground(deadline)
        tries = self._tries()
        handle = compute.attach_or_launch(tries)
        self._handle = {**handle, "deadline": deadline, "try_number": tries.try_number}
        self.kept_handle.keep(self._handle)
        return self._complete(self._handle, self._follow(self._handle, deadline))

    def _follow(self, handle: Handle, deadline: float | None) -> Outcome:
        """Follow the job on the worker (or defer: the triggerer follows it)."""
        if self.spec.follow.deferrable:
            self._defer(handle, deadline)
        return self.compute.follow(handle, deadline)

    def _from_event(self, handle: Handle, event: dict[str, Any], deadline: float | None) -> Any:
        """Act on the trigger's event: follow on from the triggerer, or collect the result (or raise its error)."""
        outcome = self.compute.outcome(handle, event)
        if isinstance(outcome, FollowAgain):
            self._defer(handle, deadline, outcome.resume)
        return self._complete(handle, outcome)

    def _complete(self, handle: Handle, outcome: Outcome) -> Any:
        """Turn a finished job into the task's result; forget the handle once collected."""
        try:
            return self.compute.collect(handle, outcome)
        finally:
            if outcome.collected:
                self.kept_handle.keep(None)

    def _defer(self, handle: Handle, deadline: float | None, resume: dict[str, Any] | None = None) -> NoReturn:
        self.deferring = True
        not_before = time.time() + deferral_settle_seconds()
        self.defer(self.compute.trigger(handle, deadline, not_before=not_before, resume=resume or {}))

    def _end(self) -> None:
        """The try ends: release what the compute holds -- unless it defers (the resumed task goes on)."""
        if self.deferring:
            self.compute.suspend()
            return
        self.compute.release()

    # -- tries -------------------------------------------------------------------------------------
    def _tries(self) -> Tries:
        return Tries.of(self.memory.ti, self.retries)

    def _from_an_earlier_try(self, event: dict[str, Any]) -> bool:
        """Whether a trigger event's job is neither this try's nor one this try chose to follow (re-attached to or
        collected): the event was an earlier try's."""
        tries, compute = self._tries(), self.compute
        handle = self.kept_handle.read()  # XCom survives a resumption: it may be the earlier try's
        followed = (
            compute.job_of(handle)
            if handle and handle.get("try_number", tries.try_number) == tries.try_number
            else None
        )
        return compute.job_of(event) not in {compute.own_job(tries), followed}
