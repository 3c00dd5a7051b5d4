"""The cost clock (airflow_provider_brev/cost/meter.py): phases measured across deferrals by their wall-clock
start, their spans, and ``resume``: a phase the task waited in while deferred ends when the trigger saw it end, and
the time until the resumption is ``resume``, never that phase."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_provider_brev.core.cost import cost_line
from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.utils.task_memory import TaskMemory


# -- the cost clock --------------------------------------------------------------------------------------------------
class _TryXCom:
    """The XCom of one try, in a dict."""

    task_id = "step"

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        return self.xcom.get(key)


class _Memory(TaskMemory):
    """The task memory of one try, its XCom in a dict (``xcom``)."""

    def __init__(self) -> None:
        ti = _TryXCom()
        super().__init__({"ti": ti})
        self.xcom = ti.xcom


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, fmt: str, *args: Any) -> None:
        self.lines.append(fmt % args)

    warning = info


def test_the_clock_keeps_an_open_phase_across_a_deferral_by_its_wall_clock_start():
    memory, log = _Memory(), _Log()
    meter = CostMeter(memory, log)  # type: ignore[arg-type]
    meter.begin(at=time.time() - 30)  # brev create was called 30 s ago
    meter.bill_on("box", "g6e.xlarge", 3.6)
    meter.seconds["pull"] = 4.0
    meter.start("work", at=time.time() - 10)
    meter.save()  # the task defers; another process resumes it
    resumed = CostMeter(memory, log)  # type: ignore[arg-type]
    assert resumed.instance == {"name": "box", "type": "g6e.xlarge", "price_per_hour": 3.6}
    with resumed.phase("upload"):
        pass
    cost = resumed.report()
    assert cost is not None and memory.xcom["brev_cost"] == cost
    assert cost["seconds"]["work"] == pytest.approx(10, abs=1)  # wall-clock: started in the other process
    assert cost["seconds"]["pull"] == 4.0
    assert cost["total_seconds"] == pytest.approx(30, abs=1)  # billed since the remembered start
    assert cost["seconds"]["idle"] == pytest.approx(16, abs=1)
    assert log.lines == [cost_line(cost)]
    assert resumed.report() is None  # once


def test_the_clock_reports_nothing_when_no_instance_was_billed_and_refuses_unknown_phases():
    memory, log = _Memory(), _Log()
    meter = CostMeter(memory, log)  # type: ignore[arg-type]
    meter.begin()
    assert meter.report() is None and memory.xcom == {}
    with pytest.raises(ValueError, match="unknown cost phase"):
        meter.start("lunch")
    meter.stop("work")  # not running: nothing happens
    assert meter.seconds == {}
    assert CostMeter(_Memory(), log).billed_seconds() == 0.0  # type: ignore[arg-type]


@pytest.fixture
def ti() -> _TryXCom:
    return _TryXCom()


def meter_of(ti: _TryXCom) -> CostMeter:
    return CostMeter(TaskMemory({"ti": ti}), _Log())


def test_a_job_that_ended_before_the_task_resumed_bills_work_until_its_end_and_resume_after(ti):
    now = time.time()
    meter = meter_of(ti)
    meter.begin(at=now - 40)
    meter.bill_on("box", "g6e.xlarge", 3.6)
    meter.start("work", at=now - 30)
    meter.save()  # deferred: the triggerer follows the job
    resumed = meter_of(ti)  # the job ended 25 s ago; the event was held back, then the worker resumed the task
    resumed.resumed("work", now - 25)
    cost = resumed.report()
    assert cost is not None
    assert cost["seconds"]["work"] == pytest.approx(5, abs=0.5)
    assert cost["seconds"]["resume"] == pytest.approx(25, abs=0.5)
    assert cost["seconds"]["idle"] == pytest.approx(10, abs=0.5)
    assert [span[0] for span in cost["spans"]] == ["work", "resume"]
    work, resume = cost["spans"]
    assert work[2] == resume[1] == pytest.approx(now - 25, abs=0.01)  # one instant: no gap, no overlap
    assert cost["started_at"] == pytest.approx(now - 40, abs=0.01)
    assert cost["ended_at"] - cost["started_at"] == pytest.approx(cost["total_seconds"], abs=0.01)


@pytest.mark.parametrize(
    ("ended_ago", "work", "resume"),
    [
        pytest.param(None, 30, 0, id="no-ended_at-in-the-event"),
        pytest.param("soon", 30, 0, id="not-a-number"),
        pytest.param(-60, 30, 0, id="in-the-future"),
        pytest.param(45, 0, 30, id="before-the-phase-began"),
    ],
)
def test_an_end_time_it_cannot_use_is_kept_within_the_phase(ti, ended_ago, work, resume):
    now = time.time()
    meter = meter_of(ti)
    meter.begin(at=now - 30)
    meter.bill_on("box", "t", 1.0)
    meter.start("work", at=now - 30)
    ended = ended_ago if not isinstance(ended_ago, int) else now - ended_ago
    meter.resumed("work", ended)
    cost = meter.report()
    assert cost is not None
    assert cost["seconds"]["work"] == pytest.approx(work, abs=0.5)
    assert cost["seconds"]["resume"] == pytest.approx(resume, abs=0.5)


def test_resumed_without_that_phase_running_changes_nothing(ti):
    meter = meter_of(ti)
    meter.begin()
    meter.resumed("work", time.time() - 5)
    assert meter.seconds == {} and meter.spans == []


def test_the_spans_and_facts_survive_a_deferral_and_the_report_can_end_at_a_request(ti):
    now = time.time()
    meter = meter_of(ti)
    meter.begin(at=now - 20)
    meter.bill_on("box", "t", 3.6)
    meter.start("stage", at=now - 18)
    meter.stop("stage", at=now - 15)
    meter.note(stopped={"reuse_key": "weekly", "seconds": 60.0})
    meter.save()
    resumed = meter_of(ti)
    assert resumed.spans == [["stage", pytest.approx(now - 18), pytest.approx(now - 15)]]
    cost = resumed.report(until=now - 10)  # e.g. a teardown's delete request; it waited on after it
    assert cost is not None
    assert cost["total_seconds"] == pytest.approx(10, abs=0.05)
    assert cost["seconds"]["stage"] == pytest.approx(3, abs=0.01) and cost["seconds"]["idle"] == pytest.approx(
        7, abs=0.05
    )
    assert cost["stopped"] == {"reuse_key": "weekly", "seconds": 60.0}
    assert ti.xcom["brev_cost"] == cost
