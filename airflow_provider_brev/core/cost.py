"""What GPU time costs (pure): price caps, billed seconds and dollars per phase, and a DAG run's cost table.

Prices are ``price_per_hour`` of ``brev search --json`` (US dollars; reference/brev-cli.md §2.5), which the hook
reads when it resolves a request (:mod:`airflow_provider_brev.hooks.instances`). A step's billed time is split
into the phases of :data:`PHASES` (measured by :mod:`airflow_provider_brev.cost.meter`):

========= ===========================================================================================
phase     billed time the step (or create task) owns
========= ===========================================================================================
boot      ``brev create`` until the instance is ready (ephemeral steps, create tasks, re-creations)
pull      the workload's preparation (TAO: ``docker login`` and image pulls)
stage     the input sync before a launch (and TAO's checkpoint restore)
work      the job's own run time, from its launch (or re-attach) to its end -- periodic output syncs overlap it
resume    from the job's end (or the instance's readiness) until Airflow resumed the deferred task: the trigger's
          event held back (``deferral_settle_seconds``) and the scheduler's latency -- billed, never work
upload    the final output sync after the job ended
idle      the rest: readiness checks, collecting, deletion lag
========= ===========================================================================================

Dollars are ``price_per_hour x seconds / 3600`` per phase, so the phases add up to the total. A price that is
not known (a type ``brev search`` does not list) gives ``None`` dollars, never a made-up number. A step's cost also
carries its window and the wall-clock spans of its phases, from which the run's bill is split among its tasks
(:mod:`airflow_provider_brev.core.bill`).

Caps (:func:`cost_limits`, :class:`PriceCap`): ``max_price_per_hour`` drops candidate types above it;
``max_run_cost`` bounds a step's estimate, ``price x (ready_timeout + timeout)`` for an instance it creates (so it
also caps the price it may create at) and ``price x timeout`` on an existing one. Nothing matching raises
:class:`~airflow_provider_brev.exceptions.BrevPriceCapError` or
:class:`~airflow_provider_brev.exceptions.BrevCostCapError` before ``brev create``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.values import is_empty, optional, positive_number
from airflow_provider_brev.exceptions import BrevCostCapError, BrevInvalidInputError, BrevPriceCapError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: The billed phases, in the order a step goes through them (see the module docstring).
PHASES = ("boot", "pull", "stage", "work", "resume", "upload", "idle")
#: The currency of ``brev search``'s ``price_per_hour``.
CURRENCY = "USD"
_HOUR = 3600.0


def dollars(price_per_hour: float | None, seconds: float) -> float | None:
    """What ``seconds`` of an instance at ``price_per_hour`` cost (``None`` when the price is not known).

    :param price_per_hour: dollars per hour, or ``None``.
    :param seconds: billed seconds (negative counts as 0).
    """
    if price_per_hour is None:
        return None
    return round(price_per_hour * max(seconds, 0.0) / _HOUR, 6)


def money(value: float | None) -> str:
    """``$12.35`` from a dollar amount of one dollar or more, ``$0.0123`` below, ``$?`` when not known."""
    if value is None:
        return "$?"
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def rate(price_per_hour: float | None) -> str:
    """``$2.24/h`` (``$?/h`` when not known)."""
    return "$?/h" if price_per_hour is None else f"${price_per_hour:.2f}/h"


# -- caps ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CostLimits:
    """A task's checked price and cost caps (:func:`cost_limits`).

    :param max_price_per_hour: the highest price per hour of an instance the task may create.
    :param max_run_cost: the highest estimated dollars of the step.
    """

    max_price_per_hour: float | None = None
    max_run_cost: float | None = None

    def price_cap(self, estimate_seconds: float | None) -> PriceCap | None:
        """The cap on the price of an instance the task creates: ``max_price_per_hour``, and -- with
        ``max_run_cost`` -- the price at which ``estimate_seconds`` cost exactly ``max_run_cost``."""
        from_cost = None
        if self.max_run_cost is not None and estimate_seconds:
            from_cost = self.max_run_cost * _HOUR / estimate_seconds
        limits = [limit for limit in (self.max_price_per_hour, from_cost) if limit is not None]
        if not limits:
            return None
        return PriceCap(min(limits), self.max_price_per_hour, self.max_run_cost, estimate_seconds)


def cost_limits(max_price_per_hour: Any, max_run_cost: Any, *, timeout: float | None) -> CostLimits:
    """Check the rendered caps before any ``brev`` call: positive numbers (also from text), and ``max_run_cost``
    only with a ``timeout`` (without one a step's cost has no bound to check).

    :param max_price_per_hour: the rendered ``max_price_per_hour`` (empty: none).
    :param max_run_cost: the rendered ``max_run_cost`` (empty: none).
    :param timeout: the step's checked ``timeout`` in seconds (``None``: no limit).
    """
    price = optional(positive_number, "max_price_per_hour", max_price_per_hour, unit="dollars per hour")
    cost = optional(positive_number, "max_run_cost", max_run_cost, unit="dollars")
    if cost is not None and timeout is None:
        raise BrevInvalidInputError(
            f"max_run_cost={cost:g} needs timeout: a step's cost is bounded by price x (ready_timeout + timeout), "
            "and without a timeout it has no bound. Pass timeout (seconds or a timedelta) or drop max_run_cost."
        )
    return CostLimits(price, cost)


#: The parameters that cap what a task may spend, and what each caps (for :func:`unset_cap_warnings`).
CAP_PARAMETERS = {"max_price_per_hour": "price", "max_run_cost": "run-cost"}


def unset_cap_warnings(parameters: Mapping[str, Any]) -> list[str]:
    """A warning for each cap in ``parameters`` that was set to text rendering to nothing (``""``, ``"None"``: an
    unset ``{{ params.cap }}``), which means no cap at all; a cap left at its ``None`` default says nothing.

    :param parameters: rendered parameters by name (others than the caps are ignored).
    """
    return [
        f"{name} rendered to {value!r}, so no {what} cap applies to this task. If a template was meant to give it "
        "(e.g. an unset DAG param), pass a number; leave the parameter out to mean no cap without this warning."
        for name, what in CAP_PARAMETERS.items()
        if isinstance(value := parameters.get(name), str) and is_empty(value)
    ]


@dataclass(frozen=True)
class PriceCap:
    """The highest price per hour a task may create an instance at, and where it comes from.

    :param per_hour: the cap in dollars per hour.
    :param max_price_per_hour: the task's ``max_price_per_hour`` (``None``: not set).
    :param max_run_cost: the task's ``max_run_cost`` (``None``: not set).
    :param estimate_seconds: the step's longest billed time, for ``max_run_cost``.
    """

    per_hour: float
    max_price_per_hour: float | None = None
    max_run_cost: float | None = None
    estimate_seconds: float | None = None

    @property
    def from_cost(self) -> bool:
        """``max_run_cost`` (not ``max_price_per_hour``) sets the cap."""
        return self.max_run_cost is not None and (
            self.max_price_per_hour is None or self.per_hour < self.max_price_per_hour
        )

    def within(self, types: Sequence[str], prices: Mapping[str, float]) -> list[str]:
        """The candidate ``types`` (in their order) whose known price is within the cap (a type without a known price
        never is); unlike :meth:`admit`, an empty result is not an error.

        :param types: the candidate instance types.
        :param prices: price per hour by type (``brev search``).
        """
        cap = round(self.per_hour, 6)  # a cap derived from max_run_cost carries float noise
        return [t for t in types if t in prices and round(prices[t], 6) <= cap]

    def refusal(self, instance_type: str, prices: Mapping[str, float]) -> str:
        """Why ``instance_type`` is above the cap, in words: its price against ``max_price_per_hour``, or the step's
        estimate at its price against ``max_run_cost``.

        :param instance_type: a type :meth:`within` does not keep.
        :param prices: price per hour by type (``brev search``).
        """
        price = prices.get(instance_type)
        if price is None:
            return (
                f"the price of {instance_type} is not known (`brev search` does not list it): not shown within the cap"
            )
        if self.from_cost:
            estimate = dollars(price, self.estimate_seconds or 0.0)
            return (
                f"at {rate(price)} the step may cost {money(estimate)} ((ready_timeout + timeout) x price), more than "
                f"max_run_cost={money(self.max_run_cost)}"
            )
        return f"its price {rate(price)} is above max_price_per_hour={rate(self.max_price_per_hour)}"

    def admit(self, types: Sequence[str], prices: Mapping[str, float]) -> list[str]:
        """The candidate ``types`` (in their order) whose known price is within the cap; raises when none is.

        A type without a known price is never admitted: it cannot be shown to be within the cap.

        :param types: the candidate instance types.
        :param prices: price per hour by type (``brev search``).
        """
        kept = self.within(types, prices)
        if kept:
            return kept
        offered = ", ".join(f"{t} at {rate(prices.get(t))}" for t in types) or "none"
        if self.from_cost:
            hours = self.estimate_seconds / _HOUR if self.estimate_seconds else 0.0
            raise BrevCostCapError(
                f"No instance type fits max_run_cost={money(self.max_run_cost)}: the step may bill up to "
                f"{hours:.2f} h (ready_timeout + timeout), so it may create an instance at {rate(self.per_hour)} at "
                f"most; the candidates are {offered}. Raise max_run_cost, shorten timeout or ready_timeout, or ask "
                "for a cheaper GPU (`brev search`). Nothing was created."
            )
        raise BrevPriceCapError(
            f"No instance type within max_price_per_hour={rate(self.per_hour)}: the candidates are {offered}. Raise "
            "max_price_per_hour or ask for a cheaper GPU or type (`brev search` lists prices). Nothing was created."
        )


def check_run_cost(
    max_run_cost: float | None,
    *,
    price_per_hour: float | None,
    estimate_seconds: float,
    instance_name: str,
    instance_type: str,
) -> None:
    """Refuse a step on an existing instance whose estimate (``price x timeout``) exceeds ``max_run_cost``.

    :param max_run_cost: the cap (``None``: no cap, nothing to check).
    :param price_per_hour: the instance's price (``None``: not known -- refused under a cap).
    :param estimate_seconds: the step's longest billed time.
    :param instance_name: the instance, for the message.
    :param instance_type: its type, for the message.
    """
    if max_run_cost is None:
        return
    estimate = dollars(price_per_hour, estimate_seconds)
    where = f"instance {instance_name!r} ({instance_type or 'type unknown'}"
    if estimate is None:
        raise BrevCostCapError(
            f"max_run_cost={money(max_run_cost)} cannot be checked: the price of {where}) is not known "
            "(`brev search` does not list it). Drop max_run_cost for this step or run it on a listed type. "
            "Nothing was launched."
        )
    if estimate > round(max_run_cost, 6):
        raise BrevCostCapError(
            f"The step may cost {money(estimate)} ({estimate_seconds / _HOUR:.2f} h at {rate(price_per_hour)} on "
            f"{where})), more than max_run_cost={money(max_run_cost)}. Raise max_run_cost or shorten timeout. "
            "Nothing was launched."
        )


def choice_note(instance_type: str, candidates: Sequence[str], prices: Mapping[str, float]) -> str:
    """How the create log names the chosen type: ``type X at $Y/h, cheapest of N``.

    :param instance_type: the type Brev placed the instance on (``brev ls``).
    :param candidates: the types ``brev create`` could choose from (``[]``: Brev chose).
    :param prices: price per hour by type.
    """
    price = prices.get(instance_type)
    if price is None:
        return f"type {instance_type or '?'} (price not listed by `brev search`)"
    note = f"type {instance_type} at {rate(price)}"
    known = [prices[t] for t in candidates if t in prices]
    if len(candidates) <= 1 or not known:
        return note
    if price <= min(known):
        return f"{note}, cheapest of {len(candidates)}"
    return f"{note}, of {len(candidates)} candidates from {rate(min(known))} (cheaper ones were not available)"


# -- a step's cost ---------------------------------------------------------------------------------------------
def step_cost(
    *,
    instance_name: str,
    instance_type: str,
    price_per_hour: float | None,
    phases: Mapping[str, float],
    billed_seconds: float | None = None,
    window: tuple[float, float] | None = None,
    spans: Sequence[tuple[str, float, float]] | None = None,
) -> dict[str, Any]:
    """A step's cost (the XCom ``brev_cost``, JSON): seconds and dollars per phase and in total; with ``window``
    also ``started_at``, ``ended_at`` and ``spans`` (``[phase, start, end]``), the run's bill's input.

    :param instance_name: the instance.
    :param instance_type: its type.
    :param price_per_hour: its price (``None``: not known; the dollars are then ``None``).
    :param phases: measured seconds by phase name (of :data:`PHASES`; missing ones are 0).
    :param billed_seconds: the whole billed time the step owns; what the phases do not cover is ``idle``.
    :param window: the step's billed window (epoch seconds, start and end).
    :param spans: the wall-clock spans of its measured phases.
    """
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        raise ValueError(f"unknown cost phase(s): {', '.join(unknown)}")
    seconds = {phase: round(max(float(phases.get(phase, 0.0)), 0.0), 3) for phase in PHASES}
    if billed_seconds is not None:
        rest = billed_seconds - sum(seconds.values())
        seconds["idle"] = round(seconds["idle"] + max(rest, 0.0), 3)
    total = round(sum(seconds.values()), 3)
    cost: dict[str, Any] = {
        "instance_name": instance_name,
        "instance_type": instance_type,
        "price_per_hour": price_per_hour,
        "currency": CURRENCY,
        "seconds": seconds,
        "dollars": {phase: dollars(price_per_hour, value) for phase, value in seconds.items()},
        "total_seconds": total,
        "total_dollars": dollars(price_per_hour, total),
    }
    if window is not None:
        cost.update(
            started_at=round(window[0], 3),
            ended_at=round(window[1], 3),
            spans=[[phase, round(start, 3), round(end, 3)] for phase, start, end in spans or ()],
        )
    return cost


def resumed_at(opened_at: float, ended_at: object, now: float) -> float:
    """When the phase a deferred task waited in ended: the event's ``ended_at`` (when the trigger saw the job end or
    the instance ready, before it held the event back), kept within ``opened_at`` .. ``now``; ``now`` when the
    event carries none. What follows, until ``now``, is the task's ``resume``.

    :param opened_at: when the phase began (epoch seconds).
    :param ended_at: the event's ``ended_at`` (anything: a missing or bad value means ``now``).
    :param now: when the task resumed.
    """
    if isinstance(ended_at, bool) or not isinstance(ended_at, int | float):
        return now
    return min(max(float(ended_at), opened_at), now)


def lifetime_cost(
    *,
    instance_name: str,
    instance_type: str,
    price_per_hour: float | None,
    created_at: float,
    ended_at: float,
    ended_by: str = "delete",
) -> dict[str, Any]:
    """An instance's billed window in this run, ``brev create`` (or ``brev start``) to the ``brev delete`` (or
    ``brev stop``) request (the teardown task's XCom ``brev_lifetime_cost``): it includes what no task owns (the
    scheduler's gaps between tasks).

    :param instance_name: the instance.
    :param instance_type: its type.
    :param price_per_hour: its price (``None``: not known).
    :param created_at: when ``brev create`` (or ``brev start``) was called (epoch seconds).
    :param ended_at: when its deletion (or stop) was requested (epoch seconds).
    :param ended_by: ``delete`` or ``stop``.
    """
    seconds = round(max(ended_at - created_at, 0.0), 3)
    return {
        "instance_name": instance_name,
        "instance_type": instance_type,
        "price_per_hour": price_per_hour,
        "currency": CURRENCY,
        "created_at": created_at,
        "deleted_at": ended_at,
        "ended_at": ended_at,
        "ended_by": ended_by,
        "total_seconds": seconds,
        "total_dollars": dollars(price_per_hour, seconds),
    }


def cost_line(cost: Mapping[str, Any]) -> str:
    """The one log line of a step's cost: total, rate and the phases that took time."""
    seconds = cost.get("seconds") or {}
    parts = ", ".join(f"{phase} {seconds[phase]:.1f} s" for phase in PHASES if seconds.get(phase))
    return (
        f"Cost: {money(cost.get('total_dollars'))} for {float(cost.get('total_seconds') or 0):.1f} s on "
        f"{cost.get('instance_type') or '?'} at {rate(cost.get('price_per_hour'))} ({parts or 'no billed time'})."
    )


def is_cost(value: Any) -> bool:
    """Whether ``value`` is a :func:`step_cost` dict."""
    return isinstance(value, dict) and isinstance(value.get("seconds"), dict) and "total_seconds" in value


def costs_in(value: Any) -> list[dict[str, Any]]:
    """The costs in an XCom value: one cost, or a mapped task's list of them (``None`` entries skipped)."""
    if isinstance(value, list | tuple):
        return [cost for item in value for cost in costs_in(item)]
    return [value] if is_cost(value) else []
