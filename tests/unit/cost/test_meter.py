"""Unit tests of ``airflow_provider_brev/cost/meter.py``."""

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
