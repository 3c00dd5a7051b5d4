"""The rules of following many jobs in one triggerer (core/jobs/shared_polls.py)."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.jobs.shared_polls import (
    MAX_FIRST_POLL_DELAY,
    MIN_JOB_BYTES,
    SHARED_POLL_BYTES,
    first_poll_delay,
    may_hold,
    plan_shared_poll,
)


@pytest.mark.parametrize(
    ("instances", "cap", "holds"),
    [(1, 16, True), (12, 16, True), (13, 16, False), (100, 16, False), (1, 2, False), (1, 3, True), (500, 0, True)],
)
def test_polls_wait_on_their_instance_only_while_a_quarter_of_the_cap_stays_free(instances, cap, holds):
    assert may_hold(instances, cap) is holds


def test_the_shortest_wait_wins_and_the_poll_holds_on_the_instance():
    plan = plan_shared_poll([5.0, 0.0, 5.0], [4 * 2**20] * 3, instances_polling=2, process_cap=16)
    assert plan.hold == 0.0 and plan.sleep_first == 0.0
    plan = plan_shared_poll([5.0, 3.5], [100, 200], instances_polling=2, process_cap=16)
    assert (plan.hold, plan.sleep_first, plan.max_bytes) == (3.5, 0.0, (100, 200))


def test_beyond_half_the_cap_the_wait_is_spent_on_the_event_loop_not_in_a_process():
    plan = plan_shared_poll([5.0, 5.0], [100, 100], instances_polling=13, process_cap=16)
    assert (plan.hold, plan.sleep_first) == (0.0, 5.0)


def test_the_log_budget_of_a_poll_is_shared_with_a_floor_per_job():
    one = plan_shared_poll([0.0], [SHARED_POLL_BYTES * 2], instances_polling=1, process_cap=16)
    assert one.max_bytes == (SHARED_POLL_BYTES,)
    many = plan_shared_poll([0.0] * 10, [SHARED_POLL_BYTES] * 10, instances_polling=1, process_cap=16)
    assert many.max_bytes == (SHARED_POLL_BYTES // 10,) * 10
    crowd = plan_shared_poll([0.0] * 200, [SHARED_POLL_BYTES] * 200, instances_polling=1, process_cap=16)
    assert set(crowd.max_bytes) == {MIN_JOB_BYTES}
    small = plan_shared_poll([0.0, 0.0], [10, SHARED_POLL_BYTES], instances_polling=1, process_cap=16)
    assert small.max_bytes == (10, SHARED_POLL_BYTES // 2)


@pytest.mark.parametrize(("waits", "sizes"), [([], []), ([1.0], []), ([1.0, 2.0], [5])])
def test_a_plan_needs_one_wait_and_one_size_per_request(waits, sizes):
    with pytest.raises(ValueError, match="one wait and one size"):
        plan_shared_poll(waits, sizes, instances_polling=1, process_cap=16)


def test_first_polls_are_spread_over_the_interval_never_past_the_deadline():
    assert first_poll_delay(5.0, 0.0) == 0.0
    assert first_poll_delay(5.0, 0.5) == 2.5
    assert first_poll_delay(600.0, 0.5) == MAX_FIRST_POLL_DELAY / 2
    assert first_poll_delay(5.0, 0.9, until_deadline=1.0) == 1.0
    assert first_poll_delay(5.0, 0.9, until_deadline=-3.0) == 0.0
    assert first_poll_delay(5.0, 7.0) == 5.0 and first_poll_delay(-1.0, 0.5) == 0.0
