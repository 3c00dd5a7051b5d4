"""The one shape of every sans-I/O state machine of the pure core (the style of ``h11``'s ``next_action``).

A machine makes every decision of one activity -- one ``brev`` call (:mod:`.invocation`), one readiness check and
one readiness wait (:mod:`airflow_provider_brev.core.instances.readiness`), following a remote job
(:mod:`airflow_provider_brev.core.jobs.follower`) -- and performs no I/O. A driver asks
:meth:`Machine.next_action` what to do at time ``now`` and gets one action:

* a :class:`Call` (the machine's own I/O request, e.g. run ``brev``, list instances, poll a job): the driver
  performs it and answers with :meth:`Machine.receive` -- the call's value, or :class:`Failed` when it raised a
  :class:`~airflow_provider_brev.exceptions.BrevError` (the machine decides what an error means);
* :class:`Sleep`: wait that long, then ask again (no answer);
* :class:`Emit`: write a log record, then ask again (no answer);
* :class:`Done`: the activity's result; :class:`Fail`: raise its error.

The two drivers -- sync for workers, async for the triggerer -- are
:func:`airflow_provider_brev.hooks.driver.drive` and :func:`airflow_provider_brev.hooks.driver.adrive`; they
know no machine, so a worker and the triggerer cannot disagree about any decision. :class:`StepMachine` is the
base every machine here builds on: it queues log records ahead of the next action, remembers the call waiting for
its answer, and keeps the end once reached.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Action", "Call", "Done", "Emit", "Fail", "Failed", "Machine", "Sleep", "StepMachine"]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True)
class Call:
    """Base of a machine's I/O requests: the driver performs it (each machine's ``perform`` knows how) and answers
    with :meth:`Machine.receive`."""


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` (the machine has clamped them to its deadlines), then ask for the next action.

    :param seconds: how long to wait.
    """

    seconds: float


@dataclass(frozen=True)
class Emit:
    """Write one log record (``logging`` level and message), then ask for the next action.

    :param level: the ``logging`` level.
    :param message: the record's text.
    """

    level: int
    message: str


@dataclass(frozen=True)
class Done(Generic[R_co]):
    """The activity ended with ``result``.

    :param result: what the driver returns.
    """

    result: R_co


@dataclass(frozen=True)
class Fail:
    """The activity ended with ``error``: the driver raises it.

    :param error: the error to raise.
    """

    error: BaseException


@dataclass(frozen=True)
class Failed:
    """The answer to a :class:`Call` that raised ``error`` (a :class:`~airflow_provider_brev.exceptions.BrevError`).

    :param error: what the call raised.
    """

    error: BaseException


Action = Call | Sleep | Emit | Done[Any] | Fail


class Machine(Protocol[R_co]):
    """What the drivers need of a machine (``now`` is the driver's clock, as the machine's deadlines are)."""

    def next_action(self, now: float) -> Call | Sleep | Emit | Done[R_co] | Fail:
        """The next thing to do at ``now``."""
        ...

    def receive(self, outcome: object, now: float) -> None:
        """The answer to the last :class:`Call` (its value, or :class:`Failed`)."""
        ...


class StepMachine(ABC, Generic[R]):
    """The bookkeeping every machine shares; a subclass decides in :meth:`_decide` and :meth:`_receive`.

    :meth:`_decide` returns the next :class:`Call`, :class:`Sleep` or end; records queued with :meth:`_emit`
    (while deciding or receiving) come out first, in order. Asking while a call waits for its answer, or answering
    when none waits, is a driver bug and raises :class:`RuntimeError`.
    """

    def __init__(self) -> None:
        self._emits: deque[Emit] = deque()
        self._pending: Call | Sleep | Done[R] | Fail | None = None
        self._in_flight: Call | None = None
        self._end: Done[R] | Fail | None = None

    def next_action(self, now: float) -> Call | Sleep | Emit | Done[R] | Fail:
        """The next action at ``now`` (see :mod:`airflow_provider_brev.core.protocol.machine`)."""
        if self._end is not None:
            return self._end
        if self._in_flight is not None:
            raise RuntimeError(f"{self._in_flight!r} is still waiting for its answer")
        action = self._pending if self._pending is not None else self._decide(now)
        self._pending = None
        if self._emits:  # the records decided with the action, or with the last answer, come first
            self._pending = action
            return self._emits.popleft()
        if isinstance(action, Call):
            self._in_flight = action
        elif isinstance(action, Done | Fail):
            self._end = action
        return action

    def receive(self, outcome: object, now: float) -> None:
        """The answer to the call in flight: its value, or :class:`Failed`."""
        call, self._in_flight = self._in_flight, None
        if call is None:
            raise RuntimeError(f"Got an answer ({type(outcome).__name__}) while no call was waiting for one")
        self._receive(call, outcome, now)

    # -- for subclasses ------------------------------------------------------------------------------
    @abstractmethod
    def _decide(self, now: float) -> Call | Sleep | Done[R] | Fail:
        """The next call, sleep or end at ``now`` (no call is in flight and no end was reached)."""

    @abstractmethod
    def _receive(self, call: Call, outcome: object, now: float) -> None:
        """Take the answer to ``call``: queue records, set what comes next, or :meth:`_finish`."""

    def _emit(self, level: int, message: str) -> None:
        self._emits.append(Emit(level, message))

    def _finish(self, end: Done[R] | Fail) -> None:
        """End the activity (the end is returned once the queued records are out)."""
        self._pending = end
