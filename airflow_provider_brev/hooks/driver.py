"""The two drivers of every state machine of the pure core: :func:`drive` (sync) and :func:`adrive` (async).

A machine (:mod:`airflow_provider_brev.core.protocol.machine`) decides everything; a driver only asks it for the
next action and carries it out: a :class:`~airflow_provider_brev.core.protocol.machine.Call` through the caller's
``perform`` (the machine's I/O: a ``brev`` process, a listing, a job poll), a
:class:`~airflow_provider_brev.core.protocol.machine.Sleep` with ``time.sleep`` / ``asyncio.sleep``, an
:class:`~airflow_provider_brev.core.protocol.machine.Emit` into the given logger, and the end by returning the result
or raising the error. A :class:`~airflow_provider_brev.exceptions.BrevError` raised by ``perform`` is handed to the
machine as :class:`~airflow_provider_brev.core.protocol.machine.Failed` (the machine decides whether it ends the
activity); anything else propagates at once.

The two drivers are the same loop, one awaiting; what they do with an action that is neither a call nor a sleep is
:func:`_settle`, shared. Used by :mod:`airflow_provider_brev.hooks.base` (a ``brev`` call),
:mod:`airflow_provider_brev.hooks.instances` (readiness checks and waits),
:mod:`airflow_provider_brev.jobs.runner` (following a job) and :mod:`airflow_provider_brev.triggers.brev`.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_provider_brev.core.protocol.machine import Call, Done, Emit, Fail, Failed, Machine, Sleep
from airflow_provider_brev.exceptions import BrevError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["EmitLog", "adrive", "drive"]

R = TypeVar("R")

#: What :func:`_settle` returns when the loop goes on (an :class:`Emit` was written).
_GO_ON: Any = object()


class EmitLog(Protocol):
    """Where :class:`Emit` records go (a stdlib ``logging.Logger`` or Airflow's structlog logger)."""

    def log(self, level: int, event: Any, *args: Any, **kw: Any) -> Any: ...


def _settle(action: Emit | Done[R] | Fail, log: EmitLog | None) -> R:
    """Write an :class:`Emit` (then :data:`_GO_ON`), return a :class:`Done`'s result, raise a :class:`Fail`'s error."""
    if isinstance(action, Emit):
        if log is not None:
            log.log(action.level, "%s", action.message)
        return _GO_ON  # type: ignore[no-any-return]
    if isinstance(action, Fail):
        raise action.error
    return action.result


def drive(
    machine: Machine[R],
    perform: Callable[[Call], object],
    *,
    log: EmitLog | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Any] | None = None,
    interrupted: Callable[[], BaseException | None] | None = None,
) -> R:
    """Run ``machine`` to its end, synchronously; returns its result or raises its error.

    :param machine: the machine (its deadlines are in ``clock``'s time).
    :param perform: carries out one :class:`Call` and returns its answer (raising a ``BrevError`` answers
        :class:`Failed`).
    :param log: where :class:`Emit` records go (``None``: dropped).
    :param clock: the machine's clock (``time.time`` for absolute deadlines, ``time.monotonic`` for relative ones).
    :param sleep: how to sleep (tests pass a fake); ``None``: ``time.sleep`` as it is when the wait runs (looked up
        at call time, so a clock swapped in for ``time.sleep`` after import is honoured).
    :param interrupted: asked before every action: an error it returns is raised at once (a killed task).
    """
    while True:
        if interrupted is not None and (error := interrupted()) is not None:
            raise error
        action = machine.next_action(clock())
        if isinstance(action, Call):
            try:
                outcome = perform(action)
            except BrevError as err:
                outcome = Failed(err)
            machine.receive(outcome, clock())
        elif isinstance(action, Sleep):
            (time.sleep if sleep is None else sleep)(action.seconds)
        elif (result := _settle(action, log)) is not _GO_ON:
            return result


async def adrive(
    machine: Machine[R],
    perform: Callable[[Call], Awaitable[object]],
    *,
    log: EmitLog | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    interrupted: Callable[[], BaseException | None] | None = None,
) -> R:
    """Async twin of :func:`drive` (the same loop; ``perform`` and ``sleep`` are awaited)."""
    while True:
        if interrupted is not None and (error := interrupted()) is not None:
            raise error
        action = machine.next_action(clock())
        if isinstance(action, Call):
            try:
                outcome = await perform(action)
            except BrevError as err:
                outcome = Failed(err)
            machine.receive(outcome, clock())
        elif isinstance(action, Sleep):
            await sleep(action.seconds)
        elif (result := _settle(action, log)) is not _GO_ON:
            return result
