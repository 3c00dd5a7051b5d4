"""Chaos suite, triggerer level: a user killing a deferred task, and a triggerer restart while deferred.

``dag.test()`` runs triggers inline and cannot mark a deferred task failed or restart a triggerer, so these
cases drive the real triggers against real jobs and instances on the simulator the way Airflow 3.3's
``TriggerRunner`` does (:func:`chaos_helpers.run_like_triggerer`):

* user kill (mark failed / success, clear): the task running ``run()`` is cancelled with the user-action
  message, then ``on_kill()`` is awaited, then ``cleanup()``; it must stop the remote job or delete the
  ephemeral instance;
* triggerer shutdown or restart: ``run()`` is cancelled without that message and only ``cleanup()`` runs; it
  must stop nothing, and a new trigger rebuilt from ``serialize()`` (another triggerer) must finish the job.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from helpers import cli_calls

from airflow_provider_brev.core.jobs.follower import REMOTE_LINE_PREFIX
from airflow_provider_brev.core.jobs.remote import FINISHED, KILLED_EXIT_CODE, RUNNING, TERMINATED_EXIT_CODE, RemoteJob
from airflow_provider_brev.triggers.brev import BrevInstanceReadyTrigger, BrevRemoteJobTrigger
from integration.chaos.chaos_helpers import (
    POLL_BYTES,
    USER_ACTION_CANCEL_MSG,
    assert_chaos_invariants,
    await_until,
    cancel_and_wait,
    counter_lines,
    job_polls,
    run_like_triggerer,
    trigger_from_serialized,
    wait_until,
)

#: The job: counts its start, checks that its secret arrived (never on a command line), then runs the body.
PREAMBLE = 'echo try-1 >> counter; [ -n "$CHAOS_SECRET" ] || { echo "chaos: the secret did not arrive"; exit 9; }; '


def new_instance(sim, hook, name: str) -> str:
    """A ready instance created through the CLI (so the worker's ssh config knows it)."""
    hook.create_instance(name, gpu="L40S:1")
    hook.wait_until_ready(name, timeout=60, poll_interval=0.1)
    return name


def launch(hook, name: str, job_id: str, body: str, secret: str) -> RemoteJob:
    job = RemoteJob(job_id)
    launched = hook.launch_job(name, job, PREAMBLE + body, secret_env={"CHAOS_SECRET": secret})
    assert launched.launched
    return job


def job_trigger(name: str, job: RemoteJob, **kwargs) -> BrevRemoteJobTrigger:
    return BrevRemoteJobTrigger(
        instance_name=name, job=job.to_dict(), poll_interval=0.1, log_chunk_bytes=POLL_BYTES, **kwargs
    )


def polls_of(sim, job: RemoteJob) -> int:
    """Finished polls of ``job`` by a trigger (its launch and kill excluded)."""
    return len([c for c in job_polls(sim) if job.job_id in c["argv"][-1]])


def shown_lines(task_logs, name: str) -> list[str]:
    """Job output lines a trigger logged (``[remote] <line>``; the test follows one instance, ``name``), in order,
    duplicates kept."""
    prefix = re.escape(REMOTE_LINE_PREFIX)
    return [m.group(1) for line in task_logs.lines if (m := re.search(rf"{prefix}(\S[^\n]*?)\s*(?:\[|$)", line))]


# --------------------------------------------------------------------------- 8. a user kills a deferred task
@pytest.mark.parametrize("user_kill", [True, False], ids=["user-kill-on_kill", "shutdown-cleanup-only"])
def test_remote_job_trigger_on_kill_kills_the_job_and_cleanup_does_not(brev_sim, hook, task_logs, secret, user_kill):
    name = new_instance(brev_sim, hook, "chaos-job-kill")
    job = launch(hook, name, "chaos-kill-t1", "echo started; sleep 600", secret)
    trigger = job_trigger(name, job)
    events: list = []
    errors: list = []

    async def scenario() -> None:
        task = asyncio.create_task(run_like_triggerer(trigger, events, errors))
        await await_until(lambda: polls_of(brev_sim, job) >= 1, what="the trigger to follow the job")
        await cancel_and_wait(task, USER_ACTION_CANCEL_MSG if user_kill else None)

    asyncio.run(scenario())
    assert events == []  # a killed deferral fires no event
    assert errors == []
    poll = hook.poll_job(name, job, offset=0)
    if user_kill:
        assert (poll.state, poll.exit_code) in ((FINISHED, TERMINATED_EXIT_CODE), (FINISHED, KILLED_EXIT_CODE))
        wait_until(lambda: not brev_sim.sandbox_pids(name), what="the job's processes to be gone")
    else:
        assert poll.state == RUNNING  # cleanup() (a triggerer restart) must not stop remote work
        assert brev_sim.sandbox_pids(name)
        hook.kill_job(name, job, grace_seconds=1)  # the test's own teardown
    assert hook.delete_instance(name)  # the DAG's teardown
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters={name: ["try-1"]})


@pytest.mark.parametrize("user_kill", [True, False], ids=["user-kill-on_kill", "shutdown-cleanup-only"])
def test_ephemeral_job_trigger_on_kill_deletes_the_instance(brev_sim, hook, task_logs, secret, user_kill):
    name = new_instance(brev_sim, hook, "chaos-ephemeral-kill")
    job = launch(hook, name, "chaos-ephemeral-t1", "sleep 600", secret)
    trigger = job_trigger(name, job, ephemeral=True)
    events: list = []

    async def scenario() -> None:
        task = asyncio.create_task(run_like_triggerer(trigger, events))
        await await_until(lambda: polls_of(brev_sim, job) >= 1, what="the trigger to follow the job")
        await cancel_and_wait(task, USER_ACTION_CANCEL_MSG if user_kill else None)

    asyncio.run(scenario())
    assert events == []
    instance = brev_sim.instance(name)
    if user_kill:
        assert instance is None or instance["status"] == "DELETING"  # on_kill deleted the instance it owns
        assert [call["argv"][1] for call in cli_calls(brev_sim, "delete")] == [name]
    else:
        assert instance is not None and instance["status"] == "RUNNING"
        assert hook.poll_job(name, job, offset=0).state == RUNNING
        assert cli_calls(brev_sim, "delete") == []
        assert hook.delete_instance(name)  # the teardown the task would have run
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters={name: ["try-1"]})


@pytest.mark.parametrize("user_kill", [True, False], ids=["user-kill-on_kill", "shutdown-cleanup-only"])
def test_ready_trigger_on_kill_deletes_the_instance_it_owns(brev_sim, hook, task_logs, secret, user_kill):
    brev_sim.set_fault("ssh_refused", seconds=600)  # RUNNING but never reachable: the trigger keeps waiting
    name = "chaos-ready-kill"
    hook.create_instance(name, gpu="L40S:1")
    trigger = BrevInstanceReadyTrigger(
        instance_name=name, deadline=time.time() + 300, poll_interval=0.1, delete_on_kill=True, created=True
    )
    events: list = []

    async def scenario() -> None:
        task = asyncio.create_task(run_like_triggerer(trigger, events))
        # its ssh probe (refused); a `brev exec` is recorded only once it ends, after the CLI's 40 ssh retries
        await await_until(brev_sim.ssh_calls, timeout=60, what="the trigger to probe ssh")
        await cancel_and_wait(task, USER_ACTION_CANCEL_MSG if user_kill else None)

    asyncio.run(scenario())
    assert events == []
    instance = brev_sim.instance(name)
    if user_kill:
        assert instance is None or instance["status"] == "DELETING"
    else:
        assert instance is not None and instance["status"] == "RUNNING"
        assert cli_calls(brev_sim, "delete") == []
        assert hook.delete_instance(name)
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=None)


# ------------------------------------------------------------------- 9. a triggerer restart while deferred
def test_triggerer_restart_while_deferred_the_job_survives(brev_sim, hook, task_logs, secret):
    name = new_instance(brev_sim, hook, "chaos-restart")
    body = (
        'for i in $(seq 1 20); do echo "line $i"; sleep 0.02; done; '
        "for i in $(seq 1 600); do [ -e gate ] && break; sleep 0.05; done; "
        'for i in $(seq 21 40); do echo "line $i"; done; echo job-done'
    )
    job = launch(hook, name, "chaos-restart-t1", body, secret)
    first = job_trigger(name, job)
    events: list = []

    async def before_restart() -> None:
        task = asyncio.create_task(run_like_triggerer(first, events))
        await await_until(lambda: "line 20" in shown_lines(task_logs, name), what="the first lines to be shown")
        await cancel_and_wait(task)  # the triggerer shuts down: run() cancelled, cleanup() awaited, no on_kill

    asyncio.run(before_restart())
    assert events == []
    assert hook.poll_job(name, job, offset=0).state == RUNNING  # the job survived the restart
    assert brev_sim.sandbox_pids(name)
    shown_before = len(shown_lines(task_logs, name))

    second = trigger_from_serialized(first.serialize())  # another triggerer picks the trigger up from the DB
    (brev_sim.sandbox(name) / "gate").touch()

    async def after_restart() -> None:
        await asyncio.wait_for(run_like_triggerer(second, events), timeout=60)

    asyncio.run(after_restart())
    (event,) = events
    assert event.payload["status"] == FINISHED
    assert event.payload["exit_code"] == 0
    assert event.payload["last_line"] == "job-done"
    shown = shown_lines(task_logs, name)
    assert len(shown) > shown_before
    expected = [f"line {i}" for i in range(1, 41)] + ["job-done"]
    assert set(expected) <= set(shown)  # every line shown at least once (duplicates allowed, none lost)
    assert [line for line in shown[shown_before:] if line in expected] == expected  # the new trigger, in order
    assert counter_lines(brev_sim, name) == ["try-1"]  # launched exactly once
    hook.cleanup_job(name, job)
    assert hook.delete_instance(name)
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters={name: ["try-1"]})


# ------------------------------------------------------- 10. the scheduler's deferral race (apache/airflow#72716)
@pytest.mark.parametrize("kind", ["job", "readiness"])
def test_an_event_is_held_back_until_the_deferral_has_settled(brev_sim, hook, task_logs, secret, kind):
    """A trigger whose work is already done when it starts still hands its event back no earlier than
    ``not_before``: the scheduler must have recorded the deferral before the task resumes."""
    name = new_instance(brev_sim, hook, f"chaos-settle-{kind}")
    if kind == "job":
        job = launch(hook, name, "chaos-settle-t1", "echo job-done", secret)
        wait_until(lambda: hook.poll_job(name, job, offset=0).state == FINISHED, what="the job to finish")
    events: list = []

    def trigger(not_before: float) -> BrevInstanceReadyTrigger | BrevRemoteJobTrigger:
        if kind == "job":
            return job_trigger(name, job, not_before=not_before)
        return BrevInstanceReadyTrigger(instance_name=name, deadline=time.time() + 60, not_before=not_before)

    not_before = time.time() + 2.0
    settling = trigger(not_before)
    assert trigger_from_serialized(settling.serialize()).not_before == not_before  # it survives a triggerer restart
    asyncio.run(asyncio.wait_for(run_like_triggerer(settling, events), timeout=60))
    arrived = time.time()
    (event,) = events
    assert event.payload["status"] == (FINISHED if kind == "job" else "success")
    assert arrived >= not_before
    assert "until Airflow has recorded the deferral" in task_logs.text

    events.clear()
    before = len([line for line in task_logs.lines if "until Airflow has recorded the deferral" in line])
    asyncio.run(asyncio.wait_for(run_like_triggerer(trigger(time.time() - 1.0), events), timeout=60))
    assert len(events) == 1  # settled long ago: nothing is held back
    assert len([line for line in task_logs.lines if "until Airflow has recorded the deferral" in line]) == before
    assert hook.delete_instance(name)
