"""The trigger of a deferred Lepton step: follow its job from the triggerer, holding no worker slot.

:class:`LeptonJobTrigger` runs :class:`~airflow_provider_brev.core.lepton.follower.LeptonJobFollower` -- the machine
the worker runs -- with the async driver (:func:`~airflow_provider_brev.hooks.driver.adrive`), so the worker and
the triggerer decide alike: the log into the task log, the queue limit, the absolute deadline (it survives a
triggerer restart: the trigger's kwargs hold it, and the log cursor). Its kwargs are serialised declaratively
(``serialized_fields``, :class:`~airflow_provider_brev.triggers.base.ProviderBaseTrigger`) and hold a connection id, names, numbers --
never a token or a presigned URL. It yields one event: ``success`` with the job's ``outcome``, or ``error`` with the
typed error's name (``error_type``). ``on_kill`` (Airflow 3.3+, a user's mark-failed or clear) stops the job;
``cleanup`` (every exit, triggerer restarts too) stops nothing.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.lepton.follower import LeptonFollowPolicy, LeptonJobFollower
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.hooks.driver import adrive
from airflow_provider_brev.hooks.lepton import LeptonHook
from airflow_provider_brev.triggers.base import ProviderBaseTrigger
from airflow_provider_brev.utils.events import EVENT_ERROR, EVENT_SUCCESS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from airflow.triggers.base import TriggerEvent

    from airflow_provider_brev.core.protocol.machine import Call


#: The trigger's kwargs that are its :class:`LeptonFollowPolicy` (same names).
_POLICY_FIELDS = tuple(field.name for field in dataclasses.fields(LeptonFollowPolicy))


class LeptonJobTrigger(ProviderBaseTrigger):
    """Follow one Lepton job until it ended (see the module docstring).

    :param job: the job's name.
    :param lepton_conn_id: the Airflow connection id of type ``lepton``.
    :param since_ns: where its log is read from (nanoseconds since the epoch).
    :param deadline: absolute deadline (epoch seconds) or ``None``; past it the job is stopped.
    :param poll_interval: seconds between polls.
    :param max_poll_failures: consecutive transient failures tolerated.
    :param queue_timeout: seconds the job may queue before it is stopped (typed error); ``None``: no limit.
    :param on_kill_action: ``kill`` (stop) the job when a user kills the deferred task, or ``keep`` it.
    :param try_number: the deferring try (events carry it: a retry recognises an earlier try's event).
    :param secret: the plan's secret the deferring try created (the resumed task deletes it).
    """

    serialized_fields = (
        "job",
        "lepton_conn_id",
        "since_ns",
        "deadline",
        "poll_interval",
        "max_poll_failures",
        "queue_timeout",
        "on_kill_action",
        "try_number",
        "secret",
    )
    event_fields = ("job", "deadline", "try_number", "secret")

    def __init__(
        self,
        *,
        job: str,
        lepton_conn_id: str = LeptonHook.default_conn_name,
        since_ns: int,
        deadline: float | None = None,
        poll_interval: float = 5.0,
        max_poll_failures: int = 30,
        queue_timeout: float | None = None,
        on_kill_action: str = "kill",
        try_number: int = 1,
        secret: str | None = None,
        not_before: float | None = None,
    ) -> None:
        super().__init__()
        self.not_before = None if not_before is None else float(not_before)
        self.job = job
        self.lepton_conn_id = lepton_conn_id
        self.since_ns = int(since_ns)
        self.deadline = None if deadline is None else float(deadline)
        self.poll_interval = float(poll_interval)
        self.max_poll_failures = int(max_poll_failures)
        self.queue_timeout = None if queue_timeout is None else float(queue_timeout)
        self.on_kill_action = on_kill_action
        self.try_number = int(try_number)
        self.secret = secret

    @classmethod
    def for_policy(cls, *, policy: LeptonFollowPolicy, **kwargs: Any) -> LeptonJobTrigger:
        """A trigger following a job with ``policy`` (the settings the worker-side follower uses)."""
        return cls(**{field: getattr(policy, field) for field in _POLICY_FIELDS}, **kwargs)

    @property
    def policy(self) -> LeptonFollowPolicy:
        """How this trigger follows its job (:class:`~airflow_provider_brev.core.lepton.follower.LeptonFollowPolicy`)."""
        return LeptonFollowPolicy(**{field: getattr(self, field) for field in _POLICY_FIELDS})

    def _lepton(self) -> LeptonHook:
        return LeptonHook(self.lepton_conn_id)

    async def events(self) -> AsyncIterator[TriggerEvent]:
        hook = self._lepton()
        machine = LeptonJobFollower(self.policy, job=self.job, since_ns=self.since_ns)

        async def perform(action: Call) -> object:
            return await hook.aperform(self.job, action)

        self.log.info("Following Lepton job %s from the triggerer.", self.job)
        try:
            outcome = await adrive(machine, perform, log=self.log)
        except BrevError as err:
            yield self._event(EVENT_ERROR, str(err), error_type=type(err).__name__)
            return
        except Exception as err:  # never crash the triggerer; the task fails with the message
            self.log.exception("Unexpected error while following Lepton job %s", self.job)
            yield self._event(EVENT_ERROR, f"{type(err).__name__}: {err}", error_type=type(err).__name__)
            return
        yield self._event(EVENT_SUCCESS, f"Lepton job {self.job} ended: {outcome.phase}", outcome=outcome.to_dict())

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked the deferred task failed/success or cleared it."""
        if self.on_kill_action != "kill":
            self.log.info("Task killed: keeping Lepton job %s running (on_kill_action=keep).", self.job)
            return
        try:
            await self._lepton().astop_job(self.job)
            self.log.info("Task killed: stopped Lepton job %s.", self.job)
        except Exception:
            self.log.exception("Could not stop Lepton job %s on kill.", self.job)


__all__ = ["LeptonJobTrigger"]
