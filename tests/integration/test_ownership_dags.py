"""Instance ownership is recorded, never guessed: explicit names a task did not create are never taken or deleted.

Real ``dag.test()`` runs (tests/integration/dags/brev_ownership_cases.py) against the simulator; "a person's instance" is one
the simulator seeds without the provider (``create_instance_directly``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from helpers import cli_calls, run_state, ssh_refused_until_a_try_times_out, task_states, wait_for_no_instances

from airflow_provider_brev._compat import AIRFLOW_V_3_3_PLUS
from airflow_provider_brev.core.instances.request import InstanceRequest
from airflow_provider_brev.exceptions import BrevInstanceNotOwnedError
from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook
from airflow_provider_brev.instances.provisioning import (
    XCOM_INSTANCE_RECORD,
    InstanceProvisioner,
    InstanceRecord,
)
from airflow_provider_brev.utils.task_memory import TaskMemory

NOT_OWNED = "exists and was not created by this task; pass adopt_existing=True"
needs_task_state_store = pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS, reason="a retry reads its earlier try's record from the Airflow 3.3+ task state store"
)


def ti_of(dag_run: Any, task_id: str) -> Any:
    return next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)


def record_of(dag_run: Any, task_id: str) -> InstanceRecord | None:
    return InstanceRecord.from_dict(ti_of(dag_run, task_id).xcom_pull(task_ids=task_id, key=XCOM_INSTANCE_RECORD))


def test_a_persons_instance_is_refused_before_any_create_or_delete(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    persons = sim.create_instance_directly("my-notebook")
    dag_run = run_dag("brev_own_explicit")
    states = task_states(dag_run)
    assert states["create"] == "failed"
    assert ti_of(dag_run, "create").try_number == 1  # an input error: not retried
    assert states["delete"] == "success"  # it ran (all_done) ...
    assert ti_of(dag_run, "delete").xcom_pull(task_ids="delete") == {"instance_name": "my-notebook", "deleted": False}
    assert cli_calls(sim, "create") == []
    assert cli_calls(sim, "delete") == []  # ... and left it
    assert sim.instance("my-notebook")["id"] == persons["id"]
    assert NOT_OWNED in task_logs.text
    assert record_of(dag_run, "create") is None


def test_a_deleting_instance_of_someone_else_is_refused_too(run_dag, brev_sim):
    brev_sim.set_timings(delete_seconds=600)  # it stays DELETING for the whole run
    brev_sim.create_instance_directly("my-notebook", status="DELETING")
    dag_run = run_dag("brev_own_explicit")
    assert task_states(dag_run)["create"] == "failed"
    assert cli_calls(brev_sim, "create") == []
    assert cli_calls(brev_sim, "delete") == []
    assert brev_sim.instance("my-notebook")["status"] == "DELETING"


def test_adopt_existing_uses_it_and_the_teardown_leaves_it(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    persons = sim.create_instance_directly("my-notebook")
    dag_run = run_dag("brev_own_adopt")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert ti_of(dag_run, "create").xcom_pull(task_ids="create") == "my-notebook"  # the return value stays the name
    record = record_of(dag_run, "create")
    assert record is not None
    assert (record.name, record.id, record.owned, record.adopted) == ("my-notebook", persons["id"], False, True)
    assert cli_calls(sim, "create") == []
    assert cli_calls(sim, "delete") == []
    assert sim.instance("my-notebook")["id"] == persons["id"]
    assert "Leaving instance my-notebook: it was adopted, not created by this DAG run" in task_logs.text


def test_an_explicit_name_the_task_created_is_recorded_with_its_spec_and_deleted(run_dag, brev_sim_both):
    sim = brev_sim_both
    dag_run = run_dag("brev_own_explicit", conf={"name": "fresh-notebook"})
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert len(cli_calls(sim, "create")) == 1
    record = record_of(dag_run, "create")
    assert record is not None
    assert (record.name, record.owned, record.adopted) == ("fresh-notebook", True, False)
    assert record.id and record.id == ti_of(dag_run, "create").xcom_pull(task_ids="create", key="instance")["id"]
    assert record.spec == {
        "gpu": "L40S:1",
        "instance_types": None,
        "min_vram": None,
        "cloud_cred_id": None,
        "workspace_group_id": None,
        "require_docker": False,
        "brev_conn_id": "brev_default",
        "instance_type": record.spec["instance_type"],
    }
    assert record.spec["instance_type"]  # the type Brev placed it on
    assert InstanceRecord.from_dict(record.to_dict()) == record
    assert ti_of(dag_run, "recorded").xcom_pull(task_ids="recorded") == record.to_dict()  # read_instance_record
    assert ti_of(dag_run, "delete").xcom_pull(task_ids="delete") == {"instance_name": "fresh-notebook", "deleted": True}
    wait_for_no_instances(sim)


@needs_task_state_store
def test_a_retry_adopts_the_instance_its_first_try_created(run_dag, brev_sim, task_logs):
    with ssh_refused_until_a_try_times_out(brev_sim, task_logs) as agent:
        dag_run = run_dag("brev_own_retry")
    assert agent.fired
    assert run_state(dag_run) == "success", task_states(dag_run)
    create = ti_of(dag_run, "create")
    assert create.try_number == 2
    assert len(cli_calls(brev_sim, "create")) == 1
    record = record_of(dag_run, "create")
    assert record is not None and record.owned
    assert len(cli_calls(brev_sim, "delete")) == 1  # the teardown deleted it
    wait_for_no_instances(brev_sim)


@needs_task_state_store
def test_a_retry_waits_out_the_deletion_of_its_own_failed_instance(run_dag, brev_sim):
    brev_sim.set_timings(delete_seconds=3)  # the retry starts while the first try's instance is still DELETING
    brev_sim.set_fault("boot_failure", message="host lost")
    dag_run = run_dag("brev_own_retry_after_boot_failure")
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert ti_of(dag_run, "create").try_number == 2
    assert len(cli_calls(brev_sim, "create")) == 2  # the failed one (deleted by the first try) and its replacement
    wait_for_no_instances(brev_sim)


def test_race_for_one_name_one_owner_and_only_its_teardown_deletes(run_dag, brev_sim_both, task_logs):
    sim = brev_sim_both
    dag_run = run_dag("brev_own_race")
    states = task_states(dag_run)
    assert states == {"create_a": "success", "create_b": "failed", "delete_b": "success", "delete_a": "success"}
    assert NOT_OWNED in task_logs.text
    assert len(cli_calls(sim, "create")) == 1  # create_b refused before `brev create`
    assert ti_of(dag_run, "delete_b").xcom_pull(task_ids="delete_b")["deleted"] is False
    assert ti_of(dag_run, "delete_a").xcom_pull(task_ids="delete_a")["deleted"] is True
    assert len(cli_calls(sim, "delete")) == 1
    wait_for_no_instances(sim)


# -- the race inside `brev create`: the name appears between the existence check and the create ------------------
@pytest.fixture
def _fresh_process_caches():
    _reset_process_caches()
    yield
    _reset_process_caches()


class _PersonCreatesItMeanwhile(BrevHook):
    """A real hook; right after its first lookup of a free name, a person creates that name (a concurrent run)."""

    def __init__(self, sim: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sim = sim

    def get_instance(self, name: str) -> Any:
        found = super().get_instance(name)
        if found is None and self.sim.instance(name) is None:
            self.sim.create_instance_directly(name)
        return found


@pytest.mark.usefixtures("_fresh_process_caches")
def test_duplicate_name_from_brev_create_is_not_owned_and_nothing_is_deleted(brev_sim_both, monkeypatch):
    sim = brev_sim_both
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", sim.connection_json())
    hook = _PersonCreatesItMeanwhile(sim, retry_delay=0.05)
    provisioner = InstanceProvisioner(hook, logging.getLogger(__name__), InstanceRequest("race-name", gpu="L40S:1"))
    with pytest.raises(BrevInstanceNotOwnedError, match=NOT_OWNED):
        provisioner.ensure(TaskMemory({}), wait_timeout=30)  # no task state store (explicit name, no record)
    assert len(cli_calls(sim, "create")) == 1  # Brev refused the duplicate name
    assert cli_calls(sim, "delete") == []
    assert sim.instance("race-name")["status"] == "RUNNING"
