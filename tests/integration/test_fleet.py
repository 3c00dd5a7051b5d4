"""A 50-job fleet followed from one event loop the way a triggerer runs its triggers (``BrevRemoteJobTrigger.run()``),
against the simulator: every job's end is reported, the instances' polls are shared, and nothing the provider or the
CLI started is left running afterwards (``brev``, ``ssh``, ``bash``, ``ssh-agent``)."""

from __future__ import annotations

import asyncio
import time

import psutil

from airflow_provider_brev.core.jobs.remote import RemoteJob
from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger

JOBS = 50
INSTANCES = 5


def test_a_fifty_job_fleet_ends_well_and_leaves_no_process(brev_sim, monkeypatch):
    from airflow_provider_brev.hooks.brev import BrevHook

    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    monkeypatch.setenv("AIRFLOW__BREV__TRIGGERER_MAX_PROCESSES", "8")
    names = [f"fleet-{k}" for k in range(INSTANCES)]
    for name in names:
        brev_sim.create_instance_directly(name, ready=True)
    hook = BrevHook(retry_delay=0.05, log_cli_output=False)
    jobs = [(names[i % INSTANCES], RemoteJob(f"fleet-job-{i}")) for i in range(JOBS)]
    for index, (name, job) in enumerate(jobs):
        hook.launch_job(name, job, f"sleep {1 + index % 3}; echo job {index} done; exit {index % 2}")
    launched_calls = len(brev_sim.calls("exec"))
    me = psutil.Process()
    peak_children = 0

    async def follow(name: str, job: RemoteJob) -> dict:
        trigger = BrevRemoteJobTrigger(instance_name=name, job=job.to_dict(), poll_interval=1.0)
        async for event in trigger.run():
            return event.payload
        raise AssertionError("no event")

    async def watch(stop: asyncio.Event) -> None:
        nonlocal peak_children
        while not stop.is_set():
            peak_children = max(peak_children, len(me.children()))
            await asyncio.sleep(0.02)

    async def main() -> list[dict]:
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch(stop))
        try:
            return await asyncio.gather(*(follow(name, job) for name, job in jobs))
        finally:
            stop.set()
            await watcher

    events = asyncio.run(main())
    assert [(e["status"], e["exit_code"], e["job"]["job_id"]) for e in events] == [
        ("finished", i % 2, f"fleet-job-{i}") for i in range(JOBS)
    ]
    assert all(e["last_line"] == f"job {i} done" for i, e in enumerate(events))
    polls = len(brev_sim.calls("exec")) - launched_calls
    assert polls < JOBS  # shared: fewer polls in all than jobs
    assert 1 <= peak_children <= 8  # the loop's cap
    deadline = time.monotonic() + 30  # a process killed at the very end may take a moment to be reaped
    while (brev_sim.processes() or brev_sim.agent_pids() or me.children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert brev_sim.processes() == []
    assert brev_sim.agent_pids() == []
    assert me.children() == []
