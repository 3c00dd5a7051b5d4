"""An instance is known by its id: whether the instance a name lists now is the one this DAG run created (pure).

Brev frees a name once its instance is deleted, and anyone may then create a new instance under it. So every
decision that would delete, stop or use an instance by name first compares the id ``brev ls`` lists under that
name with the ids this DAG run recorded creating there (the create task's record, the re-creations of a recovery,
an ephemeral step's own instance: :class:`~airflow_provider_brev.instances.provisioning.InstanceRecord`).
:func:`identity_verdict` says what the listing means; :func:`replaced_message` words the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection

    from airflow_provider_brev.core.protocol.output import BrevInstance


@dataclass(frozen=True)
class InstanceRef:
    """One instance: its name (what ``brev exec`` takes) and its Brev id (what it is).

    :param name: the instance name.
    :param id: Brev's id of the instance (empty when not known).
    """

    name: str
    id: str = ""


#: :func:`identity_verdict` values.
SAME = "same"  # the listed instance is one this DAG run recorded: use it, delete it if owned
GONE = "gone"  # nothing is listed under the name
REPLACED = "replaced"  # another instance holds the name: never delete, stop or use it
UNRECORDED = "unrecorded"  # no id was recorded for the name (an instance the DAG did not create): by name


def identity_verdict(live: BrevInstance | None, known_ids: Collection[str]) -> str:
    """What the instance listed under a name is, given the ids this DAG run recorded for that name.

    :param live: what ``brev ls`` lists under the name (``None``: nothing).
    :param known_ids: the ids recorded for the name (empty ids are ignored).
    """
    known = {instance_id for instance_id in known_ids if instance_id}
    if live is None:
        return GONE
    if not known:
        return UNRECORDED
    return SAME if live.id in known else REPLACED


def replaced_message(name: str, live: BrevInstance, known_ids: Collection[str], *, refused: str) -> str:
    """Why the provider leaves the instance now listed under ``name`` alone.

    :param name: the instance name.
    :param live: the instance listed under it now (not one of ``known_ids``).
    :param known_ids: the ids this DAG run recorded for the name.
    :param refused: what the provider did not do (``"deleted"``, ``"used"``, ``"re-created"`` ...).
    """
    ours = ", ".join(sorted(i for i in known_ids if i)) or "none"
    return (
        f"Instance {name!r} is now id {live.id} ({live.status}), not the instance this DAG run created under that name "
        f"(id {ours}): that one is gone, and someone created another instance under the freed name. The provider "
        f"never deletes, stops or uses an instance it did not create, so it was not {refused}."
    )
