"""Issue 11, "Proof that the promises hold", part A: the expensive branches of the exec and create operators.

Each test drives one branch for real (``dag.test()`` against the simulator; DAGs in
tests/integration/dags/brev_proof_exec_cases.py), made deterministic with a gate file or a simulator knob, and asserts the one
mechanism that ran (a specific log line or state), positive assertions first.

Killing a task: under ``dag.test()`` the task runs in this process, and Airflow's task runner installs a SIGTERM
handler (``_on_term``) that calls the operator's ``on_kill`` -- what a worker does when Airflow stops a task. The
tests send this process SIGTERM once that handler is installed and the task is where they want it; the previous
handler is restored afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Any

import pytest
from helpers import ChaosAgent, cli_calls, run_state, task_states, wait_for_no_instances

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

#: ``POLL_FAILURES_CHUNK_BYTES`` in tests/integration/dags/brev_proof_exec_cases.py.
POLL_FAILURES_CHUNK_BYTES = 34567
#: ``SEEDED_JOB_ID`` in tests/integration/dags/brev_proof_exec_cases.py.
SEEDED_JOB_ID = "proof-seeded-job-1"
#: ``RETRY_REATTACH_CHUNK_BYTES`` in tests/integration/dags/brev_exec_cases.py (``brev_exec_retry_reattach``).
RETRY_REATTACH_CHUNK_BYTES = 23456


# ------------------------------------------------------------------------------------------------- helpers
def wait_until(predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def created_name(sim) -> str | None:
    """The one instance ``brev create`` was called for, or None before that."""
    names = {call["argv"][1] for call in cli_calls(sim, "create")}
    assert len(names) <= 1, names
    return next(iter(names), None)


def counter(sim, name: str) -> str:
    path = sim.sandbox(name) / "counter"
    return path.read_text() if path.exists() else ""


def job_launches(sim) -> list[dict]:
    """Commands started through a job launch (the launcher's setsid'd job script)."""
    return [run for run in sim.runs() if "BREV_JOB_LAUNCHED" in run["command"]]


def job_started(sim) -> str | None:
    """The instance whose gated job has started (``counter`` written), or None."""
    name = created_name(sim)
    return name if name and job_launches(sim) and counter(sim, name) else None


def job_followed(sim, task_logs) -> str | None:
    """The instance whose gated job has started and whose launch call has returned ("Launched job ..." logged:
    the task holds the job's handle and follows it), or None."""
    return job_started(sim) if "Launched job" in task_logs.text else None


def task_runner_handles_sigterm() -> bool:
    """Whether Airflow's task runner is running a task here (its SIGTERM handler calls ``on_kill``)."""
    return getattr(signal.getsignal(signal.SIGTERM), "__name__", "") == "_on_term"


def open_gate(sim, name: str) -> None:
    (sim.sandbox(name) / "gate").touch()


def log_lines(task_logs, needle: str) -> list[str]:
    return [line for line in task_logs.lines if needle in line]


@pytest.fixture
def sigterm_task() -> Iterator[Callable[[Callable[[], Any]], ChaosAgent]]:
    """``sigterm_task(condition)``: an agent that sends this process SIGTERM (-> the running task's ``on_kill``)
    once ``condition()`` is truthy while the task runner's handler is installed. Restores the handler after."""
    previous = signal.getsignal(signal.SIGTERM)

    def agent(condition: Callable[[], Any]) -> ChaosAgent:
        return ChaosAgent(
            lambda: task_runner_handles_sigterm() and condition(),
            lambda _: os.kill(os.getpid(), signal.SIGTERM),
            timeout=600,  # the whole dag.test() up to that point, on a loaded machine
        )

    yield agent
    signal.signal(signal.SIGTERM, previous)


# ------------------------------------------------------------------- 1. worker-side on_kill (SIGTERM -> on_kill)
def test_on_kill_kills_the_remote_job(run_dag, brev_sim, task_logs, sigterm_task):
    with sigterm_task(lambda: job_followed(brev_sim, task_logs)) as agent:
        dag_run = run_dag("proof_exec_on_kill_kill")
    assert agent.fired
    assert task_states(dag_run)["run"] == "failed"
    name = created_name(brev_sim)
    assert name
    (kill_line,) = log_lines(task_logs, "Task killed: killing job")
    assert f"on {name}." in kill_line
    job_id = kill_line.split("killing job ", 1)[1].split(" ", 1)[0]
    assert f"The command on '{name}' failed with exit code" in task_logs.text  # the task saw its job killed
    assert counter(brev_sim, name) == "started\n"  # it never got past its gate
    assert [c for c in cli_calls(brev_sim, "exec") if "BREV_JOB_KILLED" in c["argv"][-1] and job_id in c["argv"][-1]]
    wait_for_no_instances(brev_sim)


def test_on_kill_action_keep_leaves_the_job_running(run_dag, brev_sim, task_logs, sigterm_task):
    with sigterm_task(lambda: job_followed(brev_sim, task_logs)) as agent:
        gate = ChaosAgent(
            lambda: agent.fired and job_started(brev_sim), lambda name: open_gate(brev_sim, name), timeout=600
        )
        with gate:  # the kill happened (on_kill kept the job): now let the job end
            dag_run = run_dag("proof_exec_on_kill_keep")
    assert agent.fired
    assert run_state(dag_run) == "success", task_states(dag_run)
    name = created_name(brev_sim)
    assert name
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.xcom_pull(task_ids="run")["last_line"] == "finished"  # the job survived the kill and finished
    assert counter(brev_sim, name) == "started\n"
    (keep_line,) = log_lines(task_logs, "Task killed: keeping job")
    assert f"on {name} running (on_kill_action='keep')." in keep_line
    assert "Task killed: killing job" not in task_logs.text
    assert [c for c in cli_calls(brev_sim, "exec") if "BREV_JOB_KILLED" in c["argv"][-1]] == []


def test_a_kill_during_the_input_sync_launches_nothing(run_dag, brev_sim, task_logs):
    """on_kill found no job to kill (none launched yet): the launch that would have followed must not happen."""
    dag_run = run_dag("proof_exec_killed_before_launch")
    assert task_states(dag_run)["run"] == "failed"
    name = created_name(brev_sim)
    assert name
    assert "The task was killed before its job was launched: not launching it." in task_logs.text
    assert job_launches(brev_sim) == []
    assert counter(brev_sim, name) == ""
    wait_for_no_instances(brev_sim)


def test_on_kill_deletes_the_ephemeral_instance(run_dag, brev_sim, task_logs, sigterm_task):
    def recreated_and_started() -> str | None:
        name = created_name(brev_sim)
        return (
            name
            if len(cli_calls(brev_sim, "create")) > 1 and brev_sim.instance(name) and counter(brev_sim, name)
            else None
        )

    # The second agent only fires if the deleted instance is re-created (the bug this test guards against): it lets
    # the job on the re-created instance end, so the failure shows in the asserts instead of a timeout.
    reopen = lambda: agent.fired and recreated_and_started()  # noqa: E731
    with (
        sigterm_task(lambda: job_followed(brev_sim, task_logs)) as agent,
        ChaosAgent(reopen, lambda n: open_gate(brev_sim, n), timeout=600),
    ):
        dag_run = run_dag("proof_exec_on_kill_ephemeral")
    assert agent.fired
    name = created_name(brev_sim)
    assert name
    assert f"Task killed: deleting its ephemeral instance {name}." in task_logs.text
    first_delete = next(call["argv"][1] for call in cli_calls(brev_sim, "delete"))
    assert first_delete != name and brev_sim.name_of(first_delete) == name  # deleted by its id
    assert len(cli_calls(brev_sim, "create")) == 1  # the deleted instance was not taken for lost and re-created
    assert task_states(dag_run)["run"] == "failed"
    wait_for_no_instances(brev_sim)


def test_on_kill_deletes_the_instance_the_create_task_just_created(run_dag, brev_sim, task_logs, sigterm_task):
    brev_sim.set_fault("ssh_refused", seconds=600)  # RUNNING but unreachable: the task keeps waiting
    with sigterm_task(lambda: created_name(brev_sim) and cli_calls(brev_sim, "exec")) as agent:
        dag_run = run_dag("proof_create_on_kill")
    assert agent.fired
    assert task_states(dag_run)["create"] == "failed"
    name = created_name(brev_sim)
    assert f"Task killed: deleting instance {name} created by this try." in task_logs.text
    first_delete = next(call["argv"][1] for call in cli_calls(brev_sim, "delete"))
    assert first_delete != name and brev_sim.name_of(first_delete) == name  # deleted by its id
    wait_for_no_instances(brev_sim)
    assert len(cli_calls(brev_sim, "create")) == 1


# ------------------------------------------------------------------------- 2. absolute deadlines of deferrals
def test_readiness_trigger_timeout_event_fails_the_create_task(run_dag, brev_sim, task_logs):
    brev_sim.set_fault("ssh_refused", seconds=600)
    dag_run = run_dag("proof_create_ready_timeout_deferred")
    assert task_states(dag_run)["create"] == "failed"
    assert "BrevTimeoutError" in task_logs.text  # execute_complete's timeout branch
    # the trigger waited (its check probes sshd through plain ssh, refused until the deadline) ...
    assert brev_sim.ssh_calls() and {call["exit_code"] for call in brev_sim.ssh_calls()} == {255}
    wait_for_no_instances(brev_sim)  # ... and the instance the task created was deleted after the timeout


def test_readiness_trigger_timeout_event_fails_the_sensor(run_dag, brev_sim, task_logs):
    brev_sim.set_fault("ssh_refused", seconds=600)
    dag_run = run_dag("proof_sensor_ready_timeout_deferred")
    assert task_states(dag_run) == {"create": "success", "wait": "failed", "delete": "success"}
    assert "BrevTimeoutError" in task_logs.text
    wait_for_no_instances(brev_sim)


def test_job_trigger_kills_the_job_at_its_deadline(run_dag, brev_sim, task_logs):
    dag_run = run_dag("proof_exec_deadline_deferred")
    assert task_states(dag_run)["run"] == "failed"
    name = created_name(brev_sim)
    assert name
    following = log_lines(task_logs, "from the triggerer.")  # "Following job <id> on <name> from the triggerer."
    assert len(following) == 1
    job_id = following[0].split("Following job ", 1)[1].split(" ", 1)[0]
    assert log_lines(task_logs, f"Deadline passed: killing job {job_id} on {name}.")  # the trigger's kill
    assert [c for c in cli_calls(brev_sim, "exec") if "BREV_JOB_KILLED" in c["argv"][-1] and job_id in c["argv"][-1]]
    assert f"BrevTimeoutError: The command on '{name}' did not finish within its timeout and was killed" in (
        task_logs.text
    )  # execute_complete turned the trigger's timeout event into the typed error
    assert "] finished" not in task_logs.text  # the job never passed its gate
    wait_for_no_instances(brev_sim)


# --------------------------------------------------------------------- 4. relaunch after a failed / lost job
def test_retry_relaunches_after_the_earlier_trys_job_failed(run_dag, brev_sim, task_logs):
    # Try 1's polls all lose the connection (as in test_exec_dags' re-attach test): it gives up without collecting
    # its job, which exits 3 at once. Try 2 finds that job failed and launches its own; the second run succeeds.
    brev_sim.set_fault("connection_drop", after_seconds=0.0, match=f"__BJ_MAX={RETRY_REATTACH_CHUNK_BYTES}\n", times=16)
    command = "echo run >> counter; [ $(wc -l < counter) -ge 2 ] || exit 3; echo second-run"
    dag_run = run_dag("brev_exec_retry_reattach", conf={"command": command})
    assert run_state(dag_run) == "success", task_states(dag_run)
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 2
    (relaunch,) = log_lines(task_logs, "of an earlier try ended (finished, exit code 3): relaunching as")
    name = created_name(brev_sim)
    assert name
    assert counter(brev_sim, name) == "run\nrun\n"
    assert len(job_launches(brev_sim)) == 2
    assert run_ti.xcom_pull(task_ids="run")["last_line"] == "second-run"
    assert "Re-attaching" not in task_logs.text
    assert relaunch


def test_retry_relaunches_after_the_earlier_trys_job_was_lost(run_dag, brev_sim, task_logs):
    def kill_the_whole_job(name: str) -> None:
        for pid in brev_sim.sandbox_pids(name):  # job script, wrapper and command: no exit code gets written
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def waiting_at_its_gate() -> str | None:  # "started" is written right before the job waits for its gate
        name = job_started(brev_sim)
        return name if name and "started" in counter(brev_sim, name) else None

    with ChaosAgent(waiting_at_its_gate, kill_the_whole_job, timeout=600) as agent:
        dag_run = run_dag("proof_exec_lost_relaunch")
    assert agent.fired
    assert run_state(dag_run) == "success", task_states(dag_run)
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 2
    assert "BrevJobLostError" in task_logs.text  # try 1 found its job lost
    (relaunch,) = log_lines(task_logs, "of an earlier try ended (lost, exit code None): relaunching as")
    name = created_name(brev_sim)
    assert name
    assert counter(brev_sim, name) == "run\nstarted\nrun\n"  # try 1's job reached its gate, try 2's did not need to
    assert run_ti.xcom_pull(task_ids="run")["last_line"] == "second-run"
    assert "Re-attaching" not in task_logs.text
    assert relaunch


# ---------------------------------------------------------------------------- 5. the task state store handle
@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="the task state store is new in Airflow 3.3")
def test_the_job_handle_is_read_back_from_the_task_state_store(run_dag, brev_sim, task_logs):
    reattached = f"Re-attaching to job {SEEDED_JOB_ID} of an earlier try"
    with ChaosAgent(
        lambda: reattached in task_logs.text and created_name(brev_sim), lambda n: open_gate(brev_sim, n), timeout=600
    ):
        dag_run = run_dag("proof_exec_store_handle")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert reattached in task_logs.text  # found only through the store: no try of `run` derives this id
    name = created_name(brev_sim)
    assert name
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.xcom_pull(task_ids="run")["job_id"] == SEEDED_JOB_ID
    assert counter(brev_sim, name) == "started\n"  # the seeded job only
    assert len(job_launches(brev_sim)) == 1
    assert "Launched job" not in task_logs.text


# ------------------------------------------------------------------------------------ 6. max_poll_failures
def test_max_poll_failures_spent_fails_with_the_polls_error(run_dag, brev_sim, task_logs):
    brev_sim.set_fault(
        "connection_drop", after_seconds=0.0, match=f"__BJ_MAX={POLL_FAILURES_CHUNK_BYTES}\n", times=None
    )
    dag_run = run_dag("proof_exec_poll_failures")
    assert task_states(dag_run)["run"] == "failed"
    warnings = log_lines(task_logs, "failed (")
    assert [line for line in warnings if "Poll 1 of job" in line]
    assert [line for line in warnings if "Poll 2 of job" in line]
    assert "BrevConnectionLostError" in task_logs.text
    assert not [line for line in warnings if "Poll 3 of job" in line]  # the budget: 2 failures tolerated
    assert len(job_launches(brev_sim)) == 1


# ------------------------------------------------------------------------------------- 7. trigger error events
def test_trigger_error_event_raises_the_typed_error(run_dag, brev_sim, task_logs):
    brev_sim.set_fault("ssh_refused", seconds=600)  # the readiness trigger keeps waiting

    def revoke(_: object) -> None:
        brev_sim.revoke_token(brev_sim.valid_token)
        brev_sim.expire_sessions()

    waiting = lambda: log_lines(task_logs, "Readiness of")  # noqa: E731  (the trigger's stage log)
    with ChaosAgent(lambda: created_name(brev_sim) and waiting(), revoke, timeout=600) as agent:
        dag_run = run_dag("proof_create_trigger_error")
    assert agent.fired
    assert task_states(dag_run)["create"] == "failed"
    assert "BrevAuthError: Waiting for the instance failed:" in task_logs.text  # the event's type, re-raised
    assert "BrevTimeoutError" not in task_logs.text


def test_job_trigger_error_event_fails_the_task_with_the_triggers_error(run_dag, brev_sim, task_logs):
    """The remote-job trigger cannot run ``brev`` any more (e.g. removed from the triggerer's machine): it reports an
    ``error`` event (not ``instance_lost``: nothing says the instance is gone), and the task fails with its typed
    error (not retried: retry_policy)."""
    cli = brev_sim.brev_path
    mode = cli.stat().st_mode

    def following() -> str | None:
        return job_started(brev_sim) if "from the triggerer." in task_logs.text else None

    def take_away(_: object) -> None:
        cli.chmod(mode & ~0o111)

    def give_back(_: object) -> None:
        cli.chmod(mode)

    failed = lambda: "Following the remote job failed" in task_logs.text  # noqa: E731
    try:
        with ChaosAgent(following, take_away, timeout=600) as agent, ChaosAgent(failed, give_back, timeout=600):
            dag_run = run_dag("proof_exec_trigger_error")
    finally:
        cli.chmod(mode)
    assert agent.fired
    assert task_states(dag_run)["run"] == "failed"
    name = created_name(brev_sim)
    assert name
    # the trigger's typed error crossed the deferral in its error event and failed the task; whether the trigger's
    # hook resolved the CLI before or after it lost its permission, the type is the same
    assert "BrevCLINotFoundError: Following the remote job failed:" in task_logs.text
    assert "relaunching" not in task_logs.text and "re-creating" not in task_logs.text
    assert counter(brev_sim, name) == "started\n"  # one launch only
    wait_for_no_instances(brev_sim)
