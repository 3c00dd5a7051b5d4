"""What a Lepton job's resource shape costs per hour, estimated (pure).

Lepton's API gives no price, so a Lepton step's ``brev_cost`` is always an estimate, priced from the first of:

1. the step's ``shape_prices`` (``{"gpu.8xh100-sxm": 24.0, ...}``, US dollars per hour);
2. the ``shape_prices`` of the ``lepton`` connection's extra (one table for every step of the workspace);
3. the provider's default estimates: :data:`DEFAULT_CPU_SHAPE_PRICES` for the CPU shapes, and for a GPU shape
   (``gpu.<n>x<model>[-variant][.size]``) ``n`` times the model's :data:`DEFAULT_GPU_HOUR_PRICES`. These are
   rough public-cloud list prices, **not NVIDIA's price for your workspace**: set ``shape_prices`` to yours.

A shape none of them prices has no price (``None``: the cost's dollars are unknown, never made up).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_brev.core.lepton.spec import SHAPE_RE
from airflow_provider_brev.core.values import is_empty, non_negative, refuse

#: Estimated US dollars per hour of one GPU, by the model a shape names. Not NVIDIA's prices: an estimate.
DEFAULT_GPU_HOUR_PRICES: dict[str, float] = {
    "b200": 5.50,
    "h200": 3.80,
    "h100": 3.00,
    "a100": 2.00,
    "l40s": 1.50,
    "l40": 1.30,
    "a10": 0.90,
    "a10g": 0.90,
    "l4": 0.80,
    "t4": 0.50,
}
#: Estimated US dollars per hour of the CPU shapes. Not NVIDIA's prices: an estimate.
DEFAULT_CPU_SHAPE_PRICES: dict[str, float] = {"cpu.small": 0.05, "cpu.medium": 0.10, "cpu.large": 0.20}
#: Where a price came from (the cost's ``price_source``).
FROM_STEP = "step"
FROM_CONNECTION = "connection"
FROM_ESTIMATE = "default estimate"
UNPRICED = "unknown"

_GPU_SHAPE_RE = re.compile(r"^gpu\.(?:(?P<count>\d+)x)?(?P<model>[a-z0-9]+)(?:-[a-z0-9-]+)?(?:\.[a-z0-9.-]+)?$")


@dataclass(frozen=True)
class ShapePrice:
    """The price of a resource shape and where it came from.

    :param shape: the resource shape.
    :param price_per_hour: US dollars per hour, or ``None`` when nothing prices the shape.
    :param source: :data:`FROM_STEP`, :data:`FROM_CONNECTION`, :data:`FROM_ESTIMATE` or :data:`UNPRICED`.
    """

    shape: str
    price_per_hour: float | None
    source: str

    def note(self) -> str:
        """What the cost line says of it (every Lepton cost is an estimate)."""
        if self.source == UNPRICED:
            return f"an estimate without a rate: Lepton reports no price and nothing prices {self.shape} (set shape_prices)"
        where = {
            FROM_STEP: "the step's shape_prices",
            FROM_CONNECTION: "the lepton connection's shape_prices",
            FROM_ESTIMATE: "the provider's default estimate (not NVIDIA's price: set shape_prices)",
        }[self.source]
        return f"an estimate: Lepton reports no price, the rate is {where}"


def shape_prices(name: str, value: Any) -> dict[str, float]:
    """A price table ``{resource shape: US dollars per hour}`` (numbers or numeric text, ``>= 0``); ``{}`` when
    empty.

    :param name: what the table is, for messages (``shape_prices``, or the connection's extra).
    :param value: the rendered value.
    """
    if is_empty(value):
        return {}
    if not isinstance(value, dict):
        refuse(name, value, 'a dict of resource shape -> dollars per hour, e.g. {"gpu.8xh100-sxm": 24.0}')
    prices: dict[str, float] = {}
    for shape, price in value.items():
        if not isinstance(shape, str) or not SHAPE_RE.match(shape):
            refuse(f"{name} key", shape, "a Lepton resource shape such as 'gpu.8xh100-sxm' or 'cpu.small'")
        prices[shape] = non_negative(f"{name}[{shape!r}]", price, unit="dollars per hour")
    return prices


def default_estimate(shape: str) -> float | None:
    """The provider's estimate for ``shape`` (see the module docstring), ``None`` when it has none."""
    if shape in DEFAULT_CPU_SHAPE_PRICES:
        return DEFAULT_CPU_SHAPE_PRICES[shape]
    match = _GPU_SHAPE_RE.match(shape)
    if match is None or match["model"] not in DEFAULT_GPU_HOUR_PRICES:
        return None
    return round(int(match["count"] or 1) * DEFAULT_GPU_HOUR_PRICES[match["model"]], 6)


def shape_price(shape: str, *, step_prices: dict[str, float], connection_prices: dict[str, float]) -> ShapePrice:
    """The price of ``shape``: the step's, the connection's, the default estimate, or none (in that order).

    :param shape: the job's resource shape.
    :param step_prices: the step's ``shape_prices`` (checked by :func:`shape_prices`).
    :param connection_prices: the connection's ``shape_prices``.
    """
    if shape in step_prices:
        return ShapePrice(shape, step_prices[shape], FROM_STEP)
    if shape in connection_prices:
        return ShapePrice(shape, connection_prices[shape], FROM_CONNECTION)
    estimate = default_estimate(shape)
    return ShapePrice(shape, estimate, FROM_ESTIMATE if estimate is not None else UNPRICED)
