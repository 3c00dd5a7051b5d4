"""Stepping a state machine of the pure core by hand (``core/protocol/machine.py``), for the unit tests."""

from __future__ import annotations

from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Action, Emit, Failed, StepMachine
from airflow_provider_brev.exceptions import BrevTimeoutError


def step(machine: StepMachine, now: float, emitted: list[tuple[int, str]] | None = None) -> Action:
    """The machine's next action that is not an :class:`Emit`; the records before it go to ``emitted``."""
    while isinstance(action := machine.next_action(now), Emit):
        if emitted is not None:
            emitted.append((action.level, action.message))
    return action


def probe(stdout_lines: list[str] | None, stderr: str = "") -> object:
    """What a readiness probe answers: its result, or (``None``) a timed-out ``brev exec``."""
    if stdout_lines is None:
        return Failed(BrevTimeoutError("`brev exec` did not finish within 120 s.", command="exec"))
    return ProcessResult(0, stdout_lines, stderr.splitlines() or [])
