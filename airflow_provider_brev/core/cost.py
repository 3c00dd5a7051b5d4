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
work      the job, from its launch (or re-attach) to its end -- periodic output syncs overlap it
upload    the final output sync after the job ended
idle      the rest: readiness checks, collecting, deletion lag
========= ===========================================================================================

Dollars are ``price_per_hour x seconds / 3600`` per phase, so the phases add up to the total. A price that is
not known (a type ``brev search`` does not list) gives ``None`` dollars, never a made-up number.

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
    from collections.abc import Iterable, Mapping, Sequence

#: The billed phases, in the order a step goes through them (see the module docstring).
PHASES = ("boot", "pull", "stage", "work", "upload", "idle")
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
) -> dict[str, Any]:
    """A step's cost (the XCom ``brev_cost``, JSON): seconds and dollars per phase and in total.

    :param instance_name: the instance.
    :param instance_type: its type.
    :param price_per_hour: its price (``None``: not known; the dollars are then ``None``).
    :param phases: measured seconds by phase name (of :data:`PHASES`; missing ones are 0).
    :param billed_seconds: the whole billed time the step owns; what the phases do not cover is ``idle``.
    """
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        raise ValueError(f"unknown cost phase(s): {', '.join(unknown)}")
    seconds = {phase: round(max(float(phases.get(phase, 0.0)), 0.0), 3) for phase in PHASES}
    if billed_seconds is not None:
        rest = billed_seconds - sum(seconds.values())
        seconds["idle"] = round(seconds["idle"] + max(rest, 0.0), 3)
    total = round(sum(seconds.values()), 3)
    return {
        "instance_name": instance_name,
        "instance_type": instance_type,
        "price_per_hour": price_per_hour,
        "currency": CURRENCY,
        "seconds": seconds,
        "dollars": {phase: dollars(price_per_hour, value) for phase, value in seconds.items()},
        "total_seconds": total,
        "total_dollars": dollars(price_per_hour, total),
    }


def lifetime_cost(
    *, instance_name: str, instance_type: str, price_per_hour: float | None, created_at: float, ended_at: float
) -> dict[str, Any]:
    """An instance's whole billed life, ``brev create`` to ``brev delete`` (the delete task's XCom
    ``brev_lifetime_cost``): it includes what no task owns (the scheduler's gaps between tasks).

    :param instance_name: the instance.
    :param instance_type: its type.
    :param price_per_hour: its price (``None``: not known).
    :param created_at: when ``brev create`` was called (epoch seconds).
    :param ended_at: when its deletion was requested (epoch seconds).
    """
    seconds = round(max(ended_at - created_at, 0.0), 3)
    return {
        "instance_name": instance_name,
        "instance_type": instance_type,
        "price_per_hour": price_per_hour,
        "currency": CURRENCY,
        "created_at": created_at,
        "deleted_at": ended_at,
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


# -- a DAG run's cost --------------------------------------------------------------------------------------------
def run_cost(
    costs: Iterable[tuple[str, Mapping[str, Any]]], lifetimes: Iterable[tuple[str, Mapping[str, Any]]] = ()
) -> dict[str, Any]:
    """A DAG run's cost from its tasks' costs, in the given order (JSON).

    :param costs: ``(task id, cost)`` pairs (a mapped task gives one pair per map index).
    :param lifetimes: ``(delete task id, lifetime)`` pairs (:func:`lifetime_cost`): shown below the total with
        what the tasks on that instance account for (the rest is the time between tasks); not added to it.
    :return: ``{"tasks": [{"task_id", ...cost}], "seconds": {phase: s}, "total_seconds", "total_dollars",
        "unpriced": [task ids whose price is not known], "lifetimes": [{"task_id", ...lifetime, "tasks_dollars"}],
        "currency"}``.
    """
    tasks = [{"task_id": task_id, **dict(cost)} for task_id, cost in costs]
    lives = [
        {
            "task_id": task_id,
            **dict(life),
            "tasks_dollars": round(
                sum(
                    float(t["total_dollars"] or 0) for t in tasks if t.get("instance_name") == life.get("instance_name")
                ),
                6,
            ),
        }
        for task_id, life in lifetimes
    ]
    seconds = {phase: round(sum(float(t["seconds"].get(phase, 0.0)) for t in tasks), 3) for phase in PHASES}
    priced = [t for t in tasks if t.get("total_dollars") is not None]
    return {
        "tasks": tasks,
        "seconds": seconds,
        "total_seconds": round(sum(float(t["total_seconds"]) for t in tasks), 3),
        "total_dollars": round(sum(float(t["total_dollars"]) for t in priced), 6),
        "unpriced": [t["task_id"] for t in tasks if t.get("total_dollars") is None],
        "lifetimes": lives,
        "currency": CURRENCY,
    }


def cost_table(report: Mapping[str, Any]) -> str:
    """A :func:`run_cost` report as a text table: one row per task (type, $/h, seconds per phase, $) and a total."""
    header = ["task", "type", "$/h", *PHASES, "seconds", "$"]
    rows = [
        [
            str(task["task_id"]),
            str(task.get("instance_type") or "?"),
            "?" if task.get("price_per_hour") is None else f"{task['price_per_hour']:.2f}",
            *(f"{float(task['seconds'].get(phase, 0.0)):.1f}" for phase in PHASES),
            f"{float(task['total_seconds']):.1f}",
            money(task.get("total_dollars")),
        ]
        for task in report.get("tasks") or []
    ]
    seconds = report.get("seconds") or {}
    total = ["total", "", "", *(f"{float(seconds.get(p, 0.0)):.1f}" for p in PHASES)]
    total += [f"{float(report.get('total_seconds') or 0):.1f}", money(report.get("total_dollars"))]
    widths = [max(len(row[i]) for row in [header, *rows, total]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = [
            cell.ljust(width) if i < 2 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths)
    text = [line(header), rule, *map(line, rows), rule, line(total)]
    if report.get("unpriced"):
        text.append(f"(price not known for: {', '.join(report['unpriced'])}; not in the total)")
    for life in report.get("lifetimes") or []:
        text.append(
            f"instance {life['instance_name']}: {float(life['total_seconds']):.1f} s from brev create to brev delete"
            f" ({life['task_id']}), {money(life.get('total_dollars'))}; the tasks above account for "
            f"{money(life.get('tasks_dollars'))}, the rest is the time between them."
        )
    return "\n".join(text)
