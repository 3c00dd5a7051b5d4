"""Chaos suite, DAG level: each case is a real ``dag.test()`` run against the simulator with one fault injected.

After every case :func:`chaos_helpers.assert_chaos_invariants` checks that no instance is left once the
teardown (or the janitor) ran, that the job command started exactly once per try, that neither the Brev token
nor the ``secret_env`` value reached an argv, a remote command, a log or a leftover file, and that a failed run
names its cause. The DAGs are in tests/integration/dags/brev_chaos_cases.py.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from helpers import DEPLOY_HELD_SECONDS, ChaosAgent, DagWorker, cli_calls, deleted_names, job_ids_on, task_states

from airflow_provider_brev.core.jobs.remote import DEFAULT_BASE_DIR
from airflow_provider_brev.core.protocol.names import parse_managed_name
from airflow_provider_brev.instances import sweep as sweep_module
from integration.chaos.chaos_helpers import (
    POLL_MARKER,
    assert_chaos_invariants,
    chaos_conf,
    counter_files,
    created_names,
    started_counter,
    wait_until,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

#: A job that waits (bounded: 30 s) until the test opens the ``gate`` file next to its counter.
GATED = "for i in $(seq 1 600); do [ -e gate ] && break; sleep 0.05; done; echo job-done"
#: A job that prints 20 numbered lines over about a second.
CHATTY = 'for i in $(seq 1 20); do echo "line $i"; sleep 0.05; done; echo job-done'
BOTH_MODES = pytest.mark.parametrize("dag_id", ["brev_chaos_sync", "brev_chaos_deferrable"])


def open_gate(counter) -> None:
    (counter.parent / "gate").touch()


def launch_time(sim) -> float:
    """When the (first) job launch command started on an instance."""
    return min(run["ts"] for run in sim.runs() if "setsid nohup" in run["command"])


def job_lines(task_logs) -> set[int]:
    """Numbers of the ``line N`` job lines that reached the task log."""
    return {int(m) for m in re.findall(r"\] line (\d+)\b", task_logs.text)}


# --------------------------------------------------------------------------------------------- 1. token expiry
def test_token_expiry_mid_job(run_dag, brev_sim, task_logs, secret):
    """The Brev session dies while the job runs: the next authenticated call logs in again, the run succeeds."""

    def expire_then_release(counter) -> None:
        brev_sim.expire_sessions()
        open_gate(counter)

    with ChaosAgent(lambda: started_counter(brev_sim), expire_then_release) as agent:
        dag_run = run_dag("brev_chaos_sync", conf=chaos_conf(GATED, secret))
    assert agent.fired
    logins = cli_calls(brev_sim, "login")
    assert len(logins) == 2  # the first login, and exactly one re-login...
    assert logins[1]["ts"] > launch_time(brev_sim)  # ...after the session died mid-job
    assert "logged out" in task_logs.text
    assert "job-done" in task_logs.text
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=["try-1"], dag_run=dag_run)


def test_token_expiry_while_deferred_on_readiness(run_dag, brev_sim, task_logs, secret):
    """The session dies while the triggerer polls readiness: the trigger's async path logs in again."""
    # keep the trigger polling `brev ls` (every 0.2 s) while the instance deploys, until the session has died
    brev_sim.set_timings(deploy=DEPLOY_HELD_SECONDS)

    def polling_in_the_triggerer():
        # the create task lists at most twice before it defers; the fourth listing after `brev create` is the
        # trigger's (readiness reaches sshd through plain ssh, so its polls are the listings)
        created = [c["ts"] for c in cli_calls(brev_sim, "create")]
        return created and len([c for c in cli_calls(brev_sim, "ls") if c["ts"] > created[0]]) >= 4

    def expire_then_finish_the_deploy(_):
        brev_sim.expire_sessions()
        brev_sim.advance(DEPLOY_HELD_SECONDS + 60)

    with ChaosAgent(polling_in_the_triggerer, expire_then_finish_the_deploy) as agent:
        dag_run = run_dag("brev_chaos_deferrable", conf=chaos_conf("echo job-done", secret))
    assert agent.fired
    logins = cli_calls(brev_sim, "login")
    assert len(logins) == 2
    assert logins[1]["ts"] < launch_time(brev_sim)  # the trigger logged in again, before the job was launched
    assert "logged out" in task_logs.text
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=["try-1"], dag_run=dag_run)


# ------------------------------------------------------------------------------------ 2. a 5xx on each command
@pytest.mark.parametrize(
    ("command", "fault"),
    [
        pytest.param("search", {}, id="search"),
        pytest.param("ls", {}, id="ls"),
        pytest.param("create", {}, id="create"),
        # a 502 after create's POST (the released CLI reports it per type, then "could only create 0/1"): retried,
        # not mistaken for "no capacity"; and when the POST did create the instance, the retry adopts it
        pytest.param("create", {"stage": "post"}, id="create-post"),
        pytest.param("create", {"stage": "post", "side_effect": True}, id="create-post-answer-lost"),
        pytest.param("copy", {}, id="copy"),
        # the API call of reaching an instance: readiness runs `brev refresh` for its ssh host entry, after which
        # every `brev exec` takes the CLI's fast path (plain ssh, no API call, so no 5xx to serve)
        pytest.param("refresh", {}, id="refresh"),
        pytest.param("delete", {}, id="delete"),
        pytest.param("login", {}, id="login"),  # a 502 on login is retried, not blamed on the token
    ],
)
def test_5xx_on_each_cli_command_is_retried(run_dag, brev_sim, task_logs, secret, command, fault):
    """One 502 on ``brev <command>``: the hook's retries absorb it; one instance, one job start, nothing left."""
    brev_sim.set_fault("http_5xx", command=command, times=1, status=502, **fault)
    dag_run = run_dag("brev_chaos_sync", conf=chaos_conf("echo job-done", secret))
    assert [f for f in brev_sim.faults() if f["kind"] == "http_5xx"] == [], "the 5xx was never served"
    assert any(call["exit_code"] != 0 for call in cli_calls(brev_sim, command))
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=["try-1"], dag_run=dag_run)
    assert len(created_names(brev_sim)) == 1


# ------------------------------------------------------------------------------ 3. capacity on the first type
def test_capacity_error_on_first_type_falls_back_to_the_next(run_dag, brev_sim, task_logs, secret):
    from airflow_provider_brev.testing.simulator import DEFAULT_CATALOG

    cheapest = next(t for t in DEFAULT_CATALOG if t["type"] == "g6e.xlarge")  # the only L40S:1 type by default
    brev_sim.set_catalog([*DEFAULT_CATALOG, {**cheapest, "type": "l40s-1x-alt", "price_per_hour": 2.5}])
    brev_sim.set_fault("capacity", type="g6e.xlarge", times=None)
    dag_run = run_dag("brev_chaos_sync", conf=chaos_conf("echo job-done", secret))
    (create,) = cli_calls(brev_sim, "create")
    assert create["argv"][create["argv"].index("--type") + 1] == "g6e.xlarge,l40s-1x-alt"  # cheapest first
    create_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "create")
    assert create_ti.xcom_pull(task_ids="create", key="instance")["instance_type"] == "l40s-1x-alt"
    # the create log names the price it fell back to, and the record and the cost carry it
    assert "type l40s-1x-alt at $2.50/h, of 2 candidates from $2.24/h (cheaper ones were not available)" in (
        task_logs.text
    )
    assert create_ti.xcom_pull(task_ids="create", key="brev_instance")["price_per_hour"] == 2.5
    assert create_ti.xcom_pull(task_ids="create", key="brev_cost")["price_per_hour"] == 2.5
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=["try-1"], dag_run=dag_run)


# ------------------------------------------------------------------------------------------- 4. boot FAILURE
@BOTH_MODES
def test_boot_failure_fails_naming_failure_and_leaves_nothing(run_dag, brev_sim, task_logs, secret, dag_id):
    brev_sim.set_fault("boot_failure", message="chaos: host lost")
    dag_run = run_dag(dag_id, conf=chaos_conf("echo job-done", secret))
    states = task_states(dag_run)
    assert states["create"] == "failed", states
    assert states["run"] == "upstream_failed", states
    assert len(cli_calls(brev_sim, "create")) == 1
    assert len(cli_calls(brev_sim, "delete")) == 1  # a failed setup gets no teardown: create cleaned up itself
    assert_chaos_invariants(
        brev_sim,
        task_logs,
        secrets=[secret],
        counters=None,
        dag_run=dag_run,
        failure=("BrevInstanceFailedError", "FAILURE"),
    )


# --------------------------------------------------------------------------- 5. ssh refused after RUNNING
@BOTH_MODES
def test_ssh_refused_for_a_while_after_running_is_waited_out(run_dag, brev_sim, task_logs, secret, dag_id):
    brev_sim.set_fault("ssh_refused", seconds=600)  # in simulated time: sshd answers once the agent advances it

    def refused() -> bool:
        return any(call["exit_code"] == 255 for call in brev_sim.ssh_calls())

    with ChaosAgent(refused, lambda _: brev_sim.advance(660)) as agent:
        dag_run = run_dag(dag_id, conf=chaos_conf("echo job-done", secret))
    assert agent.fired
    codes = [call["exit_code"] for call in brev_sim.ssh_calls()]  # readiness probes sshd through plain ssh
    assert codes[:1] == [255] and codes[-1] == 0, codes  # it saw RUNNING with sshd refusing, and waited it out
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=["try-1"], dag_run=dag_run)


# -------------------------------------------------------------------------------- 6. connection drop mid-job
@BOTH_MODES
def test_connection_drop_mid_job_recovers_without_relaunch(run_dag, brev_sim, task_logs, secret, dag_id):
    """Two job polls lose their ssh connection while the job runs: polling resumes, nothing is relaunched."""

    def drop_polls(_counter) -> None:
        brev_sim.set_fault("connection_drop", after_seconds=0, match=POLL_MARKER, times=2)

    with ChaosAgent(lambda: started_counter(brev_sim), drop_polls) as agent:
        dag_run = run_dag(dag_id, conf=chaos_conf(CHATTY, secret))
    assert agent.fired
    assert [f for f in brev_sim.faults() if f["kind"] == "connection_drop"] == [], "no poll was dropped"
    assert job_lines(task_logs) == set(range(1, 21))  # every line reached the log
    assert "job-done" in task_logs.text
    assert_chaos_invariants(brev_sim, task_logs, secrets=[secret], counters=["try-1"], dag_run=dag_run)


# ------------------------------------------------------------------------------- 7. worker SIGKILL mid-job
def start_worker(tmp_path, dag_id: str, conf: dict, when: datetime, sim) -> DagWorker:
    """Run ``dag_id`` (tests/integration/dags/brev_chaos_cases.py) with ``dag.test()`` in a child process."""
    return DagWorker(tmp_path, "brev_chaos_cases.py", dag_id, conf, when, sim.connection_json())


def test_worker_sigkill_mid_job_then_rerun_attaches_to_the_finished_job(run_dag, brev_sim, tmp_path, task_logs, secret):
    """The worker dies mid-job and the job then finishes with no worker watching; the re-run collects its output.

    ``dag.test()`` replaces the DagRun, so the re-run is try 1 again: it derives the same job id and the launch guard
    on the instance reports the existing job instead of starting it again. The re-run starts only once the job's
    exit code is on the instance, so it attaches to a finished job (a running one: tests/integration/test_exec_dags.py).
    """
    when = datetime(2026, 5, 1, tzinfo=UTC)
    conf = chaos_conf(GATED, secret)
    with start_worker(tmp_path, "brev_chaos_resume", conf, when, brev_sim) as worker:
        counter = worker.wait_for(lambda: started_counter(brev_sim), "the job started")
        worker.sigkill()  # the worker dies mid-job: no on_kill, no teardown
    (name,) = created_names(brev_sim)
    assert [i["name"] for i in brev_sim.instances()] == [name]  # the job and its instance outlive the worker
    (job_id,) = job_ids_on(brev_sim, name)
    open_gate(counter)  # the job finishes while no worker watches it
    exit_code = brev_sim.sandbox(name) / DEFAULT_BASE_DIR / job_id / "exit_code"
    wait_until(exit_code.exists, what=f"job {job_id} to finish")
    dag_run = run_dag("brev_chaos_resume", conf=conf, logical_date=when, run_after=when)
    attached = f"Job {job_id} already exists on {name} (this try launched it before): attaching."
    assert attached in task_logs.text  # the re-run found the job through the launch guard...
    run_ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "run")
    assert run_ti.try_number == 1
    assert run_ti.xcom_pull(task_ids="run")["job_id"] == job_id
    assert "job-done" in task_logs.text  # ...and the job's output reached its log
    assert "Launched job" not in task_logs.text  # the re-run started nothing
    assert created_names(brev_sim) == [name]  # the instance was adopted, not created twice
    assert_chaos_invariants(
        brev_sim,
        task_logs,
        secrets=[secret],
        counters=["try-1"],
        dag_run=dag_run,
        also_logs=[worker.log()],
    )


@contextlib.contextmanager
def janitor_clock_at(moment: datetime) -> Iterator[None]:
    """The janitor (airflow_provider_brev/instances/sweep.py) reads the time as ``moment`` (instead of waiting up to a
    minute of wall-clock time for a managed name's expiry to pass); everything else keeps the real clock."""

    class _Shifted(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return moment if tz is None else moment.astimezone(tz)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep_module, "datetime", _Shifted)
        yield


def test_worker_sigkill_during_create_is_swept_by_the_janitor(run_dag, brev_sim, tmp_path, task_logs, secret):
    """A SIGKILLed create never reaches its teardown: the expiring name lets the janitor delete the instance."""
    brev_sim.set_fault("ssh_refused", seconds=600)  # create keeps waiting for readiness
    when = datetime.now(UTC).replace(microsecond=0)
    with start_worker(
        tmp_path, "brev_chaos_create_killed", chaos_conf("echo job-done", secret), when, brev_sim
    ) as worker:
        worker.wait_for(  # created, and its readiness being probed
            lambda: brev_sim.instances() and cli_calls(brev_sim, "exec"), "the instance existed"
        )
        worker.sigkill()
    (name,) = created_names(brev_sim)
    assert [i["name"] for i in brev_sim.instances()] == [name]  # leaked: no teardown, no on_kill ran
    managed = parse_managed_name(name)
    assert managed is not None and managed.prefix == "afbrev"
    # the name expires after the run started (whole minutes): the janitor's clock moves past it instead of the test
    # waiting for it (under load the create's wait alone can outlast the expiry, so the real clock is not asserted)
    assert managed.expires_at > when
    with janitor_clock_at(managed.expires_at + timedelta(seconds=1)):
        assert_chaos_invariants(
            brev_sim,
            task_logs,
            secrets=[secret],
            counters=None,
            janitor=lambda: run_dag("brev_chaos_janitor"),
            also_logs=[worker.log()],
        )
    assert deleted_names(brev_sim) == [name]  # the janitor deleted it (by its id)
    assert [call["argv"][1] for call in cli_calls(brev_sim, "delete")] != [name]
    assert counter_files(brev_sim) == []
