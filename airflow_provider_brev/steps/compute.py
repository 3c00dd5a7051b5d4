"""The compute port of the step engine: what a compute says, and what the engine hands it.

The step engine (:class:`~airflow_provider_brev.steps.service.StepService`) runs the flow of every GPU step once:
execute and execute_complete, the job handle in the task's memory, per-try job names and the earlier tries'
verdicts (:class:`Tries`), the deadline, deferral, the stale event of an earlier try, ``on_kill``, and the release in
a ``finally``. A :class:`Compute` says only how *it* does each phase:

==================== ============================================ ==========================================
method               Brev instance                                Lepton job
==================== ============================================ ==========================================
``check``            workload checks, S3 locations, a step on an  workload checks, S3 locations
                     existing instance: ``max_run_cost`` from the
                     DAG run's record
``acquire``          the instance (existing, or ephemeral: boot)  nothing: a job is its own compute
``prepare``          the workload's (TAO: login, pull started)    nothing
``run_foreground``   ``detach=False``: run the command, collect   never (``foreground`` is false)
``attach_or_launch`` an earlier try's job, or this try's: inputs  an earlier try's job, or this try's: data
                     synced, the pull waited for, launched        planned in a secret, job submitted
``follow``           the job runner (log, periodic output syncs)  the Lepton job follower (state, log)
``trigger``          ``BrevRemoteJobTrigger``                     ``LeptonJobTrigger``
``resume``           the instance the trigger followed            the job the trigger followed
``outcome``          outputs due: synced, :class:`FollowAgain`;   the job's outcome (queue limit: deleted)
                     instance lost: the typed error
``collect``          final output sync, the workload's verdict    the agent's report, the workload's verdict,
                                                                  ``brev_cost`` (an estimate) reported; a job
                                                                  that did not succeed is deleted
``recover``          a lost instance re-created (then             re-raise
                     ``prepare`` again), else re-raise
``release``          an ephemeral instance deleted (or stopped);  the plan's secret deleted
                     ``brev_cost`` reported
``suspend``          the cost clock kept                          nothing
``on_kill``          an ephemeral instance deleted, else the job  the job stopped (or kept)
                     killed (or kept)
==================== ============================================ ==========================================

The engine calls them in this order: ``check``, then ``acquire``, ``prepare``, ``attach_or_launch`` (or
``run_foreground``), ``follow`` or ``trigger`` -- after the deferral ``resume`` and ``outcome`` -- and ``collect``;
``recover`` for an error after ``acquire``; ``release`` (or ``suspend`` when it defers) in a ``finally``; ``on_kill``
from the kill's thread.

``own_job`` and ``job_of`` name jobs for the engine's stale-event rule; ``event_fields`` are what every event of
the compute's trigger carries. What a job handle holds besides the engine's ``deadline`` and ``try_number`` is the
compute's (JSON, no secret). **Cost**: the Brev compute meters its phases (:mod:`.metering`) and reports
``brev_cost``; a Lepton job reports it from the time its follower saw the job starting and running, priced per
resource shape, always marked an estimate (``estimate``, ``price_source``): Lepton's API returns no price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_brev.core.jobs.attempts import generation_start

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from airflow.triggers.base import BaseTrigger

    from airflow_provider_brev.exceptions import BrevError
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: A job handle: what the task remembers of the job it follows (JSON; kept in :class:`TaskMemory`).
Handle = dict[str, Any]


@dataclass(frozen=True)
class Tries:
    """Which try of which task instance runs: what per-try job names are made of, and its generation.

    :param dag_id: the DAG.
    :param task_id: the task.
    :param run_id: the DAG run.
    :param map_index: the map index (``-1``: not mapped).
    :param try_number: this try (1-based).
    :param first_try: the first try of this generation (since the task instance was last cleared; see
        :func:`~airflow_provider_brev.core.jobs.attempts.generation_start`).
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int
    first_try: int

    @classmethod
    def of(cls, ti: Any, retries: int | None) -> Tries:
        """The try a task instance ``ti`` runs, of a task with ``retries``."""
        map_index = getattr(ti, "map_index", -1)
        try_number = int(ti.try_number)
        first_try = generation_start(try_number=try_number, max_tries=getattr(ti, "max_tries", None), retries=retries)
        return cls(
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=map_index if isinstance(map_index, int) else -1,
            try_number=try_number,
            first_try=first_try,
        )

    @property
    def ids(self) -> dict[str, Any]:
        """The task instance's parts of a job name (every try's alike)."""
        return {"dag_id": self.dag_id, "task_id": self.task_id, "run_id": self.run_id, "map_index": self.map_index}


@dataclass(frozen=True)
class FollowAgain:
    """An event that is not the job's end (Brev: the outputs were due, and synced): the task defers again and the
    triggerer follows on from ``resume`` (the trigger's resume point, e.g. the log offset).

    :param resume: what the next trigger starts from.
    """

    resume: dict[str, Any]


@dataclass(frozen=True)
class StepTask:
    """What a compute gets from the task it runs for.

    :param operator: the operator (a Brev compute takes its hook and its upstream tasks; ``None`` outside a DAG).
    :param log: the task's logger.
    :param memory: the task's memory.
    :param killed: returns ``True`` once the task was killed.
    """

    operator: Any
    log: Any
    memory: TaskMemory
    killed: Callable[[], bool]


class Outcome(Protocol):
    """How a followed job ended, as far as the engine needs to know."""

    @property
    def collected(self) -> bool:
        """The job will not run again and its result has been read (the handle is forgotten)."""


class Compute(Protocol):
    """Where a step runs and how (see the module docstring); built as ``Compute(spec, workload, task)``."""

    #: The fields every event of the compute's trigger carries.
    event_fields: tuple[str, ...]

    @property
    def foreground(self) -> bool:
        """The command runs in the foreground of this call (:meth:`run_foreground`): there is no job to follow."""

    def check(self) -> None:
        """Before anything is created, submitted or paid for: raise a typed error when the step must not start."""

    def mask(self) -> None:
        """Register the workload's secret values with Airflow's masker (a resumed task runs in a new process)."""

    def acquire(self) -> None:
        """The compute to run on, ready."""

    def prepare(self) -> None:
        """Before a launch or a re-attach (and again after a recovery)."""

    def run_foreground(self, deadline: float | None) -> Any:
        """Run the command in the foreground and return the task's result (only when :attr:`foreground`)."""

    def own_job(self, tries: Tries) -> str:
        """The name of this try's own job."""

    def job_of(self, record: Mapping[str, Any]) -> str | None:
        """The name of the job an event or a handle is about."""

    def attach_or_launch(self, tries: Tries) -> Handle:
        """The job this try follows: an earlier try's (running: re-attach; succeeded in this generation: collect)
        or this try's own, launched now (nothing after a kill); returns its handle."""

    def follow(self, handle: Handle, deadline: float | None) -> Outcome:
        """Follow the job on the worker until it ended or ``deadline`` passed (it is then stopped)."""

    def trigger(
        self, handle: Handle, deadline: float | None, *, not_before: float, resume: dict[str, Any]
    ) -> BaseTrigger:
        """The trigger that follows the job from the triggerer (``resume``: a :class:`FollowAgain`'s point)."""

    def resume(self, event: dict[str, Any]) -> Handle:
        """After a deferral: the handle of the job the trigger followed."""

    def outcome(self, handle: Handle, event: dict[str, Any]) -> Outcome | FollowAgain:
        """The trigger's event as the job's outcome (raise its typed error), or :class:`FollowAgain`."""

    def collect(self, handle: Handle, outcome: Any) -> Any:
        """The job ended: judge it (raise on failure) and return the task's result."""

    def recover(self, error: BrevError) -> None:
        """``error`` happened after acquire: repair the compute (the step runs again from :meth:`prepare`) or
        re-raise ``error``."""

    def release(self) -> None:
        """The try ended without deferring: release what it holds."""

    def suspend(self) -> None:
        """The try defers: keep what the resumed task needs."""

    def on_kill(self, handle: Handle | None) -> None:
        """The task was killed (fast, in a thread): stop or release what it runs; ``handle``: the job it follows."""
