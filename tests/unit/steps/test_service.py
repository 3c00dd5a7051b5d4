"""Unit tests of ``airflow_provider_brev/steps/service.py``: the step engine over a scripted compute.

:class:`ScriptedCompute` implements the compute port (:class:`~airflow_provider_brev.steps.compute.Compute`) and
records every call the engine makes; a test scripts what a phase does (return, raise, call back) and asserts the
order of the phases, what the engine keeps in the task's memory (a real
:class:`~airflow_provider_brev.utils.task_memory.TaskMemory` over an in-memory XCom), and that what the compute holds
is released after a failure and after a kill.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from airflow_provider_brev.exceptions import BrevError, BrevInstanceLostError, BrevTaskKilledError
from airflow_provider_brev.jobs.handle import XCOM_JOB
from airflow_provider_brev.steps import service
from airflow_provider_brev.steps.compute import FollowAgain, StepTask, Tries
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from collections.abc import Callable


class Deferred(Exception):
    """The task deferred with ``trigger`` (what the operator's ``defer`` raises: Airflow's ``TaskDeferred``)."""

    def __init__(self, trigger: Any) -> None:
        super().__init__("deferred")
        self.trigger = trigger


@dataclass
class FakeTaskInstance:
    """A task instance as the engine and the task memory use it: identity, try and an in-memory XCom."""

    try_number: int = 1
    max_tries: int = 2
    dag_id: str = "d"
    task_id: str = "step"
    run_id: str = "manual__1"
    map_index: int = -1
    xcom: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        return self.xcom.get(key) if task_ids == self.task_id else None


@dataclass(frozen=True)
class Ended:
    """A job's outcome as the engine sees it."""

    collected: bool = True


class ScriptedCompute:
    """A compute whose phases are scripted: each call is recorded in :attr:`calls`; ``script[phase]`` (a callable
    taking the call's arguments) replaces a phase's default behaviour (raise to fail it)."""

    event_fields = ("job",)

    def __init__(self, script: dict[str, Callable[..., Any]], *, foreground: bool = False) -> None:
        self.script = script
        self.calls: list[str] = []
        self.handles: list[Any] = []
        self._foreground = foreground

    @property
    def foreground(self) -> bool:
        return self._foreground

    def _call(self, phase: str, default: Any, *args: Any) -> Any:
        self.calls.append(phase)
        action = self.script.get(phase)
        return action(*args) if action is not None else default

    def check(self) -> None:
        self._call("check", None)

    def mask(self) -> None:
        self._call("mask", None)

    def acquire(self) -> None:
        self._call("acquire", None)

    def prepare(self) -> None:
        self._call("prepare", None)

    def run_foreground(self, deadline: float | None) -> Any:
        return self._call("run_foreground", "foreground result", deadline)

    def own_job(self, tries: Tries) -> str:
        return f"job-t{tries.try_number}"

    def job_of(self, record: Any) -> str | None:
        return record.get("job") if record else None

    def attach_or_launch(self, tries: Tries) -> dict[str, Any]:
        return self._call("attach_or_launch", {"job": self.own_job(tries)}, tries)

    def follow(self, handle: dict[str, Any], deadline: float | None) -> Any:
        self.handles.append(handle)
        return self._call("follow", Ended(), handle, deadline)

    def trigger(self, handle: dict[str, Any], deadline: float | None, *, not_before: float, resume: dict) -> Any:
        self.handles.append(handle)
        return self._call("trigger", SimpleNamespace(handle=handle, resume=resume), handle, deadline)

    def resume(self, event: dict[str, Any]) -> dict[str, Any]:
        return self._call("resume", {"job": event["job"]}, event)

    def outcome(self, handle: dict[str, Any], event: dict[str, Any]) -> Any:
        return self._call("outcome", Ended(), handle, event)

    def collect(self, handle: dict[str, Any], outcome: Any) -> Any:
        return self._call("collect", f"result of {handle['job']}", handle, outcome)

    def recover(self, error: BrevError) -> None:
        self.calls.append("recover")
        action = self.script.get("recover")
        if action is None:
            raise error  # the default: not recoverable
        action(error)

    def release(self) -> None:
        self._call("release", None)

    def suspend(self) -> None:
        self._call("suspend", None)

    def on_kill(self, handle: dict[str, Any] | None) -> None:
        self.handles.append(handle)
        self._call("on_kill", None, handle)


def engine(
    monkeypatch,
    script: dict[str, Callable[..., Any]] | None = None,
    *,
    ti: FakeTaskInstance | None = None,
    deferrable: bool = False,
    foreground: bool = False,
    timeout: float | None = None,
) -> tuple[service.StepService, ScriptedCompute]:
    """A step engine over a new :class:`ScriptedCompute` (registered in ``COMPUTES`` for this test only)."""
    compute = ScriptedCompute(script or {}, foreground=foreground)
    monkeypatch.setitem(service.COMPUTES, "scripted", lambda spec, workload, task: compute)
    ti = ti or FakeTaskInstance()
    log = SimpleNamespace(warning=lambda *args: None)
    task = StepTask(operator=None, log=log, memory=TaskMemory({"ti": ti}), killed=lambda: False)
    spec = SimpleNamespace(follow=SimpleNamespace(timeout=timeout, deferrable=deferrable))

    def defer(trigger: Any) -> Any:
        raise Deferred(trigger)

    step = service.StepService("scripted", spec=spec, workload=None, task=task, retries=1, defer=defer)
    return step, compute


WORKER_PHASES = ["check", "acquire", "prepare", "attach_or_launch", "follow", "collect", "release"]


def test_a_step_on_the_worker_runs_its_phases_in_order_and_releases_last(monkeypatch):
    step, compute = engine(monkeypatch, timeout=600)
    assert step.execute() == "result of job-t1"
    assert compute.calls == WORKER_PHASES
    (followed,) = compute.handles
    assert followed["job"] == "job-t1" and followed["try_number"] == 1 and followed["deadline"] is not None


def test_the_job_handle_is_kept_in_the_task_memory_before_the_job_is_followed(monkeypatch):
    ti = FakeTaskInstance(try_number=2)
    seen: list[Any] = []

    def follow(handle: dict[str, Any], deadline: float | None) -> Ended:
        seen.append(ti.xcom.get(XCOM_JOB))
        return Ended()

    step, _compute = engine(monkeypatch, {"follow": follow}, ti=ti)
    step.execute()
    assert seen == [{"job": "job-t2", "deadline": None, "try_number": 2}]


def test_a_foreground_command_is_neither_launched_nor_followed(monkeypatch):
    step, compute = engine(monkeypatch, foreground=True)
    assert step.execute() == "foreground result"
    assert compute.calls == ["check", "acquire", "prepare", "run_foreground", "release"]


def test_a_failed_check_acquires_nothing_and_has_nothing_to_release(monkeypatch):
    def refuse() -> None:
        raise BrevError("bad parameters")

    step, compute = engine(monkeypatch, {"check": refuse})
    with pytest.raises(BrevError, match="bad parameters"):
        step.execute()
    assert compute.calls == ["check"]


@pytest.mark.parametrize("failing", ["acquire", "prepare", "attach_or_launch", "follow", "collect"])
def test_a_failure_in_any_later_phase_still_releases_what_the_compute_holds(monkeypatch, failing):
    def fail(*_args: Any) -> None:
        raise BrevError(f"{failing} failed")

    step, compute = engine(monkeypatch, {failing: fail})
    with pytest.raises(BrevError, match=f"{failing} failed"):
        step.execute()
    assert compute.calls[-1] == "release" and compute.calls.count("release") == 1
    reached = WORKER_PHASES.index(failing) + 1
    assert compute.calls[:reached] == WORKER_PHASES[:reached]
    # acquire's own failure is not the compute's to recover; every later one is (here it re-raises)
    assert ("recover" in compute.calls) == (failing != "acquire")


def test_a_recovered_failure_runs_the_step_again_from_prepare(monkeypatch):
    lost = iter([True, False])

    def follow(handle: dict[str, Any], deadline: float | None) -> Ended:
        if next(lost):
            raise BrevInstanceLostError("the instance is gone")
        return Ended()

    step, compute = engine(monkeypatch, {"follow": follow, "recover": lambda error: None})
    assert step.execute() == "result of job-t1"
    assert compute.calls == [
        *["check", "acquire", "prepare", "attach_or_launch", "follow", "recover"],
        *["prepare", "attach_or_launch", "follow", "collect", "release"],
    ]


def test_a_deferring_step_suspends_instead_of_releasing_and_the_resumed_one_releases(monkeypatch):
    ti = FakeTaskInstance()
    step, compute = engine(monkeypatch, ti=ti, deferrable=True)
    with pytest.raises(Deferred) as deferred:
        step.execute()
    assert compute.calls == ["check", "acquire", "prepare", "attach_or_launch", "trigger", "suspend"]
    assert deferred.value.trigger.handle["job"] == "job-t1"

    resumed, compute = engine(monkeypatch, ti=ti, deferrable=True)  # a new process for the resumed task
    assert resumed.execute_complete({"status": "success", "message": "done", "job": "job-t1"}) == "result of job-t1"
    assert compute.calls == ["mask", "resume", "outcome", "collect", "release"]


def test_an_event_that_is_not_the_end_defers_again_from_its_resume_point(monkeypatch):
    step, compute = engine(monkeypatch, {"outcome": lambda handle, event: FollowAgain({"offset": 7})}, deferrable=True)
    with pytest.raises(Deferred) as deferred:
        step.execute_complete({"status": "success", "message": "outputs due", "job": "job-t1"})
    assert deferred.value.trigger.resume == {"offset": 7}
    assert compute.calls == ["mask", "resume", "outcome", "trigger", "suspend"]


def test_the_event_of_an_earlier_try_runs_this_try_from_the_start(monkeypatch):
    step, compute = engine(monkeypatch, ti=FakeTaskInstance(try_number=2))
    assert step.execute_complete({"status": "success", "message": "done", "job": "job-t1"}) == "result of job-t2"
    assert compute.calls == WORKER_PHASES


def test_a_kill_while_following_hands_the_compute_the_job_and_the_try_still_releases(monkeypatch):
    def killed_while_following(handle: dict[str, Any], deadline: float | None) -> None:
        step.on_kill()  # Airflow's kill thread, while the worker follows the job
        raise BrevTaskKilledError("killed")

    step, compute = engine(monkeypatch, {"follow": killed_while_following})
    with pytest.raises(BrevTaskKilledError):
        step.execute()
    assert compute.calls == [*WORKER_PHASES[:5], "on_kill", "recover", "release"]
    followed, killed = compute.handles
    assert killed == followed and killed["job"] == "job-t1"


def test_a_kill_in_a_new_process_finds_the_job_in_the_task_memory(monkeypatch):
    ti = FakeTaskInstance()
    step, _compute = engine(monkeypatch, ti=ti, deferrable=True)
    with pytest.raises(Deferred):
        step.execute()
    killer, compute = engine(monkeypatch, ti=ti)  # the deferred task killed: a new process, nothing in it
    killer.on_kill()
    assert compute.calls == ["on_kill"]
    assert compute.handles == [{"job": "job-t1", "deadline": None, "try_number": 1}]


def test_a_kill_before_any_launch_hands_the_compute_no_job(monkeypatch):
    step, compute = engine(monkeypatch)
    step.on_kill()
    assert compute.calls == ["on_kill"] and compute.handles == [None]
