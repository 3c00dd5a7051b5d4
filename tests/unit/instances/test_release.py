"""Unit tests of ``airflow_provider_brev/instances/release.py``, the only module that deletes or stops an instance.

Each rule runs against the bundled Brev simulator through a real :class:`~airflow_provider_brev.hooks.brev.BrevHook`
(the ``brev`` it calls is the simulator's): what the simulator was asked to delete, and what is left, is the
evidence. The rules themselves (which id a name stands for) are pure and tested in
``tests/unit/core/instances/test_identity.py``.
"""

from __future__ import annotations

import logging
import time

import pytest

from airflow_provider_brev.core.instances.records import InstanceRecord
from airflow_provider_brev.exceptions import BrevInstanceReplacedError
from airflow_provider_brev.instances import release

LOG = logging.getLogger("test-release")


@pytest.fixture
def hook(brev_sim, monkeypatch):
    """A hook on the simulator."""
    from airflow_provider_brev.hooks.brev import BrevHook

    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    return BrevHook(retry_delay=0.05)


def deletions(brev_sim) -> list[list[str]]:
    """The argv of every ``brev delete`` the simulator received."""
    return [call["argv"] for call in brev_sim.calls("delete")]


def owned(name: str, instance_id: str) -> InstanceRecord:
    return InstanceRecord(name=name, id=instance_id, owned=True, adopted=False)


def test_the_teardown_deletes_the_instance_the_dag_run_created_by_its_id(brev_sim, hook):
    created = brev_sim.create_instance_directly("train-1")
    before = time.time()
    done = release.release_recorded(hook, LOG, "train-1", [owned("train-1", created["id"])], wait=True, timeout=60)
    assert done.requested_at is not None and before <= done.requested_at <= time.time()  # the bill's end
    assert done == release.Released(True, None, created["id"], requested_at=done.requested_at)
    assert brev_sim.instance("train-1") is None
    (argv,) = deletions(brev_sim)
    assert created["id"] in argv and "train-1" not in argv


def test_the_teardown_leaves_an_adopted_instance(brev_sim, hook):
    adopted = brev_sim.create_instance_directly("shared-gpu")
    record = InstanceRecord(name="shared-gpu", id=adopted["id"], owned=False, adopted=True)
    done = release.release_recorded(hook, LOG, "shared-gpu", [record])
    assert done.deleted is False and "adopted" in (done.left or "")
    assert brev_sim.instance("shared-gpu")["status"] == "RUNNING"
    assert deletions(brev_sim) == []


def test_the_teardown_never_deletes_an_instance_someone_else_created_under_the_name(brev_sim, hook):
    ours = brev_sim.create_instance_directly("train-1")
    theirs = brev_sim.replace_instance("train-1")  # deleted outside Airflow, the name taken again
    done = release.release_recorded(hook, LOG, "train-1", [owned("train-1", ours["id"])])
    assert done.deleted is False and theirs["id"] in (done.left or "")
    assert brev_sim.instance("train-1")["id"] == theirs["id"]
    assert deletions(brev_sim) == []


def test_the_teardown_of_an_instance_already_gone_deletes_nothing(brev_sim, hook):
    assert release.release_recorded(hook, LOG, "train-1", [owned("train-1", "id-gone")]) == release.Released(False)
    assert deletions(brev_sim) == []


def test_after_a_failure_only_an_owned_instance_is_deleted(brev_sim, hook):
    someone = brev_sim.create_instance_directly("theirs")
    release.delete_after_failure(hook, LOG, "theirs", owned=False, reason="boom", instance_id=someone["id"])
    assert deletions(brev_sim) == []

    ours = brev_sim.create_instance_directly("ours")
    release.delete_after_failure(hook, LOG, "ours", owned=True, reason="boom")  # the id unknown: the listed one
    (argv,) = deletions(brev_sim)
    assert ours["id"] in argv
    assert brev_sim.instance("theirs")["status"] == "RUNNING"


def test_after_a_failed_create_with_nothing_listed_nothing_is_deleted(brev_sim, hook):
    release.delete_after_failure(hook, LOG, "never-created", owned=True, reason="create failed")
    assert deletions(brev_sim) == []


def test_clearing_a_lost_name_refuses_an_instance_of_another_id(brev_sim, hook):
    ours = brev_sim.create_instance_directly("train-1")
    theirs = brev_sim.replace_instance("train-1")
    with pytest.raises(BrevInstanceReplacedError, match=theirs["id"]):
        release.clear_for_recreation(hook, LOG, "train-1", {ours["id"]}, timeout=60)
    assert brev_sim.instance("train-1")["id"] == theirs["id"]
    assert deletions(brev_sim) == []


def test_clearing_a_lost_name_deletes_what_is_left_of_ours(brev_sim, hook):
    ours = brev_sim.create_instance_directly("train-1")
    release.clear_for_recreation(hook, LOG, "train-1", {ours["id"]}, timeout=60)
    assert brev_sim.instance("train-1") is None
    (argv,) = deletions(brev_sim)
    assert ours["id"] in argv


def test_on_kill_deletes_by_id_in_one_call_and_never_raises(brev_sim, hook):
    ours = brev_sim.create_instance_directly("step-1")
    release.release_on_kill(hook, "step-1", ours["id"])
    (argv,) = deletions(brev_sim)
    assert ours["id"] in argv
    brev_sim.set_fault("http_5xx", command="delete", times=5)
    release.release_on_kill(hook, "step-1", ours["id"])  # fails: swallowed, no retry
    assert len(deletions(brev_sim)) == 2


def test_an_ephemeral_instance_is_deleted_by_id_at_the_end_of_its_step(brev_sim, hook):
    ours = brev_sim.create_instance_directly("step-1")
    release.release_created(hook, LOG, "step-1", ours["id"], reuse=None)
    brev_sim.wait_for_deletions()
    assert brev_sim.instance("step-1") is None
    (argv,) = deletions(brev_sim)
    assert ours["id"] in argv
