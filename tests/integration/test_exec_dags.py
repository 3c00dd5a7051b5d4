"""Issue: BrevExecOperator runs remote commands exactly once, streams logs, survives the worker.

Every test is a real dag.test() run against the simulator (both CLI profiles where it matters).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import (
    ChaosAgent,
    DagWorker,
    assert_no_process_left,
    cli_calls,
    deferrals,
    job_ids_on,
    run_state,
    task_states,
)

from airflow_provider_brev.core.jobs.follower import REMOTE_LINE_PREFIX
from airflow_provider_brev.core.jobs.handle import DEFAULT_MAX_BYTES, LAUNCHED_MARKER
from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger


def wait_until(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def no_instances_left(sim):
    wait_until(lambda: not sim.instances(), what=f"instances to be deleted: {sim.instances()}")


def only_instance_name(sim) -> str:
    names = {call["argv"][1] for call in cli_calls(sim, "create")}
    assert len(names) == 1, names
    return names.pop()


def launches(sim):
    """Launch calls that reached an instance (``brev exec`` of a launch script). A call the hook repeats after a
    dropped connection counts twice although the launch guard starts one job: count job starts with ``counter``."""
    return [run for run in sim.runs() if "BREV_JOB_LAUNCHED" in run["command"]]


def job_started_on(sim) -> str | None:
    """The instance whose launched job wrote its ``counter`` file, or None before that."""
    if not launches(sim):
        return None
    return next((i["name"] for i in sim.instances() if (sim.sandbox(i["name"]) / "counter").exists()), None)


@pytest.mark.parametrize("dag_id", ["brev_exec_sync", "brev_exec_deferrable"])
def test_ten_thousand_lines_all_in_the_task_log_in_order(run_dag, brev_sim_both, task_logs, dag_id):
    dag_run = run_dag(dag_id)
    assert run_state(dag_run) == "success", task_states(dag_run)
    name = only_instance_name(brev_sim_both)
    shown = [
        line.split(REMOTE_LINE_PREFIX, 1)[1].split(" [", 1)[0].strip()
        for line in task_logs.lines
        if f"{REMOTE_LINE_PREFIX}line " in line
    ]
    assert shown == [f"line {i}" for i in range(1, 10001)]
    # a short prefix, not the 63-character instance name (named once, in the "Launched job" line)
    assert not [line for line in task_logs.lines if REMOTE_LINE_PREFIX in line and name in line]
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    result = run_ti.xcom_pull(task_ids="run")
    assert result["exit_code"] == 0
    assert result["last_line"] == "line 10000"
    assert len(launches(brev_sim_both)) == 1
    if dag_id == "brev_exec_deferrable":
        assert "from the triggerer" in task_logs.text
        polls_before_defer = [line for line in task_logs.lines if "Following job" in line]
        assert polls_before_defer, "the trigger, not the worker, followed the job"
    no_instances_left(brev_sim_both)


@pytest.mark.parametrize("dag_id", ["brev_exec_sync", "brev_exec_deferrable", "brev_exec_foreground"])
def test_failing_command_runs_once_and_reports_its_exit_code(run_dag, brev_sim_both, task_logs, dag_id):
    dag_run = run_dag(dag_id, conf={"command": "echo ran >> counter; echo about to fail; exit 3"})
    assert task_states(dag_run)["run"] == "failed"
    assert "exit code 3" in task_logs.text
    name = only_instance_name(brev_sim_both)
    assert (brev_sim_both.sandbox(name) / "counter").read_text() == "ran\n"  # ran exactly once
    no_instances_left(brev_sim_both)


#: The job polls of the DAGs above ask for at most this many log bytes (the exec operator's default): a string only
#: their poll scripts contain (a launch's own status block asks for none).
POLL_MARKER = f"__BJ_MAX={DEFAULT_MAX_BYTES}\n"


def test_connection_drop_mid_job_recovers_without_relaunch(run_dag, brev_sim, task_logs):
    brev_sim.set_fault("connection_drop", after_seconds=0.0, match=POLL_MARKER, times=2)
    dag_run = run_dag("brev_exec_sync", conf={"command": "echo start >> counter; sleep 2; echo finished"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert [f for f in brev_sim.faults() if f["kind"] == "connection_drop"] == [], "both polls were dropped"
    name = only_instance_name(brev_sim)
    assert (brev_sim.sandbox(name) / "counter").read_text() == "start\n"
    assert len(launches(brev_sim)) == 1
    assert "finished" in task_logs.text


def test_a_connection_drop_during_the_launch_call_starts_the_job_once(run_dag, brev_sim, task_logs):
    """The launch call loses its connection after the job started: the hook calls again, the launch guard on the
    instance reports the job that exists, and nothing starts twice (two launch calls, one job)."""
    brev_sim.set_fault("connection_drop", after_seconds=0.0, match=LAUNCHED_MARKER, times=1)
    dag_run = run_dag("brev_exec_sync", conf={"command": "echo start >> counter; sleep 1; echo finished"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert [f for f in brev_sim.faults() if f["kind"] == "connection_drop"] == [], "the launch call was dropped"
    name = only_instance_name(brev_sim)
    assert len(launches(brev_sim)) == 2  # the dropped call and the one that found the job
    assert (brev_sim.sandbox(name) / "counter").read_text() == "start\n"  # the job started once
    assert "finished" in task_logs.text


def test_worker_sigkill_mid_job_then_rerun_of_the_same_try_attaches_through_the_launch_guard(
    run_dag, brev_sim, tmp_path, task_logs
):
    """The worker is SIGKILLed while its job waits for a gate; the same try runs again and attaches to that job.

    ``dag.test()`` replaces the DagRun, so the re-run is try 1 again: it derives the same job id, and the launch
    guard on the instance starts nothing but reports the job. The gate opens only once the re-run said so, so it
    attaches to a running job (a finished one: tests/integration/chaos/test_chaos_dags.py; a new try re-attaching to an earlier
    try's running job: test_retry_reattaches_to_the_previous_trys_running_job below).
    """
    when = datetime(2026, 4, 1, tzinfo=UTC)
    gate = tmp_path / "gate"  # bounded (300 s): without the attach the job ends and the assertions below fail
    wait = f"for i in $(seq 1 6000); do [ -e {gate} ] && break; sleep 0.05; done"
    conf = {"command": f"echo started >> counter; {wait}; echo job-done"}
    with DagWorker(
        tmp_path, "brev_exec_cases.py", "brev_exec_resume", conf, when, brev_sim.connection_json()
    ) as worker:
        name = worker.wait_for(lambda: job_started_on(brev_sim), "the job started")
        worker.sigkill()  # the worker dies mid-job: no on_kill, no teardown
    (job_id,) = job_ids_on(brev_sim, name)  # try 1's job, still waiting for its gate
    attached = f"Job {job_id} already exists on {name} (this try launched it before): attaching."
    with ChaosAgent(lambda: attached in task_logs.text, lambda _: gate.touch(), timeout=300) as agent:
        dag_run = run_dag("brev_exec_resume", conf=conf, logical_date=when, run_after=when)
    assert agent.fired  # the gate opened only after the re-run attached
    assert run_state(dag_run) == "success", task_states(dag_run)
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 1  # the same try
    assert run_ti.xcom_pull(task_ids="run")["job_id"] == job_id
    assert only_instance_name(brev_sim) == name
    assert (brev_sim.sandbox(name) / "counter").read_text() == "started\n"  # the command ran exactly once
    assert "job-done" in task_logs.text  # and its output reached the re-run's log
    assert "Launched job" not in task_logs.text  # the re-run did not start a job
    no_instances_left(brev_sim)


def test_secret_env_never_leaks(run_dag, brev_sim_both, task_logs):
    import hashlib

    secret = "s3cr3t-" + os.urandom(8).hex()
    dag_run = run_dag("brev_exec_secret", conf={"secret": secret})
    assert run_state(dag_run) == "success", task_states(dag_run)
    name = only_instance_name(brev_sim_both)
    home = brev_sim_both.sandbox(name)
    digest = hashlib.sha256(secret.encode()).hexdigest()
    for filename in ("secret.sha256", "secret_fg.sha256", "secret_deferred.sha256"):
        assert (home / filename).read_text().split()[0] == digest  # the command did get it
    # Where a secret could leak, first what is there (so the negatives below are not vacuous), then no secret.
    calls = brev_sim_both.calls()
    assert cli_calls(brev_sim_both, "exec") and cli_calls(brev_sim_both, "copy")  # launches, polls, secret files
    for call in calls:
        assert secret not in json.dumps(call)  # argv and the command string handed to ssh
    assert f"{REMOTE_LINE_PREFIX}ok" in task_logs.text  # the detached job's output reached the log
    assert secret not in task_logs.text
    tis = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    pulled = {
        (task_id, key): tis[task_id].xcom_pull(task_ids=task_id, key=key)
        for task_id, keys in {
            "create": ("return_value", "instance", "brev_instance"),
            "run": ("return_value", "brev_job"),
            "run_foreground": ("return_value",),
            "run_deferred": ("return_value", "brev_job"),
        }.items()
        for key in keys
    }
    assert pulled["create", "return_value"] == name
    assert pulled["create", "instance"]["name"] == pulled["create", "brev_instance"]["name"] == name
    for task_id in ("run", "run_foreground", "run_deferred"):
        result = pulled[task_id, "return_value"]
        assert (result["exit_code"], result["instance_name"]) == (0, name), (task_id, result)
    assert pulled["run", "return_value"]["last_line"] == "ok"
    for task_id in ("run", "run_deferred"):  # the detached jobs' handles: which instance, which job
        handle = pulled[task_id, "brev_job"]
        assert handle["instance_name"] == name, (task_id, handle)
        assert handle["job"]["job_id"] == pulled[task_id, "return_value"]["job_id"], (task_id, handle)
    for where, value in pulled.items():
        assert secret not in json.dumps(value, default=str), where
    leftovers = [p for p in home.rglob("*") if p.is_file() and secret in p.read_text(errors="ignore")]
    assert leftovers == []


@pytest.mark.parametrize(
    ("dag_id", "conf", "state"),
    [
        ("brev_exec_ephemeral", {"command": "echo fine"}, "success"),
        ("brev_exec_ephemeral", {"command": "exit 4"}, "failed"),
        ("brev_exec_ephemeral_timeout", None, "failed"),
    ],
)
def test_ephemeral_mode_leaves_nothing(run_dag, brev_sim_both, dag_id, conf, state):
    dag_run = run_dag(dag_id, conf=conf)
    assert task_states(dag_run)["run"] == state
    assert len(cli_calls(brev_sim_both, "create")) == 1
    no_instances_left(brev_sim_both)


def test_ephemeral_deferrable_follows_its_job_from_the_triggerer_and_leaves_nothing(run_dag, brev_sim_both, task_logs):
    dag_run = run_dag("brev_exec_ephemeral_deferrable")
    assert task_states(dag_run)["run"] == "success"
    name = only_instance_name(brev_sim_both)
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    job_id = run_ti.xcom_pull(task_ids="run", key="brev_job")["job"]["job_id"]
    assert len(deferrals(task_logs, "run")) == 1  # the worker handed the job over...
    assert f"Following job {job_id} on {name} from the triggerer." in task_logs.text  # ...the trigger followed it
    assert run_ti.xcom_pull(task_ids="run")["last_line"] == "deferred-ephemeral"  # ...and the resumed task finished
    no_instances_left(brev_sim_both)
    assert brev_sim_both.agents() == []  # the worker's and the triggerer's brev calls started no ssh-agent...
    assert_no_process_left(brev_sim_both)  # ...and left nothing else running


def test_a_cli_that_starts_an_agent_anyway_has_it_stopped_and_kept_out_of_the_output(run_dag, brev_sim, task_logs):
    """brev v0.6.317 - v0.6.319 start an ``ssh-agent`` on every exec whatever ``SSH_AUTH_SOCK`` holds and print
    ``Agent pid N`` before the remote output: the hook stops each one when its call ends, in the worker and in the
    triggerer, and the line is not part of the command's output."""
    brev_sim.set_config(version="v0.6.319")
    dag_run = run_dag("brev_exec_ephemeral_deferrable")
    assert task_states(dag_run)["run"] == "success"
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.xcom_pull(task_ids="run")["last_line"] == "deferred-ephemeral"
    assert len(deferrals(task_logs, "run")) == 1
    agents = brev_sim.agents()
    assert agents and all(agent["announced"] for agent in agents)
    assert "Agent pid" not in task_logs.text
    no_instances_left(brev_sim)
    assert_no_process_left(brev_sim)


def test_ephemeral_timeout_kills_the_job(run_dag, brev_sim, task_logs):
    dag_run = run_dag("brev_exec_ephemeral_timeout")
    assert task_states(dag_run)["run"] == "failed"
    assert "did not finish within its timeout" in task_logs.text


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"command": "", "gpu": "L40S:1"}, "The command is empty"),
        ({"instance_name": "no-such-instance"}, "does not exist"),
        ({"instance_name": "x", "gpu": "L40S:1"}, "not both"),
        ({"instance_name": ""}, "No instance"),
    ],
)
def test_bad_input_launches_nothing(run_dag, brev_sim, task_logs, conf, expected):
    conf = {"command": "echo x", "instance_name": "", "gpu": "", **conf}
    dag_run = run_dag("brev_exec_bad_input", conf=conf)
    assert task_states(dag_run)["run"] == "failed"
    assert expected in task_logs.text
    assert brev_sim.runs() == []
    assert cli_calls(brev_sim, "create") == []


def test_instance_not_ready_launches_nothing(run_dag, brev_sim, task_logs):
    brev_sim.set_timings(deploy_seconds=600)  # still provisioning for the whole test
    brev_sim.create_instance_directly("booting-1", status="DEPLOYING", ready=False)
    dag_run = run_dag("brev_exec_bad_input", conf={"command": "echo x", "instance_name": "booting-1", "gpu": ""})
    assert task_states(dag_run)["run"] == "failed"
    assert "not ready" in task_logs.text
    assert brev_sim.runs() == []


def test_remote_job_trigger_serialises_without_secrets():
    trigger = BrevRemoteJobTrigger(
        instance_name="i", job={"job_id": "j-t1", "base_dir": ".airflow-brev/jobs"}, deadline=5.0, offset=10
    )
    classpath, kwargs = trigger.serialize()
    assert BrevRemoteJobTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert "secret" not in json.dumps(kwargs).lower()


#: ``RETRY_REATTACH_CHUNK_BYTES`` in tests/integration/dags/brev_exec_cases.py: the log chunk size of that DAG's job polls.
RETRY_REATTACH_CHUNK_BYTES = 23456
#: The 1-byte status poll with which a retry probes an earlier try's job (``attach_or_launch``): the only
#: ``brev exec`` of ``brev_exec_retry_reattach`` capped at 1 byte (its launch reads 0, its polls 23456).
EARLIER_JOB_PROBE = re.compile(r"__BJ_MAX=1\n")


def test_retry_reattaches_to_the_previous_trys_running_job(run_dag, brev_sim, task_logs):
    # Try 1's two polls (max_poll_failures=1), 4 hook attempts each, each run twice by the released CLI's slow path,
    # all lose the connection: try 1 fails while its job waits for a gate. The fault is spent then; it never matches try 2's probe of that job.
    brev_sim.set_fault("connection_drop", after_seconds=0.0, match=f"__BJ_MAX={RETRY_REATTACH_CHUNK_BYTES}\n", times=16)
    # The job runs until the gate opens (at most 2,400 rounds: minutes, even on a busy machine)
    command = "echo once >> counter; for i in $(seq 1 2400); do [ -e gate ] && break; sleep 0.05; done; echo done"

    def probed_successfully() -> bool:
        return any(
            call["exit_code"] == 0 and EARLIER_JOB_PROBE.search(call["argv"][-1])
            for call in cli_calls(brev_sim, "exec")
        )

    def open_gate(_: object) -> None:
        assert launches(brev_sim) and not (brev_sim.sandbox(only_instance_name(brev_sim)) / "gate").exists()
        (brev_sim.sandbox(only_instance_name(brev_sim)) / "gate").touch()  # the job may end now, not before

    # the gate opens once try 2 has said it re-attaches: until then the job is certainly still running
    with ChaosAgent(lambda: "Re-attaching to job" in task_logs.text, open_gate) as agent:
        dag_run = run_dag("brev_exec_retry_reattach", conf={"command": command})
    assert probed_successfully()  # try 2 asked about the earlier try's job
    assert agent.fired
    assert run_state(dag_run) == "success", task_states(dag_run)
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 2
    assert brev_sim.faults() == []  # try 1's polls were all dropped
    assert "Re-attaching to job" in task_logs.text  # try 2 found the job still running
    assert task_logs.text.count("Launched job") == 1  # try 1's launch only
    name = only_instance_name(brev_sim)
    assert (brev_sim.sandbox(name) / "counter").read_text() == "once\n"  # the command ran exactly once
    assert len(launches(brev_sim)) == 1
    assert "] done" in task_logs.text  # and try 2 followed it to its end


def test_a_secret_printed_by_the_command_is_redacted_everywhere(run_dag, brev_sim, task_logs):
    secret = "pr1nted-" + os.urandom(8).hex()
    dag_run = run_dag("brev_exec_secret_printed", conf={"secret": secret})
    assert run_state(dag_run) == "success", task_states(dag_run)
    for task_id in ("detached", "foreground", "deferred"):
        ti = next(t for t in dag_run.get_task_instances() if t.task_id == task_id)
        result = ti.xcom_pull(task_ids=task_id)
        assert result["last_line"] == "key=***", task_id  # the line is there, redacted on the instance
        assert secret not in json.dumps(result, default=str)
    assert "key=***" in task_logs.text  # logs carry the redacted line (worker and triggerer side)
    assert secret not in task_logs.text
    name = only_instance_name(brev_sim)
    leftovers = [p for p in brev_sim.sandbox(name).rglob("*") if p.is_file() and secret in p.read_text(errors="ignore")]
    assert leftovers == []  # not even the job's log on the instance holds it


def test_every_line_of_a_multi_line_secret_printed_by_the_command_is_redacted(run_dag, brev_sim, task_logs):
    key_lines = [base64.b64encode(os.urandom(48)).decode() for _ in range(3)]
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(key_lines) + "\n-----END PRIVATE KEY-----\n"
    key_id = os.urandom(10).hex()
    credential = json.dumps({"type": "service_account", "private_key_id": key_id, "private_key": pem}, indent=2)
    secret_lines = [*key_lines, key_id]
    dag_run = run_dag("brev_exec_secret_multiline", conf={"pem": pem, "credential": credential})
    states = task_states(dag_run)
    assert states == {
        "create": "success",
        "detached": "success",
        "foreground": "success",
        "deferred": "success",
        "detached_fails": "failed",
        "foreground_fails": "failed",
        "delete": "success",
    }, states
    for task_id in ("detached", "foreground", "deferred"):
        result = next(t for t in dag_run.get_task_instances() if t.task_id == task_id).xcom_pull(task_ids=task_id)
        assert result["last_line"] == "***", task_id  # the key's second line, redacted on the instance
        for line in secret_lines:
            assert line not in json.dumps(result, default=str), task_id
    text = task_logs.text
    assert "plain output stays" in text and "-----END" not in text  # not everything is redacted; this line is
    assert text.count("failed with exit code 3: ***") >= 2  # the error messages quote the redacted last line
    for line in secret_lines:
        assert line not in text
    name = only_instance_name(brev_sim)
    leftovers = [
        p
        for p in brev_sim.sandbox(name).rglob("*")
        if p.is_file() and any(line in p.read_text(errors="ignore") for line in secret_lines)
    ]
    assert leftovers == []  # not even the job logs on the instance hold a line of them


class _TaskInstance:
    """The few task-instance attributes a foreground run reads (the subject here is on_kill, not Airflow)."""

    dag_id, task_id, run_id, try_number, map_index = "d", "fg", "manual__1", 1, -1

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[key] = value

    def xcom_pull(self, **kwargs: object) -> object:
        return self.xcom.get(str(kwargs.get("key")))


def test_killing_a_foreground_task_stops_the_local_and_the_remote_command(brev_sim, monkeypatch):
    import threading

    from airflow_provider_brev.operators.exec import BrevExecOperator

    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.create_instance_directly("fg-kill-1")
    op = BrevExecOperator(
        task_id="fg",
        instance_name="fg-kill-1",
        command="echo $$ > fg.pid; sleep 300 & sleep 301; echo finished > fg.done",
        detach=False,
    )
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(op.execute({"ti": _TaskInstance()}))  # type: ignore[arg-type]
        except BaseException as err:
            outcome.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    pid_file = brev_sim.sandbox("fg-kill-1") / "fg.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):  # bounded wait: the command started
        assert time.monotonic() < deadline and worker.is_alive(), outcome
        time.sleep(0.05)
    local = [proc for proc in op.hook._running if proc.poll() is None]
    assert local  # the local `brev exec` runs in its own session
    op.on_kill()  # what Airflow calls on SIGTERM
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert all(proc.poll() is not None for proc in local)  # the local brev exec is gone
    remote = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{remote}").exists():  # the remote command's session is gone (reaped: bounded wait)
        assert time.monotonic() < deadline, "the remote command still runs"
        time.sleep(0.05)
    assert not (brev_sim.sandbox("fg-kill-1") / "fg.done").exists()
    assert isinstance(outcome[0], BaseException)
