"""The cost clock of one task: billed seconds per phase, across deferrals, reported as ``brev_cost``.

:class:`CostMeter` times the phases of :data:`~airflow_provider_brev.core.cost.PHASES` the step service
(:mod:`airflow_provider_brev.steps.service`), the create operator and the readiness sensor go through. Inside one
process a phase is timed with the monotonic clock; every closed phase is also a wall-clock span (``[phase, start,
end]``), the input of the run's bill (:mod:`airflow_provider_brev.core.bill`). A phase still open when the task
defers (a step's ``work`` while the triggerer follows the job, a create task's or sensor's ``boot``) is
remembered by its wall-clock start in the task's memory (:meth:`~airflow_provider_brev.cost.ledger.CostLedger.tell_clock`,
XCom: it lasts the try), so the worker that resumes the task still knows when it began, and when the task itself
began. The resumed task closes it when the trigger's event says it ended (``ended_at``: the job's end, the
instance's readiness), and what follows until the resumption is ``resume`` (:meth:`CostMeter.resumed`), never the
phase it waited in. At the end :meth:`CostMeter.report` prices the phases
(:func:`~airflow_provider_brev.core.cost.step_cost`): what no phase covers of the task's billed time is ``idle``.
The report is of this try; a retry measures its own.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.cost import PHASES, cost_line, resumed_at, step_cost
from airflow_provider_brev.cost.ledger import CostLedger

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow_provider_brev.utils.task_memory import TaskMemory


class CostMeter:
    """The cost clock of one try of a task (see the module docstring).

    :param memory: the task's memory (where the clock survives deferrals and the report goes).
    :param log: the task's logger (the report's one line).
    """

    def __init__(self, memory: TaskMemory, log: Any) -> None:
        self.memory = memory
        self.ledger = CostLedger(memory)
        self.log = log
        state = self.ledger.clock() or {}
        started = state.get("started_at")
        #: when the billed time this task owns began (epoch seconds; ``None`` until :meth:`begin`)
        self.started_at: float | None = float(started) if isinstance(started, int | float) else None
        self.seconds: dict[str, float] = {
            phase: float(value) for phase, value in (state.get("seconds") or {}).items() if phase in PHASES
        }
        #: phases still running: their wall-clock start
        self.open: dict[str, float] = {phase: float(at) for phase, at in (state.get("open") or {}).items()}
        #: closed phases: ``[phase, start, end]`` (wall-clock epoch seconds)
        self.spans: list[list[Any]] = [list(span) for span in state.get("spans") or [] if len(span) == 3]
        #: the instance the time is billed on: ``name``, ``type``, ``price_per_hour``
        self.instance: dict[str, Any] = dict(state.get("instance") or {})
        #: more facts for the report (a warm start's ``stopped`` disk time)
        self.facts: dict[str, Any] = dict(state.get("facts") or {})
        self._monotonic: dict[str, float] = {}  # phases started in this process
        self._begun_here: float | None = None
        self.reported = False

    @classmethod
    def booting(cls, memory: TaskMemory, log: Any, *, created_at: float | None) -> CostMeter:
        """A create task's clock: its billed time and its ``boot`` begin at ``brev create`` (``created_at``; an
        adopted instance: now)."""
        meter = cls(memory, log)
        meter.begin(at=created_at)
        meter.start("boot", at=meter.started_at)
        return meter

    def begin(self, at: float | None = None) -> None:
        """The task's billed time begins now (or at the epoch seconds ``at``); a resumed task keeps the start it
        remembered."""
        if self.started_at is None:
            now = time.time()
            self.started_at = now if at is None else min(at, now)
            self._begun_here = time.monotonic() - (now - self.started_at)

    def bill_on(self, name: str, instance_type: str, price_per_hour: float | None) -> None:
        """The time is billed on instance ``name`` of ``instance_type`` at ``price_per_hour``."""
        self.instance = {"name": name, "type": instance_type, "price_per_hour": price_per_hour}

    def note(self, **facts: Any) -> None:
        """Facts the report carries besides the phases (JSON values), e.g. a warm start's ``stopped`` disk time."""
        self.facts.update(facts)

    def start(self, phase: str, at: float | None = None) -> None:
        """``phase`` starts now (or at the epoch seconds ``at``); already running: nothing changes."""
        if phase not in PHASES:
            raise ValueError(f"unknown cost phase {phase!r}")
        if phase not in self.open:
            now = time.time()
            self.open[phase] = now if at is None else min(at, now)
            self._monotonic[phase] = time.monotonic() - (now - self.open[phase])

    def stop(self, phase: str, at: float | None = None) -> None:
        """``phase`` ended now (or at the epoch seconds ``at``): its time is added (monotonic when it started in
        this process, else wall-clock)."""
        if phase not in self.open:
            return
        wall = self.open.pop(phase)
        started = self._monotonic.pop(phase, None)
        if at is not None:
            elapsed = min(at, time.time()) - wall
        else:
            elapsed = time.monotonic() - started if started is not None else time.time() - wall
        self._record(phase, wall, wall + max(elapsed, 0.0))

    def resumed(self, phase: str, ended_at: Any) -> None:
        """The task resumed after a deferral in which ``phase`` ran: it ended at the event's ``ended_at`` (see
        :func:`~airflow_provider_brev.core.cost.resumed_at`), and the time since is ``resume``."""
        if phase not in self.open:
            return
        now = time.time()
        end = resumed_at(self.open[phase], ended_at, now)
        self.stop(phase, at=end)
        if now > end:
            self._record("resume", end, now)

    def _record(self, phase: str, start: float, end: float) -> None:
        """A closed span of ``phase`` (its seconds added)."""
        self.seconds[phase] = self.seconds.get(phase, 0.0) + max(end - start, 0.0)
        self.spans.append([phase, start, max(end, start)])

    def stop_all(self) -> None:
        for phase in list(self.open):
            self.stop(phase)

    @contextlib.contextmanager
    def phase(self, phase: str) -> Iterator[None]:
        """Time the block as ``phase``."""
        self.start(phase)
        try:
            yield
        finally:
            self.stop(phase)

    def save(self) -> None:
        """Remember the clock before the task defers (the resumed task reads it back)."""
        self.ledger.tell_clock(
            {
                "started_at": self.started_at,
                "seconds": dict(self.seconds),
                "open": dict(self.open),
                "spans": [list(span) for span in self.spans],
                "instance": dict(self.instance),
                "facts": dict(self.facts),
            }
        )

    def billed_seconds(self) -> float:
        """The task's billed time so far (0 before :meth:`begin`)."""
        if self._begun_here is not None:
            return time.monotonic() - self._begun_here
        return max(time.time() - self.started_at, 0.0) if self.started_at is not None else 0.0

    def report(self, until: float | None = None) -> dict[str, Any] | None:
        """Close every phase, price them, tell ``brev_cost`` and log one line; ``None`` (and nothing told) when
        no instance was billed. Never raises: a report is not worth failing a task for.

        :param until: when the task's billed time ended (epoch seconds; default: now), e.g. a teardown's delete
            request: what it waited for afterwards was no longer billed.
        """
        if self.reported or not self.instance:
            return None
        try:
            self.stop_all()
            billed = self.billed_seconds()
            started = self.started_at if self.started_at is not None else time.time() - billed
            if until is not None:
                billed = min(max(until - started, 0.0), billed)
            cost = step_cost(
                instance_name=str(self.instance.get("name") or ""),
                instance_type=str(self.instance.get("type") or ""),
                price_per_hour=self.instance.get("price_per_hour"),
                phases=self.seconds,
                billed_seconds=billed,
                window=(started, started + billed),
                spans=[(str(p), float(a), float(b)) for p, a, b in self.spans],
            )
        except Exception as err:
            self.log.warning("Could not compute the cost of this task (%s: %s).", type(err).__name__, err)
            return None
        cost.update(self.facts)
        self.reported = True
        self.ledger.tell_cost(cost)
        self.log.info("%s", cost_line(cost))
        return cost
