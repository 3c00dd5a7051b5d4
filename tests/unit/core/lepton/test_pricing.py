"""What a Lepton step's cost estimate is made of (airflow_provider_brev/core/lepton/pricing.py and the follower's
billed time, core/lepton/follower.py): the price of a resource shape -- the step's, the connection's, the provider's
default estimate, or none -- and the time the follower saw the job starting and running."""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from airflow_provider_brev.core.lepton import pricing
from airflow_provider_brev.exceptions import BrevInvalidInputError


@pytest.mark.parametrize(
    ("given", "table"),
    [
        (None, {}),
        ("", {}),
        ({}, {}),
        ({"gpu.8xh100-sxm": 24}, {"gpu.8xh100-sxm": 24.0}),
        ({"cpu.small": "0.05", "gpu.a10.6xlarge": "1.2"}, {"cpu.small": 0.05, "gpu.a10.6xlarge": 1.2}),
        ({"gpu.1xh100-sxm": 0}, {"gpu.1xh100-sxm": 0.0}),  # a node group the workspace pays for anyway
    ],
)
def test_a_price_table_is_shapes_to_dollars_per_hour(given, table):
    assert pricing.shape_prices("shape_prices", given) == table


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ([["gpu.a10", 1.2]], "shape_prices must be a dict of resource shape -> dollars per hour"),
        ({"GPU A10": 1.2}, "shape_prices key must be a Lepton resource shape"),
        ({8: 1.2}, "shape_prices key must be a Lepton resource shape"),  # a DAG's dict keyed by GPU count
        ({"gpu.a10": -1}, r"shape_prices\['gpu.a10'\] must be a number >= 0 of dollars per hour"),
        ({"gpu.a10": "cheap"}, r"shape_prices\['gpu.a10'\] must be a number >= 0"),
        ({"gpu.a10": True}, r"shape_prices\['gpu.a10'\] must be a number >= 0"),
        ({"gpu.a10": float("nan")}, r"shape_prices\['gpu.a10'\] must be a number >= 0"),
    ],
)
def test_a_bad_price_table_is_refused_naming_what_is_wrong(given, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        pricing.shape_prices("shape_prices", given)


@pytest.mark.parametrize(
    ("shape", "estimate"),
    [
        ("cpu.small", 0.05),
        ("cpu.large", 0.20),
        ("gpu.a10", 0.90),
        ("gpu.a10.6xlarge", 0.90),
        ("gpu.1xh100-sxm", 3.00),
        ("gpu.h100-sxm", 3.00),
        ("gpu.8xh100-sxm", 24.00),
        ("gpu.8xh100-80gb", 24.00),
        ("gpu.2xl40s", 3.00),
        ("gpu.4xb200", 22.00),
        ("gpu.3xa10", 2.70),  # 3 x 0.90 is 2.7000000000000006 in floats: the estimate is rounded
        ("gpu.8xmi300x", None),  # a GPU the table does not know
        ("cpu.huge", None),
        ("tpu.v5", None),
    ],
)
def test_the_default_estimate_is_the_gpus_times_their_models_price(shape, estimate):
    assert pricing.default_estimate(shape) == estimate


def test_the_steps_price_wins_then_the_connections_then_the_estimate():
    step, connection = {"gpu.a10": 1.5}, {"gpu.a10": 1.1, "gpu.1xh100-sxm": 2.5}
    price = pricing.shape_price
    assert price("gpu.a10", step_prices=step, connection_prices=connection) == pricing.ShapePrice(
        "gpu.a10", 1.5, pricing.FROM_STEP
    )
    assert price("gpu.1xh100-sxm", step_prices=step, connection_prices=connection).source == pricing.FROM_CONNECTION
    assert price("gpu.8xh100-sxm", step_prices=step, connection_prices=connection) == pricing.ShapePrice(
        "gpu.8xh100-sxm", 24.0, pricing.FROM_ESTIMATE
    )
    unknown = price("gpu.8xmi300x", step_prices=step, connection_prices=connection)
    assert (unknown.price_per_hour, unknown.source) == (None, pricing.UNPRICED)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (pricing.FROM_STEP, "an estimate: Lepton reports no price, the rate is the step's shape_prices"),
        (pricing.FROM_CONNECTION, "the rate is the lepton connection's shape_prices"),
        (pricing.FROM_ESTIMATE, "the provider's default estimate (not NVIDIA's price: set shape_prices)"),
        (pricing.UNPRICED, "an estimate without a rate: Lepton reports no price and nothing prices s.x"),
    ],
)
def test_the_cost_line_says_it_is_an_estimate_and_whose_rate_it_is(source, said):
    assert said in pricing.ShapePrice("s.x", 1.0, source).note()


def _documented_prices() -> tuple[dict[str, float], dict[str, float]]:
    """The default estimates docs/howto/lepton.md promises: per GPU model, and per CPU shape."""
    page = (Path(__file__).parents[4] / "docs" / "howto" / "lepton.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("   | per GPU, $/h |"))
    per_gpu = {
        model: float(price)
        for cell in row.strip(" |").split(" | ")[1:]
        for models, price in [cell.rsplit(" ", 1)]
        for model in models.split(", ")
    }
    cpu_line = next(line for line in page.splitlines() if "`cpu.small`" in line)
    per_cpu_shape = {shape: float(price) for shape, price in re.findall(r"`(cpu\.[a-z]+)` ([0-9.]+)", cpu_line)}
    return per_gpu, per_cpu_shape


def test_the_documented_default_estimates_are_the_shipped_ones():
    per_gpu, per_cpu_shape = _documented_prices()
    assert per_gpu.keys() == pricing.DEFAULT_GPU_HOUR_PRICES.keys()
    assert per_cpu_shape.keys() == pricing.DEFAULT_CPU_SHAPE_PRICES.keys()
    for model, price in per_gpu.items():  # what a step is priced at, for one GPU and for a node of eight
        assert pricing.default_estimate(f"gpu.{model}") == price
        assert pricing.default_estimate(f"gpu.8x{model}-sxm") == pytest.approx(8 * price)
    for shape, price in per_cpu_shape.items():
        assert pricing.default_estimate(shape) == price


def test_a_shape_price_is_a_frozen_value():
    price = pricing.shape_price("gpu.a10", step_prices={}, connection_prices={})
    with pytest.raises(FrozenInstanceError):
        price.price_per_hour = 0.0  # type: ignore[misc]
