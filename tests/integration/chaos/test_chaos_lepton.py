"""Chaos on Lepton steps: a worker SIGKILLed while its Lepton job runs, and a killed task, against the fake Lepton
workspace (the real SDK over HTTP). The DAG is ``lepton_gated`` of tests/integration/dags/lepton_cases.py: its job says
``started`` and waits for a ``gate`` file in its working directory."""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import ChaosAgent, DagWorker, task_states

from integration.chaos.chaos_helpers import wait_until

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")


def running_job(fake):
    """The one job once it runs and has logged ``started`` (its name), else ``None``."""
    jobs = fake.jobs()
    for name, job in jobs.items():
        if job.state == "Running" and any(line == "started" for _ts, line in list(job.log)):
            return name
    return None


def open_gate(fake, name: str) -> None:
    job = fake.job(name)
    (fake.root / "replicas" / f"{name}-{job.restarts}" / "work" / "gate").touch()


def command_lines() -> str:
    """Every process's command line on this machine (the token must be on none)."""
    text = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"))
            except OSError:
                continue
    return "\n".join(text)


def test_a_rerun_after_a_worker_sigkill_reattaches_to_the_running_job(
    run_dag, brev_sim, lepton_fake, tmp_path, task_logs
):
    when = datetime(2026, 6, 1, tzinfo=UTC)
    with DagWorker(tmp_path, "lepton_cases.py", "lepton_gated", {}, when, brev_sim.connection_json()) as worker:
        name = worker.wait_for(lambda: running_job(lepton_fake), "the Lepton job to run")
        assert lepton_fake.token not in command_lines()  # the token is on no command line, the job's included
        worker.sigkill()  # the worker dies mid-job: no on_kill
    assert lepton_fake.job(name).state == "Running"  # the job outlives its worker
    reattached = f"Lepton job {name} (try 1) exists (running): following it, not submitting again."
    with ChaosAgent(lambda: reattached in task_logs.text, lambda _: open_gate(lepton_fake, name)) as gate:
        dag_run = run_dag("lepton_gated", logical_date=when, run_after=when)
    assert gate.fired and task_states(dag_run) == {"job": "success"}, task_logs.text
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "job")
    result = ti.xcom_pull(task_ids="job")
    assert ti.try_number == 1 and result["job"] == name and result["last_line"] == "job-done"
    assert len(lepton_fake.submissions()) == 1  # one submission for both runs
    logs = task_logs.text + worker.log() + json.dumps(result) + json.dumps(lepton_fake.requests)
    assert lepton_fake.token not in logs
    assert not lepton_fake.workspace.secrets


def test_a_killed_task_stops_its_job(run_dag, lepton_fake, task_logs):
    previous = signal.getsignal(signal.SIGTERM)

    def task_runner_handles_sigterm() -> bool:
        return getattr(signal.getsignal(signal.SIGTERM), "__name__", "") == "_on_term"

    try:
        killer = ChaosAgent(
            lambda: task_runner_handles_sigterm() and running_job(lepton_fake),
            lambda _: os.kill(os.getpid(), signal.SIGTERM),
        )
        with killer:
            dag_run = run_dag("lepton_gated")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert killer.fired and task_states(dag_run) == {"job": "failed"}
    [submission] = lepton_fake.submissions()
    name = submission["metadata"]["id"]
    assert f"Task killed: stopping Lepton job {name}." in task_logs.text
    job = lepton_fake.job(name)
    wait_until(lambda: job.state == "Stopped", what=f"job {name} to stop")
    assert "job-done" not in [line for _ts, line in job.log]  # it never got past its gate
    assert not lepton_fake.workspace.secrets
