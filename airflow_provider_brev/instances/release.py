"""Releasing an instance: every way one ends, identity and ownership checked before anything is deleted.

This module is the only caller of the hook's ``delete_instance``/``adelete_instance``. What ends an instance:

============================== ======================================================= ===============================
who                            function                                                rule
============================== ======================================================= ===============================
teardown (delete operator)     :func:`release_recorded` / :func:`delete_named`         the DAG run's records decide;
                                                                                       by the recorded id
create task / ephemeral step   :func:`delete_after_failure`, :func:`replace_failed`    only what the task owns, by id
ephemeral step, at its end     :func:`delete_created` / :func:`release_created`        by id (stop: as below)
``on_kill`` (worker, trigger)  :func:`release_on_kill` / :func:`arelease_on_kill`       one fast call, never raises
recovery clearing a lost name  :func:`clear_for_recreation`                            only an id the DAG run recorded
janitor                        :func:`delete_expired`, :func:`stop_awake`              the id it listed
teardown, ``release="stop"``   :func:`release_recorded` with a :class:`Reuse`           stoppable type and the
                                                                                       break-even favours it; else
                                                                                       delete, logged
============================== ======================================================= ===============================

The rules: an instance is known by its **id** -- what ``brev ls`` lists under a name is deleted only if its id is
one the DAG run recorded creating there (:func:`~airflow_provider_brev.core.instances.identity.identity_verdict`), and then by
that id, so an instance someone else created under the freed name is never hit; only what the DAG run owns is
deleted (an adopted instance never is); ``on_kill`` makes one fast call (Airflow SIGKILLs about 5 s after SIGTERM).
Stopping instead of deleting is decided here too: only an instance that passed the same identity and ownership
checks, only when its type can stop and the break-even
(:func:`~airflow_provider_brev.core.instances.warm_pool.break_even`: the disk over the expected idle hours against the
GPU price of the cold start a warm start saves) favours it -- logged with both numbers either way; the stopped
instance is then recorded under its reuse key (:mod:`airflow_provider_brev.instances.warm_pool`) for the next run.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.instances.identity import (
    GONE,
    REPLACED,
    SAME,
    UNRECORDED,
    identity_verdict,
    replaced_message,
)
from airflow_provider_brev.core.instances.records import recorded_ids
from airflow_provider_brev.core.instances.warm_pool import (
    DEFAULT_MAX_IDLE,
    STATE_STOPPED,
    break_even,
    disk_dollars_per_hour,
    expected_idle_seconds,
    saved_seconds,
)
from airflow_provider_brev.core.protocol.names import parse_managed_name
from airflow_provider_brev.cost.ledger import CostLedger
from airflow_provider_brev.exceptions import BrevError, BrevInstanceReplacedError
from airflow_provider_brev.instances.warm_pool import ReuseRegistry

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from airflow_provider_brev.core.instances.records import InstanceRecord
    from airflow_provider_brev.core.protocol.output import BrevInstance
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: Budget of the one ``brev delete`` of ``on_kill``: Airflow 3 gives ``on_kill`` about 5 s before SIGKILL.
ON_KILL_TIMEOUT = 4.0


@dataclass(frozen=True)
class Released:
    """What :func:`release_recorded` did.

    :param deleted: a deletion was requested.
    :param left: why the instance was left alone (``None`` when it was deleted or already gone).
    :param instance_id: the id the deletion was requested for.
    :param stopped: it was stopped for warm reuse instead.
    :param requested_at: when the deletion (or stop) was requested (epoch seconds): the end of its billed time.
    """

    deleted: bool
    left: str | None = None
    instance_id: str | None = None
    stopped: bool = False
    requested_at: float | None = None


@dataclass(frozen=True)
class Reuse:
    """How the teardown of an instance created with a ``reuse_key`` releases it.

    :param key: the reuse key.
    :param stop: ``release="stop"`` was asked (else the instance is deleted and its record forgotten).
    :param max_idle: seconds it may stay stopped.
    :param boot_seconds: its measured boot (``brev create`` or ``brev start`` until ready) in this run.
    :param pull_seconds: its measured image pulls in this run.
    :param stage_seconds: its measured input staging in this run.
    :param next_run_at: the DAG's next scheduled run (epoch seconds), when the timetable gives one.
    :param price_per_hour: its price, when known.
    """

    key: str
    stop: bool
    max_idle: float
    boot_seconds: float = 0.0
    pull_seconds: float = 0.0
    stage_seconds: float = 0.0
    next_run_at: float | None = None
    price_per_hour: float | None = None


def teardown_reuse(
    memory: TaskMemory,
    log: Any,
    name: str,
    records: Sequence[InstanceRecord],
    task_ids: Sequence[str],
    *,
    stop: bool,
    next_run_at: float | None,
) -> Reuse | None:
    """How a teardown releases ``name`` when its create task recorded it under a reuse key (``None``: none did, and
    it is deleted): stopped (``stop``) or deleted, with what this run measured of its boot, pulls and staging (the
    XCom ``brev_cost`` of ``task_ids``).

    :param memory: the teardown's memory.
    :param log: its logger.
    :param name: the instance.
    :param records: the DAG run's records of it, oldest first.
    :param task_ids: the tasks whose costs count (its create task and the steps on it).
    :param stop: ``release="stop"`` was asked.
    :param next_run_at: the DAG's next scheduled run (epoch seconds), when the timetable gives one.
    """
    keyed = next((r for r in reversed(records) if r.owned and r.spec.get("reuse_key")), None)
    if keyed is None:
        if stop:
            log.info("release='stop' for %s: its create task set no reuse_key, so deleting it.", name)
        return None
    phases = {"boot": 0.0, "pull": 0.0, "stage": 0.0}
    for _task_id, cost in CostLedger(memory).costs_of(task_ids):
        if cost.get("instance_name") == name:
            for phase in phases:
                phases[phase] += float((cost.get("seconds") or {}).get(phase) or 0.0)
    return Reuse(
        key=str(keyed.spec["reuse_key"]),
        stop=stop,
        max_idle=float(keyed.spec.get("max_idle") or DEFAULT_MAX_IDLE.total_seconds()),
        boot_seconds=phases["boot"],
        pull_seconds=phases["pull"],
        stage_seconds=phases["stage"],
        next_run_at=next_run_at,
        price_per_hour=keyed.price_per_hour,
    )


def release_on_kill(hook: BrevHook, name: str, instance_id: str | None) -> None:
    """Delete ``name`` from ``on_kill``: one call without retries, by id when known; never raises.

    :param hook: the task's hook.
    :param name: the instance name.
    :param instance_id: its id (``None`` only while ``brev create`` of a provider-managed name still runs).
    """
    with contextlib.suppress(Exception):
        hook.delete_instance(name, instance_id=instance_id or None, call_timeout=ON_KILL_TIMEOUT, retry=False)


async def arelease_on_kill(hook: BrevHook, log: Any, name: str, instance_id: str | None, *, why: str) -> None:
    """The triggerer's :func:`release_on_kill` (Airflow 3.3+ trigger ``on_kill``); logs, never raises.

    :param why: what the log line says (``"its ephemeral instance"`` ...).
    """
    log.info("Task killed: deleting %s %s.", why, name)
    try:
        await hook.adelete_instance(name, instance_id=instance_id or None)
    except Exception:
        log.exception("Could not delete %s on kill; the teardown/janitor will.", name)


def delete_created(hook: BrevHook, log: Any, name: str, instance_id: str | None, *, why: str) -> None:
    """Delete an instance this task created itself (ephemeral mode), by id; best effort, never raises.

    :param why: what the log line says (``"ephemeral instance"`` ...).
    """
    log.info("Deleting %s %s%s.", why, name, f" (id {instance_id})" if instance_id else "")
    try:
        hook.delete_instance(name, instance_id=instance_id or None)
    except Exception:
        log.exception("Could not delete %s %s; the janitor will once it expires.", why, name)


def release_created(hook: BrevHook, log: Any, name: str, instance_id: str | None, reuse: Reuse | None) -> None:
    """The end of an ephemeral step's instance: stopped for warm reuse when ``reuse`` asks for it and
    :func:`_stopped` agrees (the instance listed under ``name`` must still be ``instance_id``), else deleted by id
    (:func:`delete_created`) and its reuse record forgotten; best effort, never raises."""
    try:
        if reuse is not None and reuse.stop and instance_id:
            live = hook.get_instance(name)
            if live is not None and live.id == instance_id and _stopped(hook, log, live, reuse):
                return
    except Exception:
        log.exception("Could not stop ephemeral instance %s; deleting it.", name)
    delete_created(hook, log, name, instance_id, why="ephemeral instance")
    if reuse is not None and instance_id:
        with contextlib.suppress(Exception):
            ReuseRegistry(log).drop(instance_id)


def delete_after_failure(
    hook: BrevHook, log: Any, name: str, *, owned: bool, reason: str, instance_id: str | None = None
) -> None:
    """Best-effort delete after a failure past creation; never masks the original error.

    :param owned: the task owns the instance (else it is left, with a warning).
    :param reason: the failure (logged).
    :param instance_id: the id of the instance the task created (deleted by id); ``None``: the task could not
        learn it (the create call itself failed), so the instance ``brev ls`` lists under ``name`` right now is
        taken for it, if there is one.
    """
    if not owned:
        log.warning("Not deleting instance %s after the failure: this task does not own it.", name)
        return
    try:
        if not instance_id:
            listed = hook.get_instance(name)
            if listed is None:
                log.info("No instance %s was created before the failure: nothing to delete.", name)
                return
            instance_id = listed.id
        log.warning(
            "Deleting instance %s (id %s) because the task failed after it existed: %s", name, instance_id, reason
        )
        hook.delete_instance(name, instance_id=instance_id or None)
    except Exception:
        log.exception("Could not delete instance %s; the janitor will remove it once it expires.", name)


def replace_failed(hook: BrevHook, log: Any, instance: BrevInstance, *, timeout: float, poll_interval: float) -> None:
    """Delete this task's instance that ended in FAILURE (by its id) and wait until its name is free."""
    log.warning("Instance %s from an earlier try is in %s: replacing it.", instance.name, instance.status)
    hook.delete_instance(
        instance.name, instance_id=instance.id or None, wait=True, timeout=timeout, poll_interval=poll_interval
    )


def clear_for_recreation(hook: BrevHook, log: Any, name: str, known_ids: Collection[str], *, timeout: float) -> None:
    """Before a lost instance is re-created: make sure no instance of ours holds the name (delete a FAILURE or
    unreachable one by its id, wait out DELETING); an instance of another id is someone else's: never deleted
    (:class:`~airflow_provider_brev.exceptions.BrevInstanceReplacedError`)."""
    live = hook.get_instance(name)
    if live is None:
        return
    if known_ids and identity_verdict(live, known_ids) != SAME:
        raise BrevInstanceReplacedError(replaced_message(name, live, known_ids, refused="deleted"))
    log.info("Deleting what is left of instance %s (id %s) before re-creating it.", name, live.id)
    hook.delete_instance(name, instance_id=live.id or None, wait=True, timeout=timeout)


def release_recorded(
    hook: BrevHook,
    log: Any,
    name: str,
    records: Iterable[InstanceRecord],
    *,
    wait: bool = False,
    timeout: float = 600.0,
    reuse: Reuse | None = None,
) -> Released:
    """The teardown of an instance the DAG run recorded: delete what ``brev ls`` lists under ``name`` if its id
    is one the DAG run created (by that id); leave an adopted one, and anyone else's. With ``reuse`` asking to stop,
    stop it instead when :func:`stop_verdict` says so.

    :param hook: the task's hook.
    :param log: the task's logger.
    :param name: the instance name.
    :param records: every record of ``name`` the DAG run holds (not empty: the caller decided the name is the DAG
        run's to release).
    :param wait: wait until the deletion finished.
    :param timeout: seconds to wait for it.
    """
    records = list(records)
    owned = recorded_ids(records, owned_only=True)
    if not owned:
        return Released(False, "it was adopted, not created by this DAG run")
    live = hook.get_instance(name)
    verdict = identity_verdict(live, recorded_ids(records))
    if verdict == GONE:
        log.info("Brev instance %s does not exist (already deleted): nothing to do.", name)
        return Released(False)
    assert live is not None
    if verdict in (REPLACED, UNRECORDED) or live.id not in owned:
        log.warning("%s", replaced_message(name, live, owned, refused="deleted"))
        return Released(False, f"it is id {live.id}, not an instance this DAG run created")
    if reuse is not None and reuse.stop and (stopped_at := _stopped(hook, log, live, reuse)):
        return Released(False, None, live.id, stopped=True, requested_at=stopped_at)
    requested_at = time.time()
    deleted = hook.delete_instance(name, instance_id=live.id, wait=wait, timeout=timeout)
    if reuse is not None:
        ReuseRegistry(log).drop(live.id)
    return Released(deleted, None, live.id, requested_at=requested_at)


def _stopped(hook: BrevHook, log: Any, live: BrevInstance, reuse: Reuse) -> float | None:
    """Stop ``live`` (already checked: ours, by id) when its reuse record proves ownership, its type can stop and the
    break-even favours it, and record it stopped (with its disk's price); returns when the stop was requested, or
    ``None`` (logged with both numbers, or the refusal) when it is to be deleted."""
    registry = ReuseRegistry(log)
    managed = parse_managed_name(live.name)
    earlier = registry.proven(live, managed.prefix if managed is not None else "")
    if earlier is None:
        log.warning(
            "Release of %s (id %s, reuse key %r): no warm-reuse record of it may act (see above, or none was "
            "written), so no run could start it again: deleting it.",
            *(live.name, live.id, reuse.key),
        )
        return None
    offer = None
    try:
        offer = hook.type_offer(live.instance_type)
    except BrevError as err:
        log.warning("Could not read the type of %s from `brev search` (%s): deleting it.", live.name, err)
    saved = saved_seconds(
        boot_seconds=reuse.boot_seconds,
        pull_seconds=reuse.pull_seconds,
        stage_seconds=reuse.stage_seconds,
        catalog_boot_seconds=offer.boot_time_seconds if offer is not None else None,
    )
    saved = max(saved, earlier.saved_seconds)  # a warm run saves what a cold one took
    now = time.time()
    idle = expected_idle_seconds(now=now, next_run_at=reuse.next_run_at, max_idle=reuse.max_idle)
    price = reuse.price_per_hour if reuse.price_per_hour is not None else earlier.price_per_hour
    verdict = break_even(offer, price_per_hour=price, saved_seconds=saved, idle_seconds=idle)
    log.info("Release of %s (id %s, reuse key %r): %s.", live.name, live.id, reuse.key, verdict.message)
    if not verdict.stop:
        return None
    requested_at = time.time()
    try:
        hook.stop_instance(live.name, instance_id=live.id)
    except BrevError as err:
        log.warning("Could not stop %s (%s): deleting it instead.", live.name, err)
        return None
    registry.put(
        replace(
            earlier,  # its creator and the run that held it: they prove the record to the next run
            key=reuse.key,
            instance_type=live.instance_type,
            state=STATE_STOPPED,
            since=now,
            max_idle=reuse.max_idle,
            saved_seconds=saved,
            price_per_hour=price,
            disk_price_per_hour=round(disk_dollars_per_hour(offer), 6) if offer is not None else None,
            break_even=verdict.message,
        )
    )
    log.info(
        "Stopped %s for reuse key %r: the next run's create starts it again (its disk is kept); the janitor deletes "
        "it if no run does within %.0f s.",
        *(live.name, reuse.key, reuse.max_idle),
    )
    return requested_at


def delete_named(hook: BrevHook, log: Any, name: str, *, wait: bool = False, timeout: float = 600.0) -> bool:
    """A delete the user asked for by name (no create task upstream recorded it): by name; raises on failure."""
    try:
        return hook.delete_instance(name, wait=wait, timeout=timeout)
    except Exception:
        log.error("Deleting %s failed; retry the task or delete it with `brev delete %s`.", name, name)
        raise


def delete_expired(hook: BrevHook, instance: BrevInstance) -> bool:
    """The janitor's delete of an expired managed instance, by the id it listed; raises on failure."""
    return hook.delete_instance(instance.name, instance_id=instance.id or None)


def stop_awake(hook: BrevHook, instance: BrevInstance) -> None:
    """The janitor's stop of an instance recorded stopped and found running (its record proved ownership), by the
    id it listed; raises on failure."""
    hook.stop_instance(instance.name, instance_id=instance.id)
