"""The one job runner: attach-or-launch a detached remote job and follow it, on a worker or in the triggerer.

Every decision lives in the pure :class:`~airflow_provider_brev.core.jobs.follower.JobFollower`; this module only
does I/O around it:

* :meth:`JobRunner.follow` (sync, the operators on a worker) and :meth:`JobRunner.afollow` (async,
  :class:`~airflow_provider_brev.triggers.brev.BrevRemoteJobTrigger`) run the machine with the generic drivers of
  :mod:`airflow_provider_brev.hooks.driver` and perform its calls (``poll_job`` / ``apoll_job``, ``kill_job`` /
  ``akill_job``) -- so the worker and the triggerer cannot drift apart. When the machine says the step's outputs are
  due (:class:`~airflow_provider_brev.core.jobs.follower.SyncOutputs`), the sync runner calls its ``on_sync``
  callback and goes on; the async one answers that it cannot sync here, and the machine ends with a ``sync_due``
  outcome (the triggerer holds no AWS credentials: the worker syncs, then defers again);
* :func:`attach_or_launch` finds a job an earlier try left running (deterministic per-try job ids, plus a
  handle from the task state store), re-attaches to it or collects it, and otherwise launches this try's job
  (the launch guard on the instance makes a second launch of the same id start nothing).

Used by :class:`~airflow_provider_brev.operators.exec.BrevExecOperator`, the TAO operators
(:mod:`airflow_provider_brev.operators.tao`) and the remote-job trigger.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_brev.core.jobs.attempts import COLLECT, REATTACH, RELAUNCH, SUPERSEDED, earlier_job_verdict
from airflow_provider_brev.core.jobs.follower import FollowPolicy, JobFollower, JobOutcome, KillJob, PollJob, Synced
from airflow_provider_brev.core.jobs.remote import RemoteJob
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.hooks.driver import adrive, drive

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from airflow_provider_brev.core.jobs.attempts import EarlierJob
    from airflow_provider_brev.core.jobs.remote import LaunchResult, PollResult
    from airflow_provider_brev.core.protocol.machine import Call


class JobLog(Protocol):
    """The logger calls the runner makes (a stdlib ``logging.Logger`` or Airflow's structlog logger)."""

    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def log(self, level: int, event: Any, *args: Any, **kw: Any) -> Any: ...


class JobHook(Protocol):
    """The hook methods the runner uses (:class:`~airflow_provider_brev.hooks.brev.BrevHook` has them)."""

    def poll_job(
        self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = ..., wait: float = ...
    ) -> PollResult: ...

    async def apoll_job(
        self, name: str, job: RemoteJob, *, offset: int, max_bytes: int = ..., wait: float = ...
    ) -> PollResult: ...

    def kill_job(self, name: str, job: RemoteJob, *, grace_seconds: float = ..., timeout: float = ...) -> str: ...

    async def akill_job(
        self, name: str, job: RemoteJob, *, grace_seconds: float = ..., timeout: float = ...
    ) -> str: ...


class JobLauncher(JobHook, Protocol):
    """What :func:`attach_or_launch` and :meth:`JobRunner.cleanup` also need."""

    def launch_job(
        self,
        name: str,
        job: RemoteJob,
        command: str,
        *,
        env: dict[str, str] | None = ...,
        cwd: str | None = ...,
        secret_env: dict[str, str] | None = ...,
        earlier_jobs: Sequence[RemoteJob] = ...,
    ) -> LaunchResult: ...

    def cleanup_job(self, name: str, job: RemoteJob) -> str: ...


class JobRunner:
    """Follow one detached job with the shared :class:`JobFollower` decisions.

    :param hook: the Brev hook (or anything with its job methods).
    :param instance_name: the instance the job runs on.
    :param job: the job's handle.
    :param policy: poll interval, chunk size, failure budget, deadline, progress regex.
    :param log: where the job's lines and the runner's messages go (the task's or the trigger's logger).
    :param offset: byte offset already shown (resume point).
    :param last_line: the last non-empty line shown so far.
    :param clock: the wall clock (epoch seconds), for the deadline.
    :param next_sync_at: when the next periodic output sync is due (epoch seconds; policy ``sync_interval``).
    :param hold_first: the first poll waits on the instance for the job's end like every later one (the triggerer).
    """

    def __init__(
        self,
        hook: JobHook,
        instance_name: str,
        job: RemoteJob,
        policy: FollowPolicy,
        log: JobLog,
        *,
        offset: int = 0,
        last_line: str = "",
        clock: Callable[[], float] = time.time,
        next_sync_at: float | None = None,
        hold_first: bool = False,
    ) -> None:
        self.hook = hook
        self.instance_name = instance_name
        self.job = job
        self.log = log
        self.clock = clock
        self.machine = JobFollower(
            policy,
            instance_name=instance_name,
            job_id=job.job_id,
            offset=offset,
            last_line=last_line,
            next_sync_at=next_sync_at,
            hold_first=hold_first,
        )

    @property
    def offset(self) -> int:
        """Bytes of log shown so far (where a resumed follower starts)."""
        return self.machine.offset

    def _call(self, action: Call, on_sync: Callable[[], Any] | None) -> PollResult | str | Synced:
        if isinstance(action, PollJob):
            return self.hook.poll_job(
                self.instance_name, self.job, offset=action.offset, max_bytes=action.max_bytes, wait=action.wait
            )
        if isinstance(action, KillJob):
            return self.hook.kill_job(self.instance_name, self.job)
        if on_sync is None:
            return Synced(deferred=True)
        on_sync()
        return Synced()

    async def _acall(self, action: Call) -> PollResult | str | Synced:
        if isinstance(action, PollJob):
            return await self.hook.apoll_job(
                self.instance_name, self.job, offset=action.offset, max_bytes=action.max_bytes, wait=action.wait
            )
        if isinstance(action, KillJob):
            return await self.hook.akill_job(self.instance_name, self.job)
        return Synced(deferred=True)  # the triggerer holds no AWS credentials: the worker syncs

    def follow(
        self, sleep: Callable[[float], Any] = time.sleep, on_sync: Callable[[], Any] | None = None
    ) -> JobOutcome:
        """Follow the job until it ended and its whole log was emitted (the sync driver).

        :param on_sync: called when the step's outputs are due (it must not raise); without it the async
            runner's rule applies: stop with a :data:`~airflow_provider_brev.core.jobs.follower.SYNC_DUE` outcome.
        """
        return drive(
            self.machine, lambda action: self._call(action, on_sync), log=self.log, clock=self.clock, sleep=sleep
        )

    async def afollow(self, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> JobOutcome:
        """Async twin of :meth:`follow` (the triggerer's driver): the same decisions, awaited I/O; when outputs
        are due it stops with a :data:`~airflow_provider_brev.core.jobs.follower.SYNC_DUE` outcome."""
        return await adrive(self.machine, self._acall, log=self.log, clock=self.clock, sleep=sleep)


def cleanup_job(hook: JobLauncher, instance_name: str, job: RemoteJob) -> None:
    """Remove a collected job's directory on the instance, best-effort."""
    with contextlib.suppress(BrevError):
        hook.cleanup_job(instance_name, job)


@dataclass(frozen=True)
class JobLaunch:
    """What a launch starts on the instance.

    :param command: the shell command (run with ``bash -c``).
    :param env: plain environment variables (on the remote command line).
    :param secret_env: secret environment variables (delivered in a 0600 file, never on a command line).
    :param cwd: remote working directory.
    """

    command: str
    env: dict[str, str] | None = None
    secret_env: dict[str, str] | None = None
    cwd: str | None = None


def attach_or_launch(
    hook: JobLauncher,
    log: JobLog,
    instance_name: str,
    current: RemoteJob,
    earlier: Sequence[EarlierJob],
    prepare_launch: Callable[[], JobLaunch],
) -> RemoteJob:
    """The job this try follows: an earlier try's job still running or finished well, else this try's own.

    :param current: this try's job (deterministic id: a crashed worker's re-run of the same try re-attaches
        through the launch guard).
    :param earlier: jobs earlier tries may have left on the instance, most likely first
        (:func:`~airflow_provider_brev.core.jobs.attempts.earlier_jobs`).
    :param prepare_launch: called right before this try's job is launched (not when re-attaching to or collecting
        an earlier try's job), e.g. to sync the step's inputs; returns what to launch (its secret values are
        delivered in a 0600 file by the hook, never on a command line).
    """
    for earlier_job in earlier:
        if earlier_job.job_id == current.job_id:
            continue
        job = RemoteJob(earlier_job.job_id, current.base_dir)
        poll = hook.poll_job(instance_name, job, offset=0, max_bytes=1)
        verdict = earlier_job_verdict(poll, collectable=earlier_job.collectable)
        if verdict == REATTACH:
            log.info("Re-attaching to job %s of an earlier try, still running: not launching again.", job.job_id)
            return job
        if verdict == COLLECT:
            log.warning(
                "Job %s of an earlier try finished successfully, but that try did not succeed in Airflow (its "
                "worker was lost, the task failed after the job ended, or Airflow's scheduler failed the try in a "
                "race with its deferral, apache/airflow#72716): collecting its result instead of running the "
                "command again.",
                job.job_id,
            )
            return job
        if verdict == SUPERSEDED:
            log.info(
                "Job %s succeeded before this task was cleared: running the command again as %s.",
                job.job_id,
                current.job_id,
            )
            cleanup_job(hook, instance_name, job)
        if verdict == RELAUNCH:
            log.info(
                "Job %s of an earlier try ended (%s, exit code %s): relaunching as %s.",
                job.job_id,
                poll.state,
                poll.exit_code,
                current.job_id,
            )
            cleanup_job(hook, instance_name, job)
    launch = prepare_launch()
    jobs = [RemoteJob(earlier_job.job_id, current.base_dir) for earlier_job in earlier]
    started = hook.launch_job(
        instance_name,
        current,
        launch.command,
        env=launch.env,
        cwd=launch.cwd,
        secret_env=launch.secret_env,
        earlier_jobs=jobs,
    )
    if started.launched:
        log.info("Launched job %s on %s (pid %s).", current.job_id, instance_name, started.pid)
    else:
        log.info("Job %s already exists on %s (this try launched it before): attaching.", current.job_id, instance_name)
    return current
