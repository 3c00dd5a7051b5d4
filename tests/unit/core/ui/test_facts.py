"""What the Brev page is shaped from (core/ui/facts.py): immutable values, and the task and run states after which
they count as finished -- Airflow's own (``State.finished``, ``State.finished_dr_states``), as the fleet reads them.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest
from airflow.utils.state import DagRunState, State, TaskInstanceState

from airflow_provider_brev.core.instances.records import InstanceRecord
from airflow_provider_brev.core.ui.facts import PageFacts, Pushed, RunFacts
from airflow_provider_brev.core.ui.fleet import fleet

NOW = 1_800_000_000.0


def _facts(*, task_state: str = "running", run_state: str = "running") -> PageFacts:
    """A step (``step``) that created its own instance, in a run of ``run_state``, itself in ``task_state``."""
    record = InstanceRecord("eph", "id-1", owned=True, adopted=False, spec={}, price_per_hour=1.0, created_at=NOW)
    pushed = [Pushed("dag_a", "run_1", "step", -1, "brev_instance", [record.to_dict()])]
    runs = {("dag_a", "run_1"): RunFacts("dag_a", "run_1", run_state, NOW - 60)}
    return PageFacts(pushed, runs, {("dag_a", "run_1", "step", -1): task_state}, [], None, "", NOW)


@pytest.mark.parametrize("state", list(TaskInstanceState), ids=str)
def test_a_steps_own_instance_is_released_exactly_when_airflow_counts_its_task_finished(state) -> None:
    shown = [row.id for row in fleet(_facts(task_state=state.value)).rows]
    assert shown == ([] if state in State.finished else ["id-1"])


@pytest.mark.parametrize("state", list(DagRunState), ids=str)
def test_an_instance_outliving_its_run_is_orphaned_exactly_when_airflow_counts_the_run_finished(state) -> None:
    (row,) = fleet(_facts(run_state=state.value)).rows
    assert row.orphaned == (state in State.finished_dr_states)


def test_the_facts_are_frozen_values() -> None:
    facts = _facts()
    with pytest.raises(FrozenInstanceError):
        facts.now = 0.0  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        facts.pushed[0].value = None  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        facts.runs["dag_a", "run_1"].state = "failed"  # type: ignore[misc]
