"""Triggers used by the deferrable Brev operators and sensors.

They run on the triggerer, so they use the hook's async runner (``asyncio.create_subprocess_exec``) with the
same parsers and retry predicate as the sync side. Their kwargs are serialisable and hold a connection id,
names and an absolute deadline -- never a token. Each trigger yields exactly one event with a ``status``
(``success`` / ``failed`` / ``timeout`` / ``error``) and a ``message``; unexpected errors become ``error``
events instead of crashing the triggerer.

Cleanup rules (reference/airflow-providers.md §4.7): ``on_kill`` (Airflow 3.3+, user actions only: mark
failed/success, clear) may delete an instance the task owns; ``cleanup()`` runs on *every* trigger exit,
including triggerer restarts, so it never deletes or kills anything.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.hooks.brev import DEFAULT_PROBE_TIMEOUT, BrevHook

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

EVENT_SUCCESS = "success"
EVENT_FAILED = "failed"
EVENT_TIMEOUT = "timeout"
EVENT_ERROR = "error"


class BrevInstanceReadyTrigger(BaseTrigger):
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
    """

    def __init__(
        self,
        *,
        instance_name: str,
        brev_conn_id: str = BrevHook.default_conn_name,
        deadline: float,
        poll_interval: float = 1.0,
        require_docker: bool = False,
        delete_on_kill: bool = False,
        created: bool = False,
    ) -> None:
        super().__init__()
        self.instance_name = instance_name
        self.brev_conn_id = brev_conn_id
        self.deadline = float(deadline)
        self.poll_interval = float(poll_interval)
        self.require_docker = require_docker
        self.delete_on_kill = delete_on_kill
        self.created = created

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "instance_name": self.instance_name,
                "brev_conn_id": self.brev_conn_id,
                "deadline": self.deadline,
                "poll_interval": self.poll_interval,
                "require_docker": self.require_docker,
                "delete_on_kill": self.delete_on_kill,
                "created": self.created,
            },
        )

    def _hook(self) -> BrevHook:
        return BrevHook(brev_conn_id=self.brev_conn_id, log_cli_output=False)

    def _event(self, status: str, message: str, **extra: Any) -> TriggerEvent:
        return TriggerEvent(
            {
                "status": status,
                "message": message,
                "instance_name": self.instance_name,
                "created": self.created,
                **extra,
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = self._hook()
        last_stage = None
        try:
            while True:
                remaining = self.deadline - time.time()
                if remaining <= 0:
                    yield self._event(
                        EVENT_TIMEOUT,
                        f"Instance {self.instance_name!r} was not ready by the deadline"
                        + (f" (last state: {last_stage})." if last_stage else "."),
                    )
                    return
                readiness = await hook.acheck_readiness(
                    self.instance_name,
                    require_docker=self.require_docker,
                    probe_timeout=max(1.0, min(DEFAULT_PROBE_TIMEOUT, remaining)),
                )
                if readiness.stage != last_stage:
                    self.log.info("Readiness of %s: %s", self.instance_name, readiness.message)
                    last_stage = readiness.stage
                if readiness.ready:
                    yield self._event(EVENT_SUCCESS, readiness.message, instance=readiness.instance)
                    return
                if readiness.terminal:
                    yield self._event(
                        EVENT_FAILED, readiness.message, stage=readiness.stage, instance=readiness.instance
                    )
                    return
                await asyncio.sleep(max(0.0, min(self.poll_interval, self.deadline - time.time())))
        except BrevError as err:
            yield self._event(EVENT_ERROR, str(err), error_type=type(err).__name__)
        except Exception as err:  # never crash the triggerer; the task fails with the message
            self.log.exception("Unexpected error while waiting for %s", self.instance_name)
            yield self._event(EVENT_ERROR, f"{type(err).__name__}: {err}", error_type=type(err).__name__)

    async def on_kill(self) -> None:
        """Airflow 3.3+: a user marked the deferred task failed/success or cleared it."""
        if not self.delete_on_kill:
            return
        self.log.info("Task killed while waiting: deleting instance %s it owns.", self.instance_name)
        try:
            await self._hook().adelete_instance(self.instance_name)
        except Exception:
            self.log.exception("Could not delete instance %s on kill; the teardown/janitor will.", self.instance_name)
