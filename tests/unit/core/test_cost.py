"""The pure cost model (airflow_provider_brev/core/cost.py): caps, per-phase dollars, a step's and an instance's
cost. The run's bill and table: tests/unit/core/test_bill.py; the cost clock: tests/unit/cost/test_meter.py."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.cost import (
    CURRENCY,
    PHASES,
    CostLimits,
    PriceCap,
    check_run_cost,
    choice_note,
    cost_limits,
    cost_line,
    costs_in,
    dollars,
    is_cost,
    lifetime_cost,
    money,
    rate,
    resumed_at,
    step_cost,
    unset_cap_warnings,
)
from airflow_provider_brev.exceptions import (
    BrevCostCapError,
    BrevInvalidInputError,
    BrevNoMatchingTypeError,
    BrevPriceCapError,
    retry_policy,
)

PRICES = {"g5.xlarge": 1.21, "g6e.xlarge": 2.24, "p5.48xlarge": 98.32}


# -- amounts -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("price", "seconds", "expected"),
    [
        (3.6, 3600, 3.6),
        (3.6, 1, 0.001),
        (2.24, 90, 0.056),
        (1.21, 1.2345, 0.000415),  # rounded to 6 decimals
        (2.24, -5, 0.0),  # negative time bills nothing
        (None, 100, None),  # unknown price: no made-up number
        (0.0, 100, 0.0),
    ],
)
def test_dollars_are_price_times_hours(price, seconds, expected):
    assert dollars(price, seconds) == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "$?"),
        (0.0, "$0.0000"),
        (0.00123, "$0.0012"),
        (0.99999, "$1.0000"),
        (1.0, "$1.00"),
        (12.345, "$12.35"),
        (1234.5, "$1,234.50"),
        (-2.5, "$-2.50"),
    ],
)
def test_money(value, text):
    assert money(value) == text


def test_the_currency_and_the_phases():
    assert CURRENCY == "USD"
    assert PHASES == ("boot", "pull", "stage", "work", "resume", "upload", "idle")


def test_limits_and_caps_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CostLimits(1.0).max_price_per_hour = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PriceCap(1.0).per_hour = 2.0  # type: ignore[misc]


def test_rate():
    assert rate(2.24) == "$2.24/h"
    assert rate(98.32) == "$98.32/h"
    assert rate(None) == "$?/h"
    assert rate(0.5) == "$0.50/h"


# -- caps ------------------------------------------------------------------------------------------------------------
def test_cost_limits_are_checked_numbers_and_max_run_cost_needs_a_timeout():
    assert cost_limits(None, None, timeout=None) == CostLimits(None, None)
    assert cost_limits("", "", timeout=None) == CostLimits(None, None)  # an empty template: not given
    assert cost_limits("2.5", "10", timeout=60.0) == CostLimits(2.5, 10.0)
    assert cost_limits(3, None, timeout=None) == CostLimits(3.0, None)
    with pytest.raises(BrevInvalidInputError, match=r"^max_price_per_hour must be a positive number of dollars per h"):
        cost_limits("cheap", None, timeout=None)
    with pytest.raises(BrevInvalidInputError, match="max_price_per_hour must be a positive number"):
        cost_limits(0, None, timeout=None)
    with pytest.raises(BrevInvalidInputError, match=r"^max_run_cost must be a positive number of dollars, got -1"):
        cost_limits(None, -1, timeout=60.0)
    with pytest.raises(BrevInvalidInputError) as needs:
        cost_limits(None, "5", timeout=None)
    assert str(needs.value).startswith("max_run_cost=5 needs timeout: ")
    assert "Pass timeout (seconds or a timedelta) or drop max_run_cost." in str(needs.value)


def test_the_price_cap_is_the_lower_of_both_limits():
    assert CostLimits().price_cap(600.0) is None
    assert CostLimits(2.0).price_cap(None) == PriceCap(2.0, 2.0, None, None)
    # $1 for 1800 s allows $2/h
    assert CostLimits(None, 1.0).price_cap(1800.0) == PriceCap(2.0, None, 1.0, 1800.0)
    assert CostLimits(None, 1.0).price_cap(None) is None  # no estimate: nothing to derive
    assert CostLimits(None, 1.0).price_cap(0.0) is None
    assert CostLimits(1.5, 1.0).price_cap(1800.0).per_hour == 1.5  # the price cap is lower
    assert CostLimits(3.0, 1.0).price_cap(1800.0).per_hour == 2.0  # the cost cap is lower


def test_which_limit_sets_the_cap():
    assert PriceCap(2.0, max_price_per_hour=2.0).from_cost is False
    assert PriceCap(2.0, max_run_cost=1.0, estimate_seconds=1800.0).from_cost is True
    assert PriceCap(2.0, max_price_per_hour=3.0, max_run_cost=1.0, estimate_seconds=1800.0).from_cost is True
    assert PriceCap(2.0, max_price_per_hour=2.0, max_run_cost=1.0, estimate_seconds=1800.0).from_cost is False


def test_admit_keeps_the_types_within_the_cap_in_their_order():
    cap = PriceCap(2.24, max_price_per_hour=2.24)
    assert cap.admit(["g6e.xlarge", "g5.xlarge", "p5.48xlarge"], PRICES) == ["g6e.xlarge", "g5.xlarge"]
    assert cap.admit(["g6e.xlarge"], PRICES) == ["g6e.xlarge"]  # exactly the cap is within it
    assert PriceCap(1.5).admit(["g5.xlarge", "unknown.type"], PRICES) == ["g5.xlarge"]  # no price: not admitted
    # $2.24 for 3600 s is exactly $2.24/h, whatever float noise the division leaves
    assert CostLimits(None, 2.24).price_cap(3600.0).admit(["g6e.xlarge"], PRICES) == ["g6e.xlarge"]
    assert CostLimits(None, 0.56).price_cap(900.0).admit(["g6e.xlarge"], PRICES) == ["g6e.xlarge"]
    with pytest.raises(BrevPriceCapError):
        PriceCap(2.239999).admit(["g6e.xlarge"], PRICES)
    # prices and caps compare to the millionth of a dollar
    assert PriceCap(2.24).admit(["noisy"], {"noisy": 2.2400004}) == ["noisy"]
    assert PriceCap(2.2399996).admit(["g6e.xlarge"], PRICES) == ["g6e.xlarge"]


@pytest.mark.parametrize(
    ("parameters", "warned"),
    [
        ({"max_price_per_hour": "None", "max_run_cost": ""}, ["max_price_per_hour", "max_run_cost"]),
        ({"max_price_per_hour": " none "}, ["max_price_per_hour"]),
        ({"max_price_per_hour": None, "max_run_cost": None}, []),  # left out: no cap, nothing to say
        ({"max_price_per_hour": "2.5", "max_run_cost": 1.0, "timeout": ""}, []),
    ],
)
def test_a_cap_rendered_to_nothing_is_warned_about(parameters, warned):
    warnings = unset_cap_warnings(parameters)
    assert [w.split(" ", 1)[0] for w in warnings] == warned
    assert all("so no " in w and "cap applies to this task" in w for w in warnings)


def test_admit_refuses_with_the_cap_that_binds():
    with pytest.raises(BrevPriceCapError) as price:
        PriceCap(1.0, max_price_per_hour=1.0).admit(["g6e.xlarge", "mystery"], PRICES)
    assert str(price.value) == (
        "No instance type within max_price_per_hour=$1.00/h: the candidates are g6e.xlarge at $2.24/h, mystery at "
        "$?/h. Raise max_price_per_hour or ask for a cheaper GPU or type (`brev search` lists prices). Nothing was "
        "created."
    )
    assert isinstance(price.value, BrevNoMatchingTypeError) and retry_policy(price.value) == "never"
    with pytest.raises(BrevPriceCapError, match="the candidates are none"):
        PriceCap(1.0).admit([], PRICES)
    with pytest.raises(BrevCostCapError) as cost:
        PriceCap(1.0, max_price_per_hour=5.0, max_run_cost=0.5, estimate_seconds=1800.0).admit(["g6e.xlarge"], PRICES)
    assert str(cost.value) == (
        "No instance type fits max_run_cost=$0.5000: the step may bill up to 0.50 h (ready_timeout + timeout), so "
        "it may create an instance at $1.00/h at most; the candidates are g6e.xlarge at $2.24/h. Raise "
        "max_run_cost, shorten timeout or ready_timeout, or ask for a cheaper GPU (`brev search`). Nothing was "
        "created."
    )
    assert retry_policy(cost.value) == "never"
    with pytest.raises(BrevCostCapError, match="the step may bill up to 0.00 h"):  # no estimate given
        PriceCap(1.0, max_run_cost=0.5).admit(["g6e.xlarge"], PRICES)


def test_check_run_cost_on_an_existing_instance():
    check_run_cost(None, price_per_hour=None, estimate_seconds=3600, instance_name="b", instance_type="t")
    check_run_cost(2.24, price_per_hour=2.24, estimate_seconds=3600, instance_name="b", instance_type="t")  # equal
    check_run_cost(2.2400000001, price_per_hour=2.24, estimate_seconds=3600, instance_name="b", instance_type="t")
    check_run_cost(2.2399996, price_per_hour=2.24, estimate_seconds=3600, instance_name="b", instance_type="t")
    with pytest.raises(BrevCostCapError):
        check_run_cost(2.239999, price_per_hour=2.24, estimate_seconds=3600, instance_name="b", instance_type="t")
    check_run_cost(5.0, price_per_hour=2.24, estimate_seconds=7200, instance_name="b", instance_type="t")
    with pytest.raises(BrevCostCapError) as over:
        check_run_cost(2.0, price_per_hour=2.24, estimate_seconds=3600, instance_name="box", instance_type="g6e")
    assert str(over.value) == (
        "The step may cost $2.24 (1.00 h at $2.24/h on instance 'box' (g6e)), more than max_run_cost=$2.00. Raise "
        "max_run_cost or shorten timeout. Nothing was launched."
    )
    with pytest.raises(BrevCostCapError) as unknown:
        check_run_cost(2.0, price_per_hour=None, estimate_seconds=60, instance_name="box", instance_type="")
    assert str(unknown.value) == (
        "max_run_cost=$2.00 cannot be checked: the price of instance 'box' (type unknown) is not known (`brev "
        "search` does not list it). Drop max_run_cost for this step or run it on a listed type. Nothing was launched."
    )


@pytest.mark.parametrize(
    ("chosen", "candidates", "note"),
    [
        ("g5.xlarge", ["g5.xlarge", "g6e.xlarge"], "type g5.xlarge at $1.21/h, cheapest of 2"),
        ("g6e.xlarge", ["g6e.xlarge"], "type g6e.xlarge at $2.24/h"),
        ("g6e.xlarge", [], "type g6e.xlarge at $2.24/h"),
        ("g6e.xlarge", ["a", "b"], "type g6e.xlarge at $2.24/h"),  # no candidate priced
        (
            "g6e.xlarge",
            ["g5.xlarge", "g6e.xlarge", "p5.48xlarge"],
            "type g6e.xlarge at $2.24/h, of 3 candidates from $1.21/h (cheaper ones were not available)",
        ),
        ("mystery", ["mystery"], "type mystery (price not listed by `brev search`)"),
        ("", [], "type ? (price not listed by `brev search`)"),
    ],
)
def test_the_create_log_names_the_price(chosen, candidates, note):
    assert choice_note(chosen, candidates, PRICES) == note


# -- a step's cost -------------------------------------------------------------------------------------------------
def test_step_cost_prices_every_phase_and_the_rest_is_idle():
    cost = step_cost(
        instance_name="box",
        instance_type="g6e.xlarge",
        price_per_hour=3.6,
        phases={"boot": 10, "pull": 5.0004, "work": 100, "upload": -1},
        billed_seconds=120,
    )
    assert cost == {
        "instance_name": "box",
        "instance_type": "g6e.xlarge",
        "price_per_hour": 3.6,
        "currency": CURRENCY,
        "seconds": {
            "boot": 10.0,
            "pull": 5.0,
            "stage": 0.0,
            "work": 100.0,
            "resume": 0.0,
            "upload": 0.0,
            "idle": 5.0,
        },
        "dollars": {
            "boot": 0.01,
            "pull": 0.005,
            "stage": 0.0,
            "work": 0.1,
            "resume": 0.0,
            "upload": 0.0,
            "idle": 0.005,
        },
        "total_seconds": 120.0,
        "total_dollars": 0.12,
    }
    assert list(cost["seconds"]) == list(PHASES) == ["boot", "pull", "stage", "work", "resume", "upload", "idle"]


def test_step_cost_idle_adds_the_unmeasured_rest_never_a_negative_one():
    over = step_cost(instance_name="b", instance_type="t", price_per_hour=1.0, phases={"work": 10}, billed_seconds=8)
    assert over["seconds"]["idle"] == 0.0 and over["total_seconds"] == 10.0
    both = step_cost(
        instance_name="b", instance_type="t", price_per_hour=1.0, phases={"work": 10, "idle": 1}, billed_seconds=15
    )
    assert both["seconds"]["idle"] == 5.0 and both["total_seconds"] == 15.0
    unbilled = step_cost(instance_name="b", instance_type="t", price_per_hour=1.0, phases={"idle": 2})
    assert unbilled["seconds"]["idle"] == 2.0 and unbilled["total_seconds"] == 2.0
    fine = step_cost(
        instance_name="b", instance_type="t", price_per_hour=1.0, phases={"work": 1.23456}, billed_seconds=2.0
    )
    assert (fine["seconds"]["work"], fine["seconds"]["idle"], fine["total_seconds"]) == (1.235, 0.765, 2.0)
    rest = step_cost(
        instance_name="b", instance_type="t", price_per_hour=1.0, phases={"work": 1.235}, billed_seconds=2.0004
    )
    assert rest["seconds"]["idle"] == 0.765  # milliseconds
    rounded = step_cost(instance_name="b", instance_type="t", price_per_hour=1.0, phases={"work": 1.23456})
    assert rounded["total_seconds"] == 1.235  # milliseconds


def test_step_cost_without_a_price_has_no_dollars_and_refuses_unknown_phases():
    cost = step_cost(instance_name="b", instance_type="t", price_per_hour=None, phases={"work": 10})
    assert cost["total_dollars"] is None and set(cost["dollars"].values()) == {None}
    with pytest.raises(ValueError, match="unknown cost phase"):
        step_cost(instance_name="b", instance_type="t", price_per_hour=1.0, phases={"lunch": 1})


def test_lifetime_cost():
    life = lifetime_cost(instance_name="b", instance_type="t", price_per_hour=3.6, created_at=100.0, ended_at=200.0)
    assert life == {
        "instance_name": "b",
        "instance_type": "t",
        "price_per_hour": 3.6,
        "currency": CURRENCY,
        "created_at": 100.0,
        "deleted_at": 200.0,
        "ended_at": 200.0,
        "ended_by": "delete",
        "total_seconds": 100.0,
        "total_dollars": 0.1,
    }
    backwards = lifetime_cost(instance_name="b", instance_type="t", price_per_hour=1, created_at=5.0, ended_at=1.0)
    assert backwards["total_seconds"] == 0.0
    fine = lifetime_cost(instance_name="b", instance_type="t", price_per_hour=1, created_at=0.0, ended_at=1.23456)
    assert fine["total_seconds"] == 1.235


@pytest.mark.parametrize(
    ("ended_at", "expected"),
    [
        pytest.param(15.0, 15.0, id="the-event-s-end"),
        pytest.param(5.0, 10.0, id="before-the-phase-began"),
        pytest.param(25.0, 20.0, id="after-the-resumption"),
        pytest.param(None, 20.0, id="no-end-in-the-event"),
        pytest.param("15", 20.0, id="text"),
        pytest.param(True, 20.0, id="a-bool"),
        pytest.param(12, 12.0, id="an-int"),
    ],
)
def test_a_deferred_phase_ends_at_the_event_s_end_within_the_phase(ended_at, expected):
    assert resumed_at(10.0, ended_at, 20.0) == expected


def test_step_cost_carries_its_window_and_spans_rounded_to_milliseconds():
    cost = step_cost(
        instance_name="b",
        instance_type="t",
        price_per_hour=1.0,
        phases={"work": 2},
        billed_seconds=3,
        window=(10.00049, 13.0004),
        spans=[("work", 10.5, 12.5004)],
    )
    assert (cost["started_at"], cost["ended_at"], cost["spans"]) == (10.0, 13.0, [["work", 10.5, 12.5]])
    assert "spans" not in step_cost(instance_name="b", instance_type="t", price_per_hour=1.0, phases={})


def test_the_cost_line_names_total_rate_and_the_phases_that_took_time():
    cost = step_cost(
        instance_name="b", instance_type="g6e.xlarge", price_per_hour=2.24, phases={"pull": 3.04, "work": 60}
    )
    assert cost_line(cost) == "Cost: $0.0392 for 63.0 s on g6e.xlarge at $2.24/h (pull 3.0 s, work 60.0 s)."
    empty = step_cost(instance_name="b", instance_type="", price_per_hour=None, phases={})
    assert cost_line(empty) == "Cost: $? for 0.0 s on ? at $?/h (no billed time)."
    assert cost_line({}) == "Cost: $? for 0.0 s on ? at $?/h (no billed time)."


def test_costs_in_an_xcom_value():
    cost = step_cost(instance_name="b", instance_type="t", price_per_hour=1.0, phases={"work": 1})
    assert is_cost(cost) and not is_cost({"seconds": {}}) and not is_cost(None) and not is_cost({"total_seconds": 1})
    assert costs_in(cost) == [cost]
    assert costs_in([cost, None, [cost]]) == [cost, cost]  # a mapped task's list
    assert costs_in(None) == [] and costs_in("x") == []
