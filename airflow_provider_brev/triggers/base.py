"""The base of this provider's triggers, on any platform: serialisation from a field list, event building, and the
deferral's settling time. No connection: the Brev triggers add ``brev_conn_id``
(:class:`~airflow_provider_brev.triggers.brev.BrevBaseTrigger`), the Lepton one ``lepton_conn_id``
(:class:`~airflow_provider_brev.triggers.lepton.LeptonJobTrigger`)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class ProviderBaseTrigger(BaseTrigger):
    """Shared plumbing of the provider's triggers (see the module docstring).

    Subclasses list their constructor arguments in ``serialized_fields`` (all JSON-serialisable, never a secret)
    and the fields every event carries in ``event_fields``, and yield their events from :meth:`events`.

    **No event before** ``not_before`` (epoch seconds; the deferring operator sets it to the deferral time plus
    ``[brev] deferral_settle_seconds``, :func:`~airflow_provider_brev._compat.deferral_settle_seconds`): an event
    that comes back before Airflow's scheduler has processed the worker's exit on ``defer()`` can make the scheduler
    fail the resumed try although its work succeeded (apache/airflow#72716). A job that ends within that time has
    its event held back until then; later events are not delayed.
    """

    serialized_fields: tuple[str, ...] = ()
    event_fields: tuple[str, ...] = ()
    not_before: float | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        fields = {name: getattr(self, name) for name in self.serialized_fields}
        fields["not_before"] = self.not_before
        return f"{type(self).__module__}.{type(self).__qualname__}", fields

    def events(self) -> AsyncIterator[TriggerEvent]:
        """The trigger's events (subclasses); :meth:`run` hands each back no earlier than ``not_before``."""
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        async for event in self.events():
            wait = (self.not_before or 0.0) - time.time()
            if wait > 0:
                self.log.info("Holding the event back %.1f s, until Airflow has recorded the deferral.", wait)
                await asyncio.sleep(wait)
            yield event

    def _event(self, status: str, message: str, **extra: Any) -> TriggerEvent:
        """The event: ``status``, ``message``, the :attr:`event_fields`, ``extra``, and ``ended_at`` -- when the
        trigger's wait ended (the job's end, the instance's readiness), before :meth:`run` holds the event back: the
        resumed task bills the time since as ``resume``, never as the phase it waited in."""
        payload: dict[str, Any] = {"status": status, "message": message, "ended_at": time.time()}
        payload.update({name: getattr(self, name) for name in self.event_fields})
        payload.update(extra)
        return TriggerEvent(payload)
