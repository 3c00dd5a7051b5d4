"""``on_kill`` runs inside Airflow's SIGTERM handler, on the task's main thread, which the signal may have interrupted
while it held the log handler's lock (structlog's ``WriteLogger`` lock is not reentrant). A cleanup that logs from
the handler itself then waits for that lock forever: the task hangs until it is SIGKILLed and nothing is cleaned up
(seen in CI: a worker stuck in ``on_kill`` -> ``WriteLogger.msg`` while ``attach_or_launch`` was logging).

These tests make that interleaving certain instead of lucky: a thread stands for the task's main thread, holds the
operator's real log lock (the lock its log lines take) and calls ``on_kill`` the way the handler would.
"""

from __future__ import annotations

import threading

import pytest
from helpers import cli_calls

from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.operators.base import ON_KILL_HANDLER_WAIT
from airflow_provider_brev.operators.brev import BrevCreateInstanceOperator


def write_lock_of(logger) -> threading.Lock:
    """The lock the logger's output takes for every line (structlog's ``WriteLogger``/``BytesLogger``)."""
    if not hasattr(logger, "bind"):  # Airflow 3.0: stdlib logging, whose handlers take reentrant locks
        pytest.skip("this Airflow logs through stdlib logging handlers, whose locks are reentrant")
    bound = logger.bind()
    output = getattr(bound, "_logger", None)
    lock = getattr(output, "_lock", None)
    if lock is None:
        pytest.skip(f"this Airflow logs through {type(output).__name__}, which takes no per-stream lock")
    return lock


def created_by_this_try(task: BrevCreateInstanceOperator, view: dict) -> None:
    """What ``execute`` leaves for ``on_kill`` once ``brev create`` returned: the instance, with its id."""
    task.provisioner(task.spec()).created = BrevInstance(name=view["name"], id=view["id"], status=view["status"])


def finish_cleanup(task: BrevCreateInstanceOperator) -> None:
    """Wait (bounded) for the kill's cleanup thread to end."""
    thread = task._kill_cleanup
    assert thread is not None, "on_kill started no cleanup"
    thread.join(120)
    assert not thread.is_alive(), "the kill cleanup did not end within 120 s"


def test_on_kill_called_while_the_main_thread_holds_the_log_lock_does_not_deadlock(brev_sim, monkeypatch, task_logs):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    view = brev_sim.create_instance_directly("killed-mid-log")
    task = BrevCreateInstanceOperator(task_id="create", instance_name="killed-mid-log", gpu="L40S:1")
    created_by_this_try(task, view)  # on_kill deletes it
    lock = write_lock_of(task.log)
    returned = threading.Event()

    def main_thread_interrupted_while_logging() -> None:
        with lock:  # the interrupted log write
            task.on_kill()  # what Airflow's SIGTERM handler calls
        returned.set()
        task.wait_for_kill_cleanup()  # the end of execute

    worker = threading.Thread(target=main_thread_interrupted_while_logging, daemon=True)
    worker.start()
    worker.join(ON_KILL_HANDLER_WAIT + 30)
    assert returned.is_set(), "on_kill deadlocked on the log lock its own thread held"
    assert not worker.is_alive()
    # execute waits for the cleanup only ON_KILL_CLEANUP_WAIT (Airflow's SIGKILL follows): on a loaded machine the
    # delete may need longer, so the test waits for the cleanup thread itself before reading what it did.
    finish_cleanup(task)
    assert [call["argv"][-1] for call in cli_calls(brev_sim, "delete")] == [view["id"]]  # by its id
    assert "Task killed: deleting instance killed-mid-log created by this try." in task_logs.text


def test_on_kill_waits_for_a_quick_cleanup_before_the_interrupted_code_resumes(brev_sim, monkeypatch, task_logs):
    """Without the log lock held, the cleanup is done when the handler returns (as before: nothing races it)."""
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    view = brev_sim.create_instance_directly("killed-quietly")
    task = BrevCreateInstanceOperator(task_id="create", instance_name="killed-quietly", gpu="L40S:1")
    created_by_this_try(task, view)
    task.on_kill()
    assert task._killed
    task.wait_for_kill_cleanup()
    finish_cleanup(task)
    assert [call["argv"][-1] for call in cli_calls(brev_sim, "delete")] == [view["id"]]
    task.on_kill()  # a second SIGTERM starts nothing new
    task.wait_for_kill_cleanup()
    assert len(cli_calls(brev_sim, "delete")) == 1
