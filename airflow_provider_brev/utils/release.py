"""Releasing an instance: every way one ends, identity and ownership checked before anything is deleted.

This module is the only caller of the hook's ``delete_instance``/``adelete_instance``. What ends an instance:

============================== ======================================================= ===============================
who                            function                                                rule
============================== ======================================================= ===============================
teardown (delete operator)     :func:`release_recorded` / :func:`delete_named`         the DAG run's records decide;
                                                                                       by the recorded id
create task / ephemeral step   :func:`delete_after_failure`, :func:`replace_failed`    only what the task owns, by id
ephemeral step, at its end     :func:`delete_created`                                  by id
``on_kill`` (worker, trigger)  :func:`release_on_kill` / :func:`arelease_on_kill`       one fast call, never raises
recovery clearing a lost name  :func:`clear_for_recreation`                            only an id the DAG run recorded
janitor                        :func:`delete_expired`                                  the id it listed
============================== ======================================================= ===============================

The rules: an instance is known by its **id** -- what ``brev ls`` lists under a name is deleted only if its id is
one the DAG run recorded creating there (:func:`~airflow_provider_brev.cli.instances.identity.identity_verdict`), and then by
that id, so an instance someone else created under the freed name is never hit; only what the DAG run owns is
deleted (an adopted instance never is); ``on_kill`` makes one fast call (Airflow SIGKILLs about 5 s after SIGTERM).
Stopping an instance instead of deleting it would be decided here too.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.instances.identity import (
    GONE,
    REPLACED,
    SAME,
    UNRECORDED,
    identity_verdict,
    replaced_message,
)
from airflow_provider_brev.exceptions import BrevInstanceReplacedError
from airflow_provider_brev.utils.instance_records import recorded_ids

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from airflow_provider_brev.cli.protocol.output import BrevInstance
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.utils.instance_records import InstanceRecord

#: Budget of the one ``brev delete`` of ``on_kill``: Airflow 3 gives ``on_kill`` about 5 s before SIGKILL.
ON_KILL_TIMEOUT = 4.0


@dataclass(frozen=True)
class Released:
    """What :func:`release_recorded` did.

    :param deleted: a deletion was requested.
    :param left: why the instance was left alone (``None`` when it was deleted or already gone).
    :param instance_id: the id the deletion was requested for.
    """

    deleted: bool
    left: str | None = None
    instance_id: str | None = None


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
) -> Released:
    """The teardown of an instance the DAG run recorded: delete what ``brev ls`` lists under ``name`` if its id
    is one the DAG run created (by that id); leave an adopted one, and anyone else's.

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
    deleted = hook.delete_instance(name, instance_id=live.id, wait=wait, timeout=timeout)
    return Released(deleted, None, live.id)


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
