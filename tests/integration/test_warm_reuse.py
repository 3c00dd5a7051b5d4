"""Warm reuse across DAG runs: ``reuse_key`` on the create task, ``release="stop"`` on the teardown, ``max_idle``
enforced by the janitor -- real ``dag.test()`` runs of tests/integration/dags/brev_reuse_cases.py against the simulator, in
both CLI profiles. The records live in one Airflow Variable per instance (``brev_warm_instance.<id>``)."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from helpers import (
    WARM_AWAKE_PREFIX,
    adds_up_to_the_bill,
    clear_warm_records,
    cli_calls,
    run_kept,
    run_state,
    task_states,
    warm_records,
    warm_variable_keys,
    write_warm_record,
)

from airflow_provider_brev.core.instances.warm_pool import STATE_IN_USE, STATE_STOPPED, ReuseEntry
from airflow_provider_brev.core.protocol.names import managed_instance_name
from airflow_provider_brev.exceptions import BrevError
from airflow_provider_brev.instances.warm_pool import ReuseRegistry, claim_warm
from airflow_provider_brev.instances.warm_pool_stores import MetadataVariables, MetadataXComs
from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

NGC_KEY = "ngc-key-" + "7a3c" * 8
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


registry = warm_records


@pytest.fixture
def run(run_dag):
    """Run a DAG that no later run deletes (:func:`helpers.run_kept`)."""
    return lambda dag_id, conf: run_kept(run_dag, dag_id, conf)


@pytest.fixture(autouse=True)
def _empty_registry(airflow_db):
    clear_warm_records()
    yield
    clear_warm_records()


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


def kept_by_a_run(run, sim, key: str) -> str:
    """The name of an instance a run created and its teardown stopped under ``key``, once STOPPED."""
    dag_run = run("brev_reuse_lifecycle", params(key=key))
    assert run_state(dag_run) == "success", task_states(dag_run)
    name = xcom(dag_run, "create")
    until(sim, name, "STOPPED")
    return name


def janitor(run_dag) -> dict:
    """A janitor run's report (the connection's owner prefix)."""
    sweep = run_dag("brev_case_janitor", conf={"name_prefix": ""})
    assert run_state(sweep) == "success", task_states(sweep)
    return xcom(sweep, "sweep")


def delete_now(sim, name: str) -> None:
    assert brev("delete", name).returncode == 0
    until(sim, name, None)


def test_a_warm_second_run_pulls_no_image_and_downloads_no_unchanged_input(
    run, brev_sim_both, aws_connection, monkeypatch, task_logs
):
    sim = brev_sim_both
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    objects = upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, "datasets/vcn/")
    conf = params(key="vcn-weekly", bucket=aws_connection.bucket)

    first = run("brev_reuse_train", conf)
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create")
    assert xcom(first, "delete") == {"instance_name": name, "deleted": False, "stopped": True}
    assert "Release of " in task_logs.text and "stopping: the disk stopped for 1.00 h costs $" in task_logs.text
    until(sim, name, "STOPPED")
    [entry] = registry()["vcn-weekly"]
    assert (entry.name, entry.state, entry.id) == (name, STATE_STOPPED, sim.instance(name)["id"])
    creator = f"brev_reuse_train/{first.run_id}/create/-1"  # its name derives from it; its XCom holds the id
    assert (entry.created_by, entry.claimed_by, entry.conn_id) == (creator, creator, "brev_default")
    assert entry.saved_seconds >= 390  # at least g6e.xlarge's catalog boot time
    [staged] = xcom(first, "train")["sync"]["inputs"]
    assert (staged["transferred"], staged["skipped"]) == (objects, 0)
    assert sim.docker_images(name)[IMAGE]["downloads"] == 1

    second_started = time.time()
    second = run("brev_reuse_train", conf)
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
    check_warm_bill(second, name, "vcn-weekly")
    delete_now(sim, name)


def check_warm_bill(dag_run, name: str, key: str) -> None:
    """A warm run's bill: the instance from its ``brev start`` to its ``brev stop`` request, split into the tasks'
    phases, and the disk time it sat stopped since the first run, billed to its reuse key."""
    from airflow_provider_brev.core.bill import cost_table, run_cost
    from airflow_provider_brev.core.cost import costs_in

    tis = sorted(dag_run.get_task_instances(), key=lambda ti: ti.start_date)
    costs = [(ti.task_id, c) for ti in tis for c in costs_in(ti.xcom_pull(task_ids=ti.task_id, key="brev_cost"))]
    [life] = [xcom(dag_run, "delete", "brev_lifetime_cost")]
    stopped = dict(costs)["create"]["stopped"]
    assert (stopped["reuse_key"], stopped["instance_name"]) == (key, name)
    assert stopped["seconds"] > 0 and stopped["disk_price_per_hour"] > 0 and stopped["dollars"] is not None
    assert (life["ended_by"], life["created_at"]) == ("stop", stopped["started_at"])  # billed from the start request
    report = run_cost(costs, [("delete", life)])
    report["table"] = cost_table(report)
    adds_up_to_the_bill(report)
    instance, disk = report["bill"]
    assert (instance["kind"], instance["ended_by"], disk["kind"], disk["reuse_key"]) == (
        "instance",
        "stop",
        "disk",
        key,
    )
    assert disk["seconds"] == stopped["seconds"]
    assert f"stopped disk of reuse key {key!r}" in report["table"]


@pytest.mark.parametrize(
    ("conf", "why"),
    [
        ({"type": "gpu_1x_h100_pcie"}, "gpu_1x_h100_pcie cannot be stopped (not stoppable): deleting"),
        ({"max_idle": 30 * 24 * 3600}, "deleting: the disk stopped for 720.00 h costs $"),
        ({"release": "delete"}, None),
    ],
    ids=["not_stoppable", "break_even", "release_delete"],
)
def test_what_should_not_stay_stopped_is_deleted_and_forgotten(run, brev_sim_both, task_logs, conf, why):
    sim = brev_sim_both
    dag_run = run("brev_reuse_lifecycle", params(key="k1", **conf))
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


def test_the_janitor_deletes_a_stopped_instance_after_its_max_idle(run, run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    name = kept_by_a_run(run, sim, "k2")

    report = janitor(run_dag)  # within max_idle: kept (by its record, not its name)
    assert [k["name"] for k in report["kept"]] == [name] and report["kept"][0]["reuse_key"] == "k2"
    assert status(sim, name) == "STOPPED"

    [entry] = registry()["k2"]  # stopped longer than max_idle ago (the run that stopped it is long gone)
    write_warm_record({**entry.to_dict(), "since": entry.since - entry.max_idle - 60})
    assert janitor(run_dag)["deleted"] == [name]
    assert "stopped longer than its max_idle" in task_logs.text
    assert status(sim, name) is None
    assert registry() == {}


def test_a_foreign_stopped_instance_under_the_key_is_never_started(run, brev_sim_both, task_logs):
    sim = brev_sim_both
    first = run("brev_reuse_lifecycle", params(key="k3"))
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create")
    until(sim, name, "STOPPED")
    ours = sim.instance(name)["id"]
    delete_now(sim, name)  # someone deletes it and makes their own, stopped, under the freed name
    theirs = sim.create_instance_directly(name, status="STOPPED")["id"]
    assert theirs != ours

    second = run("brev_reuse_lifecycle", params(key="k3", release="delete"))
    assert run_state(second) == "success", task_states(second)
    assert cli_calls(sim, "start") == []  # theirs was never started
    assert xcom(second, "create") != name
    assert (sim.instance(name)["id"], status(sim, name)) == (theirs, "STOPPED")
    assert [e.id for e in registry()["k3"]] == [ours]  # the new instance deleted; the stale record is never read
    delete_now(sim, name)


class _Snapshot(ReuseRegistry):
    """A registry as a run read it: both runs read the same stopped entry before either wrote (whatever the records
    say, two runs never share the instance: the start is the claim)."""

    def __init__(self, entries: list[ReuseEntry]) -> None:
        super().__init__(logging.getLogger(__name__), store=MetadataVariables(), xcoms=MetadataXComs())
        self.read_before = entries
        self.written: list[ReuseEntry] = []

    def entries(self, instances, key, prefix) -> list[ReuseEntry]:
        return [e for e in self.read_before if e.key == key]

    def put(self, entry: ReuseEntry) -> None:
        self.written.append(entry)


def test_two_runs_never_start_one_instance(run, brev_sim_both):
    from airflow_provider_brev.hooks.brev import BrevHook

    sim = brev_sim_both
    first = run("brev_reuse_lifecycle", params(key="k4"))
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create")
    until(sim, name, "STOPPED")
    [entry] = registry()["k4"]
    log = logging.getLogger(__name__)
    run_a, run_b = _Snapshot([entry]), _Snapshot([entry])
    hook = BrevHook(retry_delay=0.05)
    told: list[tuple[str | None, float | None]] = []  # what run A's task was told, in order

    def on_claim(instance, requested_at) -> None:
        told.append((instance.id if instance else None, requested_at))

    sim.set_fault("http_5xx", command="start", times=1)  # run A's first start fails: it owns nothing
    assert claim_warm(hook, log, run_a, "k4", "dag/run_a/create/-1", prefix="afbrev", on_claim=on_claim) is None
    assert told == [(entry.id, None), (None, None)]
    told.clear()
    asked = time.time()
    got_a = claim_warm(hook, log, run_a, "k4", "dag/run_a/create/-1", prefix="afbrev", on_claim=on_claim)
    got_b = claim_warm(hook, log, run_b, "k4", "dag/run_b/create/-1", prefix="afbrev", on_claim=on_claim)
    assert got_a is not None and got_a.id == entry.id
    [in_flight, (owned, requested_at)] = told  # in flight, then owned from the start that went through
    assert in_flight == (entry.id, None)
    assert owned == entry.id and requested_at is not None and asked <= requested_at <= time.time()
    assert got_b is None  # listed STARTING: not a candidate any more
    assert [(e.state, e.claimed_by, e.created_by) for e in run_a.written] == [
        (STATE_IN_USE, "dag/run_a/create/-1", entry.created_by)  # its creator stays on record
    ]
    assert run_b.written == []  # only the holder writes the record
    assert len(cli_calls(sim, "start")) == 2  # the failed one and run A's
    # had run B listed it before run A's start, its own start would be the claim that fails
    with pytest.raises(BrevError, match="not stopped"):
        hook.start_instance(name, instance_id=entry.id)
    assert status(sim, name) in ("STARTING", "RUNNING")
    delete_now(sim, name)


def test_an_ephemeral_step_stops_its_instance_and_the_next_run_starts_it(run, brev_sim_both, task_logs):
    sim = brev_sim_both
    first = run("brev_reuse_ephemeral", params(key="k5"))
    assert run_state(first) == "success", task_states(first)
    assert xcom(first, "run")["last_line"] == "cold"
    [entry] = registry()["k5"]
    assert entry.state == STATE_STOPPED
    until(sim, entry.name, "STOPPED")

    second = run("brev_reuse_ephemeral", params(key="k5", release="delete"))
    assert run_state(second) == "success", task_states(second)
    assert xcom(second, "run")["last_line"] == "warm"  # its $HOME survived the stop
    assert len(cli_calls(sim, "create")) == 1 and len(cli_calls(sim, "start")) == 1
    assert registry() == {}  # deleted at the end of the second run, and forgotten
    until(sim, entry.name, None)


# --- who may act on a record (a Variable anyone allowed to edit Variables can write) --------------------------------


def forged(name: str, ident: str, key: str, **fields) -> dict:
    """A record written by hand (a copy-paste, an edit in the UI)."""
    return {"key": key, "id": ident, "name": name, "state": "stopped", "since": time.time() - 60, **fields}


def lookalike(sim, status: str = "STOPPED") -> tuple[str, str]:
    """An instance under a managed name of the owner prefix, derived from a task that never ran: no XCom holds it."""
    name = managed_instance_name(
        dag_id="brev_reuse_lifecycle",
        run_id="manual__never",
        task_id="create",
        expires_at=datetime.now(UTC) + timedelta(hours=6),
    )
    return name, sim.create_instance_directly(name, status=status)["id"]


def test_a_run_never_starts_an_instance_the_provider_did_not_make(run, brev_sim_both, task_logs):
    sim = brev_sim_both
    notebook = sim.create_instance_directly("my-notebook", status="STOPPED")["id"]
    name, ident = lookalike(sim)
    write_warm_record(forged("my-notebook", notebook, "k6"), legacy=True)
    creator = "brev_reuse_lifecycle/manual__never/create/-1"
    write_warm_record(forged(name, ident, "k6", created_by=creator, claimed_by=creator), legacy=True)

    dag_run = run("brev_reuse_lifecycle", params(key="k6", release="delete"))
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert cli_calls(sim, "start") == []  # neither was started, so neither was deleted by the teardown
    assert (status(sim, "my-notebook"), status(sim, name)) == ("STOPPED", "STOPPED")
    assert xcom(dag_run, "create") not in ("my-notebook", name)  # a fresh instance
    logs = task_logs.text
    assert "Ignoring the warm-reuse record of my-notebook" in logs
    assert "my-notebook is not a name this provider makes" in logs
    assert (
        f"Ignoring the warm-reuse record of {name} (id {ident}, reuse key 'k6'): no task it names ({creator})" in logs
    )


def test_the_janitor_never_acts_on_a_record_of_an_instance_the_provider_did_not_make(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    notebook = sim.create_instance_directly("my-notebook")["id"]
    name, ident = lookalike(sim)
    long_ago = time.time() - 3 * 24 * 3600  # past any max_idle and max_lifetime
    write_warm_record(forged("my-notebook", notebook, "k7", state="in_use", since=long_ago), legacy=True)
    write_warm_record(forged(name, ident, "k7", since=long_ago), legacy=True)

    report = janitor(run_dag)
    assert report["deleted"] == [] and cli_calls(sim, "delete") == []
    assert report["kept"] == [{"name": name, "expires_at": report["kept"][0]["expires_at"]}]  # by its name, unexpired
    assert (status(sim, "my-notebook"), status(sim, name)) == ("RUNNING", "STOPPED")
    assert "Ignoring the warm-reuse record of my-notebook" in task_logs.text
    assert f"Ignoring the warm-reuse record of {name}" in task_logs.text


# --- a stopped instance someone starts by hand --------------------------------------------------------------------


def test_a_stopped_instance_started_by_hand_is_stopped_again_then_deleted(run, run_dag, brev_sim_both, task_logs):
    from airflow.models.variable import Variable

    sim = brev_sim_both
    name = kept_by_a_run(run, sim, "k8")
    ident = sim.instance(name)["id"]
    assert brev("start", name).returncode == 0  # someone looks at the kept disk (brev shell/exec start it too)
    until(sim, name, "RUNNING")

    first = janitor(run_dag)
    assert f"Keeping {name} (RUNNING): reuse key 'k8', recorded stopped but RUNNING since at least" in task_logs.text
    assert [k["name"] for k in first["kept"]] == [name]
    assert status(sim, name) == "RUNNING"  # a run that had just started it would record it in use within seconds

    # the next sweep, 10 minutes or more later (the sighting the first sweep kept, moved back by as much)
    sighting = WARM_AWAKE_PREFIX + ident
    seen = Variable.get(sighting, deserialize_json=True)
    Variable.set(sighting, {**seen, "seen_at": seen["seen_at"] - 601}, serialize_json=True)
    second = janitor(run_dag)
    assert (second["stopped"], second["deleted"]) == ([name], [])
    assert [c["argv"][1:] for c in cli_calls(sim, "stop")][-1] == [ident]  # by the id it listed
    until(sim, name, "STOPPED")  # its disk kept, and its record as the run wrote it
    [entry] = registry()["k8"]
    assert (entry.id, entry.state) == (ident, STATE_STOPPED) and warm_variable_keys(WARM_AWAKE_PREFIX) == []

    write_warm_record({**entry.to_dict(), "since": entry.since - entry.max_idle - 60})  # no run started it in time
    assert janitor(run_dag)["deleted"] == [name]
    assert status(sim, name) is None and registry() == {}


def test_a_run_that_began_before_the_upgrade_keeps_its_instance_and_the_next_run_starts_it(run, brev_sim_both):
    sim = brev_sim_both
    first = run("brev_reuse_upgrade", params(key="k9"))
    assert run_state(first) == "success", task_states(first)
    name = xcom(first, "create")
    report = xcom(first, "sweep")  # the janitor mid-run, with the record of an earlier release
    assert report["kept"] == [{"name": name, "expires_at": report["kept"][0]["expires_at"], "reuse_key": "k9"}]
    assert xcom(first, "delete")["stopped"] is True
    [entry] = registry()["k9"]  # a record of its own now, naming the task that held it
    assert (entry.state, entry.created_by, entry.claimed_by) == (
        STATE_STOPPED,
        "",
        f"brev_reuse_upgrade/{first.run_id}/create/-1",
    )
    until(sim, name, "STOPPED")

    second = run("brev_reuse_lifecycle", params(key="k9", release="delete"))
    assert run_state(second) == "success", task_states(second)
    assert xcom(second, "create") == name and len(cli_calls(sim, "start")) == 1
    until(sim, name, None)
