"""Releasing an instance: identity and ownership checked before anything is deleted.

Every way a provider-created instance ends goes through here: the teardown
(:class:`~airflow_provider_brev.operators.brev.BrevDeleteInstanceOperator`), the failure cleanup of the create
operator and of ephemeral steps, ``on_kill``, and a recovery clearing what is left of a lost instance. The rules:

* an instance is known by its **id**: what ``brev ls`` lists under a name is deleted only if its id is one this DAG
  run recorded creating there (:func:`~airflow_provider_brev.cli.identity.identity_verdict`), and then by that id,
  so an instance someone else created under the freed name is never hit;
* only what the DAG run owns is deleted (an adopted instance never is);
* ``on_kill`` makes one fast call (Airflow SIGKILLs about 5 s after SIGTERM) and never raises.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.cli.identity import GONE, REPLACED, UNRECORDED, identity_verdict, replaced_message
from airflow_provider_brev.utils.instance_records import recorded_ids

if TYPE_CHECKING:
    from collections.abc import Iterable

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


def delete_created(hook: BrevHook, log: Any, name: str, instance_id: str | None, *, why: str) -> None:
    """Delete an instance this task created itself (ephemeral mode), by id; best effort, never raises.

    :param why: what the log line says (``"ephemeral instance"`` ...).
    """
    log.info("Deleting %s %s%s.", why, name, f" (id {instance_id})" if instance_id else "")
    try:
        hook.delete_instance(name, instance_id=instance_id or None)
    except Exception:
        log.exception("Could not delete %s %s; the janitor will once it expires.", why, name)


def release_recorded(
    hook: BrevHook,
    log: Any,
    name: str,
    records: Iterable[InstanceRecord],
    *,
    wait: bool = False,
    timeout: float = 600.0,
) -> Released:
    """Delete the instance listed under ``name`` if it is one the DAG run recorded creating (by its id).

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
        message = replaced_message(name, live, owned, refused="deleted")
        log.warning("%s", message)
        return Released(False, f"it is id {live.id}, not an instance this DAG run created")
    deleted = hook.delete_instance(name, instance_id=live.id, wait=wait, timeout=timeout)
    return Released(deleted, None, live.id)
