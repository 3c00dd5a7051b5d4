"""Warm-reuse records: where each one is kept, and whether it may act on the instance it names (pure).

**One record per instance.** The record of an instance kept for warm reuse
(:class:`~airflow_provider_brev.core.instances.warm_pool.ReuseEntry`) is the Airflow Variable
``brev_warm_instance.<instance id>`` (:func:`record_variable`), written only by whoever holds that instance: the task
that created it, the run whose ``brev start`` claimed it (Brev moves a STOPPED instance to STARTING once), its
teardown, or the janitor deleting it. Writes for different instances touch different Variables, and two writers of
one record would have to hold one instance at once. The records are found from ``brev ls`` (an instance with a
managed name of the owner prefix: its record is read by its id), never by listing Variables; the janitor's own
sightings of a stopped-recorded instance found running are kept apart (:func:`awake_variable`).

**Who may act on a record.** A Variable can be edited by anyone allowed to edit Variables, so a record alone
proves nothing. :func:`ownership_problem` lets a record act only on an instance this provider demonstrably made:

* it is listed under the recorded name with the recorded id;
* the name is a managed name (:func:`~airflow_provider_brev.core.protocol.names.parse_managed_name`) with the owner
  prefix;
* its 8-hex digest is the one the recorded creating task (``created_by``) derives
  (:func:`~airflow_provider_brev.core.protocol.names.name_digest`), when the record names one;
* a task the record names -- its creator, or the run that last held it (``claimed_by``) -- pushed that id as an
  instance it owns in its XCom ``brev_instance`` (:mod:`airflow_provider_brev.core.instances.records`): XCom is
  written only by the tasks themselves, not edited in the UI.

A record failing it is ignored (the caller logs why): nothing is started, stopped or deleted because of it, and
the instance is judged as if it had no record (the janitor's name rule).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.names import name_digest, parse_managed_name

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from airflow_provider_brev.core.instances.warm_pool import ReuseEntry
    from airflow_provider_brev.core.protocol.output import BrevInstance

#: The Airflow Variables holding one instance's record each (``brev_warm_instance.<instance id>``).
RECORD_PREFIX = "brev_warm_instance."
#: The Airflow Variables in which the janitor notes a stopped-recorded instance it found running.
AWAKE_PREFIX = "brev_warm_awake."
#: The single Variable of every record before one record per instance (read, never written).
LEGACY_VARIABLE = "brev_warm_instances"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,200}$")


def _suffix(instance_id: str) -> str:
    """The instance id as it appears in a key: itself, or (odd characters, or too long) a digest of it."""
    if _SAFE_ID.match(instance_id):
        return instance_id
    return "sha256-" + hashlib.sha256(instance_id.encode("utf-8")).hexdigest()


def record_variable(instance_id: str) -> str:
    """The key of the Variable holding the record of ``instance_id``."""
    return RECORD_PREFIX + _suffix(instance_id)


def awake_variable(instance_id: str) -> str:
    """The key of the Variable holding the janitor's sighting of ``instance_id`` running while recorded stopped."""
    return AWAKE_PREFIX + _suffix(instance_id)


@dataclass(frozen=True)
class TaskRef:
    """A task instance, as a record names it (``dag_id/run_id/task_id/map_index``).

    :param dag_id: its DAG.
    :param run_id: its DAG run.
    :param task_id: the task.
    :param map_index: its map index (``-1``: not mapped).
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1

    @property
    def text(self) -> str:
        return f"{self.dag_id}/{self.run_id}/{self.task_id}/{self.map_index}"

    def digest(self) -> str:
        """The digest of the managed name this task derives."""
        return name_digest(dag_id=self.dag_id, run_id=self.run_id, task_id=self.task_id, map_index=self.map_index)

    @classmethod
    def parse(cls, text: str) -> TaskRef | None:
        """The task named by ``text`` (:attr:`text`), or ``None``. DAG and task ids hold no ``/`` (Airflow's
        rule); a run id may."""
        dag_id, _, rest = (text or "").partition("/")
        parts = rest.rsplit("/", 2)
        if len(parts) != 3:
            return None
        run_id, task_id, map_index = parts
        if not (dag_id and run_id and task_id) or not re.fullmatch(r"-?\d+", map_index):
            return None
        return cls(dag_id, run_id, task_id, int(map_index))


def tasks_named(entry: ReuseEntry) -> list[TaskRef]:
    """The tasks whose XCom may prove ``entry``: its creator, then the run that last held it (the ones that parse)."""
    named = [TaskRef.parse(text) for text in dict.fromkeys([entry.created_by, entry.claimed_by]) if text]
    return [task for task in named if task is not None]


def ownership_problem(
    entry: ReuseEntry, live: BrevInstance, *, prefix: str, owned_ids: Mapping[TaskRef, Collection[str] | None]
) -> str | None:
    """Why ``entry`` may not act on ``live`` (the module docstring's proof), or ``None`` when it may.

    :param entry: the record.
    :param live: the instance ``brev ls`` lists with the record's id.
    :param prefix: the owner prefix of the connection (or of the create task).
    :param owned_ids: for each of :func:`tasks_named`, the instance ids it pushed as owned in its XCom
        ``brev_instance`` (``None``: its XCom could not be read).
    """
    if (live.id, live.name) != (entry.id, entry.name):
        return f"it names {entry.name} (id {entry.id}), but id {live.id} is listed as {live.name}"
    managed = parse_managed_name(entry.name)
    if managed is None:
        return f"{entry.name} is not a name this provider makes"
    if managed.prefix != prefix:
        return f"{entry.name} does not carry the owner prefix {prefix!r}"
    creator = TaskRef.parse(entry.created_by) if entry.created_by else None
    if entry.created_by and (creator is None or creator.digest() != managed.digest):
        return f"{entry.name} was not derived from the task the record names as its creator ({entry.created_by})"
    tasks = tasks_named(entry)
    if not tasks:
        return "it names no task that created or started the instance"
    if any(entry.id in (owned_ids.get(task) or ()) for task in tasks):
        return None
    unread = [task.text for task in tasks if owned_ids.get(task) is None]
    named = ", ".join(task.text for task in tasks)
    missing = f" (XCom not readable: {', '.join(unread)})" if unread else ""
    return f"no task it names ({named}) recorded creating or starting id {entry.id} in XCom brev_instance{missing}"
