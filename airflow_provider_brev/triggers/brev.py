"""Triggers used by the deferrable Brev operators and sensors.

They run on the triggerer, so they use the hook's async runner (``asyncio.create_subprocess_exec``) with the
same parsers and retry predicate as the sync side. Their kwargs are serialisable and hold a connection id,
names and an absolute deadline -- never a token. Each trigger yields exactly one event with a ``status``
(``success`` / ``failed`` / ``timeout`` / ``error``) and a ``message``; unexpected errors become ``error``
events instead of crashing the triggerer.

Cleanup rules: ``on_kill`` (Airflow 3.3+, user actions only: mark
failed/success, clear) may delete an instance the task owns; ``cleanup()`` runs on *every* trigger exit,
including triggerer restarts, so it never deletes or kills anything.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.recovery import EVENT_INSTANCE_LOST, may_be_lost
from airflow_provider_brev.core.jobs.follower import SYNC_DUE, FollowPolicy
from airflow_provider_brev.core.jobs.remote import RemoteJob
from airflow_provider_brev.core.jobs.shared_polls import first_poll_delay
from airflow_provider_brev.core.protocol.config import DEFAULT_BREV_CONN_ID
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.triggers.base import ProviderBaseTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from airflow.triggers.base import TriggerEvent

    from airflow_provider_brev.hooks.brev import BrevHook

from airflow_provider_brev.utils.events import EVENT_ERROR, EVENT_FAILED, EVENT_SUCCESS, EVENT_TIMEOUT

__all__ = [
    "EVENT_ERROR",
    "EVENT_FAILED",
    "EVENT_INSTANCE_LOST",
    "EVENT_SUCCESS",
    "EVENT_TIMEOUT",
    "BrevBaseTrigger",
    "BrevInstanceReadyTrigger",
    "BrevRemoteJobTrigger",
]


class BrevBaseTrigger(ProviderBaseTrigger):
    """Base of the Brev triggers: the plumbing of :class:`~airflow_provider_brev.triggers.base.ProviderBaseTrigger`
    (serialisation, events, the deferral's settling time) and the Brev hook of ``brev_conn_id``."""

    brev_conn_id: str
    instance_name: str

    def _hook(self) -> BrevHook:
        from airflow_provider_brev.hooks.brev import BrevHook  # where the trigger runs, not where it is defined

        return BrevHook(brev_conn_id=self.brev_conn_id, log_cli_output=False)


class BrevInstanceReadyTrigger(BrevBaseTrigger):
    """Poll an instance's layered readiness until it is ready, terminal, or the deadline passes.

    :param instance_name: the instance to watch.
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    :param deadline: absolute deadline (epoch seconds). Airflow 3.3 does not apply ``execution_timeout`` to
        deferrals, so the trigger enforces it itself.
    :param poll_interval: seconds between checks (status first, the exec probe only when the status is good).
    :param require_docker: also require ``docker info`` to succeed.
    :param delete_on_kill: on Airflow 3.3+, delete the instance when a user kills the deferred task (only for
        instances the task owns, i.e. the create operator's own wait).
    :param created: carried through to the event (whether the deferring task created the instance).
    :param instance_id: the instance's Brev id, when known: ``on_kill`` deletes by it (a name can be freed and taken
        by someone else), and the event carries it.
    """

    serialized_fields = (
        "instance_name",
        "brev_conn_id",
        "deadline",
        "poll_interval",
        "require_docker",
        "delete_on_kill",
        "created",
        "instance_id",
    )
    event_fields = ("instance_name", "created", "instance_id")

    def __init__(
        self,
        *,
        instance_name: str,
        brev_conn_id: str = DEFAULT_BREV_CONN_ID,
        deadline: float,
        poll_interval: float = 1.0,
        require_docker: bool = False,
        delete_on_kill: bool = False,
        created: bool = False,
        instance_id: str | None = None,
        not_before: float | None = None,
    ) -> None:
        super().__init__()
        self.not_before = None if not_before is None else float(not_before)
        self.instance_id = instance_id
        self.instance_name = instance_name
        self.brev_conn_id = brev_conn_id
        self.deadline = float(deadline)
        self.poll_interval = float(poll_interval)
        self.require_docker = require_docker
        self.delete_on_kill = delete_on_kill
        self.created = created

    async def events(self) -> AsyncIterator[TriggerEvent]:
        """Run :class:`~airflow_provider_brev.core.instances.readiness.ReadinessWait` with the async driver
        (:meth:`~airflow_provider_brev.hooks.instances.BrevInstancesHook.await_readiness`; the hook's
        ``wait_until_ready`` runs the same machine with the sync one); checks share the triggerer's listing."""
        hook = self._hook()
        try:
            step = await hook.await_readiness(
                self.instance_name,
                deadline=self.deadline,
                poll_interval=self.poll_interval,
                require_docker=self.require_docker,
                log=self.log,
            )
            instance = step.readiness.instance if step.readiness else None
            if step.action == "ready":
                yield self._event(EVENT_SUCCESS, f"{step.message} {step.took}", instance=instance)
            elif step.action == "failed":
                assert step.readiness is not None
                yield self._event(EVENT_FAILED, step.message, stage=step.readiness.stage, instance=instance)
            else:
                yield self._event(EVENT_TIMEOUT, step.message)
        except BrevError as err:
            yield self._event(EVENT_ERROR, str(err), error_type=type(err).__name__)
        except Exception as err:  # never crash the triggerer; the task fails with the message
            self.log.exception("Unexpected error while waiting for %s", self.instance_name)
            yield self._event(EVENT_ERROR, f"{type(err).__name__}: {err}", error_type=type(err).__name__)

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked the deferred task failed/success or cleared it."""
        if not self.delete_on_kill:
            return
        from airflow_provider_brev.instances.release import arelease_on_kill

        await arelease_on_kill(self._hook(), self.log, self.instance_name, self.instance_id, why="the instance it owns")


#: The remote-job trigger's arguments that make up its :class:`FollowPolicy` (argument name -> policy field).
_POLICY_FIELDS = {
    "deadline": "deadline",
    "poll_interval": "poll_interval",
    "log_chunk_bytes": "max_bytes",
    "max_poll_failures": "max_poll_failures",
    "progress_regex": "progress_regex",
    "sync_interval": "sync_interval",
    "checkpoint_regex": "checkpoint_regex",
}


class BrevRemoteJobTrigger(BrevBaseTrigger):
    """Follow a detached remote job until it ends: stream its log into the task log, then yield one event.

    The job keeps running on the instance whatever happens to the triggerer: a triggerer restart resumes from
    the serialised ``offset`` (lines since then may be shown twice, none are lost). At the end the *whole*
    remaining log is drained before the event is sent (no cap on the tail).

    Many triggers in one triggerer share their cost (:mod:`airflow_provider_brev.core.jobs.shared_polls`): the
    first poll is put off by a random share of ``poll_interval``; the triggers following jobs on the same instance
    share one poll (:mod:`airflow_provider_brev.hooks.job_polls`); and the loop's ``brev`` processes are capped by
    ``[brev] triggerer_max_processes``.

    Events (each carries ``instance_name``, ``instance_id``, ``job``, ``ephemeral`` and ``deadline``): the job's end
    (``finished``/``lost``/``missing``/``timeout`` with ``state``, ``exit_code``, ``last_line``, ``offset``);
    ``sync_due`` (with ``offset`` and ``last_line``) when the step's outputs are due -- every ``sync_interval``
    seconds, or at a log line matching ``checkpoint_regex`` -- so the worker uploads them and defers again (the
    triggerer never needs AWS credentials); ``instance_lost`` (``error_type``, ``offset``) when following failed
    in a way that may mean the instance is gone; ``error`` otherwise.

    :param instance_name: the instance the job runs on.
    :param instance_id: its Brev id (``on_kill`` of an ephemeral step deletes by it; events carry it).
    :param job: the job handle (:meth:`RemoteJob.to_dict`): job id and base dir, no secrets.
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    :param offset: byte offset of the log already shown.
    :param deadline: absolute deadline (epoch seconds) or ``None``; past it the job is killed.
    :param poll_interval: seconds between polls while the job produces nothing new.
    :param log_chunk_bytes: maximum log bytes fetched per poll.
    :param on_kill_action: ``kill`` the remote job when a user kills the deferred task (Airflow 3.3+), or ``keep``.
    :param ephemeral: the task owns the instance: delete it on a user kill.
    :param max_poll_failures: consecutive failed polls (connection drops) tolerated before giving up.
    :param last_line: the last non-empty line shown so far.
    :param progress_regex: a regex with two groups ``(done, total)`` (e.g. epochs) logged as a percentage.
    :param sync_interval: seconds between ``sync_due`` events while the job runs (``None``: never).
    :param checkpoint_regex: with ``sync_interval``, a log line matching it makes a sync due at once.
    :param next_sync_at: when the next sync is due (epoch seconds; default ``sync_interval`` after the start).
    """

    serialized_fields = (
        "instance_name",
        "instance_id",
        "job",
        "brev_conn_id",
        "offset",
        "deadline",
        "poll_interval",
        "log_chunk_bytes",
        "on_kill_action",
        "ephemeral",
        "max_poll_failures",
        "last_line",
        "progress_regex",
        "sync_interval",
        "checkpoint_regex",
        "next_sync_at",
    )
    event_fields = ("instance_name", "instance_id", "job", "ephemeral", "deadline")

    def __init__(
        self,
        *,
        instance_name: str,
        job: dict[str, Any],
        instance_id: str | None = None,
        brev_conn_id: str = DEFAULT_BREV_CONN_ID,
        offset: int = 0,
        deadline: float | None = None,
        poll_interval: float = 5.0,
        log_chunk_bytes: int = 4 * 1024 * 1024,
        on_kill_action: str = "kill",
        ephemeral: bool = False,
        max_poll_failures: int = 30,
        last_line: str = "",
        progress_regex: str | None = None,
        sync_interval: float | None = None,
        checkpoint_regex: str | None = None,
        next_sync_at: float | None = None,
        not_before: float | None = None,
    ) -> None:
        super().__init__()
        self.not_before = None if not_before is None else float(not_before)
        self.progress_regex = progress_regex
        self.sync_interval = None if sync_interval is None else float(sync_interval)
        self.checkpoint_regex = checkpoint_regex
        self.next_sync_at = None if next_sync_at is None else float(next_sync_at)
        self.instance_name = instance_name
        self.instance_id = instance_id
        self.job = dict(job)
        self.brev_conn_id = brev_conn_id
        self.offset = int(offset)
        self.deadline = None if deadline is None else float(deadline)
        self.poll_interval = float(poll_interval)
        self.log_chunk_bytes = int(log_chunk_bytes)
        self.on_kill_action = on_kill_action
        self.ephemeral = ephemeral
        self.max_poll_failures = int(max_poll_failures)
        self.last_line = last_line

    @classmethod
    def for_policy(cls, *, policy: FollowPolicy, **kwargs: Any) -> BrevRemoteJobTrigger:
        """A trigger following a job with ``policy`` (the same settings the worker-side runner uses)."""
        return cls(**{name: getattr(policy, field) for name, field in _POLICY_FIELDS.items()}, **kwargs)

    @property
    def policy(self) -> FollowPolicy:
        """How this trigger follows its job (:class:`~airflow_provider_brev.core.jobs.follower.FollowPolicy`)."""
        return FollowPolicy(**{field: getattr(self, name) for name, field in _POLICY_FIELDS.items()})

    async def events(self) -> AsyncIterator[TriggerEvent]:
        from airflow_provider_brev.jobs.runner import JobRunner

        job = RemoteJob.from_dict(self.job)
        runner = JobRunner(
            self._hook(),
            self.instance_name,
            job,
            self.policy,
            self.log,
            offset=self.offset,
            last_line=self.last_line,
            next_sync_at=self.next_sync_at,
            hold_first=True,  # after the spread first poll: one poll at the start, not two
        )
        self.log.info("Following job %s on %s from the triggerer.", job.job_id, self.instance_name)
        until_deadline = None if self.deadline is None else self.deadline - time.time()
        delay = first_poll_delay(self.poll_interval, random.random(), until_deadline=until_deadline)
        await asyncio.sleep(delay)  # many triggers created at once do not all poll at once
        try:
            outcome = await runner.afollow()
        except BrevError as err:
            status = EVENT_INSTANCE_LOST if may_be_lost(err) else EVENT_ERROR
            yield self._event(status, str(err), error_type=type(err).__name__, offset=runner.offset)
            return
        except Exception as err:
            self.log.exception("Unexpected error while following job %s", job.job_id)
            yield self._event(EVENT_ERROR, f"{type(err).__name__}: {err}", error_type=type(err).__name__)
            return
        if outcome.state == SYNC_DUE:
            yield self._event(SYNC_DUE, f"Job {job.job_id}: outputs due", **outcome.to_dict())
            return
        yield self._event(outcome.state, f"Job {job.job_id} ended: {outcome.state}", **outcome.to_dict())

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked the deferred task failed/success or cleared it."""
        from airflow_provider_brev.instances.release import arelease_on_kill

        hook = self._hook()
        job = RemoteJob.from_dict(self.job)
        if self.ephemeral:
            await arelease_on_kill(hook, self.log, self.instance_name, self.instance_id, why="its ephemeral instance")
            return
        if self.on_kill_action != "kill":
            self.log.info("Task killed: keeping job %s running (on_kill_action=keep).", job.job_id)
            return
        try:
            result = await hook.akill_job(self.instance_name, job, grace_seconds=5, timeout=25)
            self.log.info("Task killed: job %s %s.", job.job_id, result)
        except Exception:
            self.log.exception("Could not kill job %s on kill.", job.job_id)
