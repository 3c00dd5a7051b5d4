"""Warm reuse across DAG runs: ``reuse_key`` on the create task, ``release="stop"`` on the teardown, ``max_idle``
enforced by the janitor -- real ``dag.test()`` runs of tests/dags/brev_reuse_cases.py against the simulator, in
both CLI profiles. The records live in the Airflow Variable ``brev_warm_instances``."""

from __future__ import annotations

import json
import logging
import subprocess
import time

import pytest
from helpers import (
    cli_calls,
    delete_metadata_variable,
    metadata_variable,
    run_state,
    set_metadata_variable,
    task_states,
)

from airflow_provider_brev.cli.instances.reuse import STATE_IN_USE, STATE_STOPPED, ReuseEntry, entries_in
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset
from airflow_provider_brev.utils.warm_reuse import REGISTRY_VARIABLE, ReuseRegistry, claim_warm

NGC_KEY = "ngc-key-" + "7a3c" * 8
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


def registry() -> dict[str, list[ReuseEntry]]:
    return entries_in(metadata_variable(REGISTRY_VARIABLE))


def write_registry(entries: dict[str, list[ReuseEntry]]) -> None:
    set_metadata_variable(REGISTRY_VARIABLE, {k: [e.to_dict() for e in v] for k, v in entries.items()})


@pytest.fixture(autouse=True)
def _empty_registry(airflow_db):
    delete_metadata_variable(REGISTRY_VARIABLE)
    yield
    delete_metadata_variable(REGISTRY_VARIABLE)


def params(**values) -> dict:
    """Every param of the DAG: a run's conf would otherwise leave its values to the next run of the same DAG."""
    return {"key": "k", "type": "g6e.xlarge", "release": "stop", "max_idle": 3600, "bucket": "b", **values}


def xcom(dag_run, task_id: str, key: str = "return_value"):
    ti = next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=key)


def brev(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["brev", *args], capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL
    )


def status(sim, name: str) -> str | None:
    inst = sim.instance(name)
    return None if inst is None else inst["status"]


def until(sim, name: str, wanted: str | None) -> None:
    """Move the simulated clock on until ``name`` has status ``wanted`` (no wall-clock wait)."""
    for _ in range(200):
        if status(sim, name) == wanted:
            return
        sim.advance(0.2)
    raise AssertionError(f"{name} never reached {wanted}: {status(sim, name)}")


def delete_now(sim, name: str) -> None:
    assert brev("delete", name).returncode == 0
    until(sim, name, None)


def test_a_warm_second_run_pulls_no_image_and_downloads_no_unchanged_input(
    run_dag, brev_sim_both, aws_connection, monkeypatch, task_logs
):
    sim = brev_sim_both
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    objects = upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, "datasets/vcn/")
    conf = params(key="vcn-weekly", bucket=aws_connection.bucket)

    first = run_dag("brev_reuse_train", conf=conf)
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create")
    assert xcom(first, "delete") == {"instance_name": name, "deleted": False, "stopped": True}
    assert "Release of " in task_logs.text and "stopping: the disk stopped for 1.00 h costs $" in task_logs.text
    until(sim, name, "STOPPED")
    [entry] = registry()["vcn-weekly"]
    assert (entry.name, entry.state, entry.id) == (name, STATE_STOPPED, sim.instance(name)["id"])
    assert entry.saved_seconds >= 390  # at least g6e.xlarge's catalog boot time
    [staged] = xcom(first, "train")["sync"]["inputs"]
    assert (staged["transferred"], staged["skipped"]) == (objects, 0)
    assert sim.docker_images(name)[IMAGE]["downloads"] == 1

    second_started = time.time()
    second = run_dag("brev_reuse_train", conf=conf)
    assert run_state(second) == "success", task_states(second)
    assert xcom(second, "create") == name  # the same instance, started again
    assert len(cli_calls(sim, "create")) == 1
    assert len(cli_calls(sim, "start")) == 1
    image = sim.docker_images(name)[IMAGE]
    # the first run's finished pull job is the image's done-marker ($HOME kept): the warm run pulls nothing
    assert (image["pull_count"], image["downloads"]) == (1, 1)
    assert [c for c in sim.docker_calls(name, subcommand="pull") if c["ts"] > second_started] == []
    [staged] = xcom(second, "train")["sync"]["inputs"]
    assert (staged["transferred"], staged["skipped"]) == (0, objects)  # no unchanged input downloaded
    assert xcom(second, "delete")["stopped"] is True
    until(sim, name, "STOPPED")
    [bill] = [b for b in sim.billing() if b["name"] == name]
    assert bill["stopped_seconds"] > 0  # the stopped time billed apart (disk only)
    delete_now(sim, name)


@pytest.mark.parametrize(
    ("conf", "why"),
    [
        ({"type": "gpu_1x_h100_pcie"}, "gpu_1x_h100_pcie cannot be stopped (not stoppable): deleting"),
        ({"max_idle": 30 * 24 * 3600}, "deleting: the disk stopped for 720.00 h costs $"),
        ({"release": "delete"}, None),
    ],
    ids=["not_stoppable", "break_even", "release_delete"],
)
def test_what_should_not_stay_stopped_is_deleted_and_forgotten(run_dag, brev_sim_both, task_logs, conf, why):
    sim = brev_sim_both
    dag_run = run_dag("brev_reuse_lifecycle", conf=params(key="k1", **conf))
    assert run_state(dag_run) == "success", task_states(dag_run)
    name = xcom(dag_run, "create")
    assert xcom(dag_run, "delete") == {"instance_name": name, "deleted": True}
    assert cli_calls(sim, "stop") == []
    if why:
        assert why in task_logs.text
    if "max_idle" in conf:
        assert "not less than the $" in task_logs.text  # both numbers
    assert registry() == {}
    until(sim, name, None)


def test_the_janitor_deletes_a_stopped_instance_after_its_max_idle(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    dag_run = run_dag("brev_reuse_lifecycle", conf=params(key="k2"))
    assert run_state(dag_run) == "success", task_states(dag_run)
    name = xcom(dag_run, "create")
    until(sim, name, "STOPPED")

    sweep = run_dag(
        "brev_case_janitor", conf={"name_prefix": ""}
    )  # within max_idle: kept (by its record, not its name)
    assert run_state(sweep) == "success", task_states(sweep)
    report = xcom(sweep, "sweep")
    assert [k["name"] for k in report["kept"]] == [name] and report["kept"][0]["reuse_key"] == "k2"
    assert status(sim, name) == "STOPPED"

    [entry] = registry()["k2"]  # stopped longer than max_idle ago (the run that stopped it is long gone)
    write_registry({"k2": [ReuseEntry(**{**entry.to_dict(), "since": entry.since - entry.max_idle - 60})]})
    sweep = run_dag("brev_case_janitor", conf={"name_prefix": ""})
    assert run_state(sweep) == "success", task_states(sweep)
    assert xcom(sweep, "sweep")["deleted"] == [name]
    assert "stopped longer than its max_idle" in task_logs.text
    assert status(sim, name) is None
    assert registry() == {}


def test_a_foreign_stopped_instance_under_the_key_is_never_started(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    first = run_dag("brev_reuse_lifecycle", conf=params(key="k3"))
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create")
    until(sim, name, "STOPPED")
    ours = sim.instance(name)["id"]
    delete_now(sim, name)  # someone deletes it and makes their own, stopped, under the freed name
    theirs = sim.create_instance_directly(name, status="STOPPED")["id"]
    assert theirs != ours

    second = run_dag("brev_reuse_lifecycle", conf=params(key="k3", release="delete"))
    assert run_state(second) == "success", task_states(second)
    assert cli_calls(sim, "start") == []  # theirs was never started
    assert xcom(second, "create") != name
    assert (sim.instance(name)["id"], status(sim, name)) == (theirs, "STOPPED")
    assert f"another instance (id {theirs}) holds the name" in task_logs.text
    assert registry() == {}  # the stale record is forgotten, the new instance deleted
    delete_now(sim, name)


class _Snapshot(ReuseRegistry):
    """A registry as a run read it: both runs read the same stopped entry before either wrote (no lost update can
    make two runs share the instance: the start is the claim)."""

    def __init__(self, entries: dict[str, list[ReuseEntry]]) -> None:
        super().__init__(logging.getLogger(__name__))
        self.entries_now = entries

    def load(self) -> dict[str, list[ReuseEntry]]:
        return {k: list(v) for k, v in self.entries_now.items()}

    def save(self, entries: dict[str, list[ReuseEntry]]) -> None:
        self.entries_now = entries


def test_two_runs_never_start_one_instance(brev_sim_both, monkeypatch):
    from airflow_provider_brev.hooks.brev import BrevHook

    sim = brev_sim_both
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", sim.connection_json())
    sim.login()
    seeded = sim.create_instance_directly("warm-one", status="STOPPED")
    entry = ReuseEntry(key="k4", id=seeded["id"], name="warm-one", state=STATE_STOPPED, since=time.time())
    log = logging.getLogger(__name__)
    run_a, run_b = _Snapshot({"k4": [entry]}), _Snapshot({"k4": [entry]})
    hook = BrevHook(retry_delay=0.05)
    got_a = claim_warm(hook, log, run_a, "k4", "dag/run_a/create/-1")
    got_b = claim_warm(hook, log, run_b, "k4", "dag/run_b/create/-1")
    assert got_a is not None and got_a.id == seeded["id"]
    assert got_b is None  # listed STARTING: not a candidate any more
    assert [e.state for e in run_a.entries_now["k4"]] == [STATE_IN_USE]
    assert len(cli_calls(sim, "start")) == 1
    # had run B listed it before run A's start, its own start would be the claim that fails
    with pytest.raises(BrevError, match="not stopped"):
        hook.start_instance("warm-one", instance_id=seeded["id"])
    assert status(sim, "warm-one") in ("STARTING", "RUNNING")
    delete_now(sim, "warm-one")


def test_an_ephemeral_step_stops_its_instance_and_the_next_run_starts_it(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    first = run_dag("brev_reuse_ephemeral", conf=params(key="k5"))
    assert run_state(first) == "success", task_states(first)
    assert xcom(first, "run")["last_line"] == "cold"
    [entry] = registry()["k5"]
    assert entry.state == STATE_STOPPED
    until(sim, entry.name, "STOPPED")

    second = run_dag("brev_reuse_ephemeral", conf=params(key="k5", release="delete"))
    assert run_state(second) == "success", task_states(second)
    assert xcom(second, "run")["last_line"] == "warm"  # its $HOME survived the stop
    assert len(cli_calls(sim, "create")) == 1 and len(cli_calls(sim, "start")) == 1
    assert registry() == {}  # deleted at the end of the second run, and forgotten
    until(sim, entry.name, None)
