"""How a teardown ends an instance: the release policies and a delete task's checked parameters (pure).

The doing -- identity and ownership checked, then ``brev delete`` or ``brev stop`` -- is
:mod:`airflow_provider_brev.instances.release`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_brev.exceptions import BrevInvalidInputError

#: The release policies of a teardown (``BrevDeleteInstanceOperator(release=...)``) and of an ephemeral step.
RELEASE_DELETE = "delete"
RELEASE_STOP = "stop"


def release_policy(value: Any) -> str:
    """A rendered ``release``: ``"delete"`` (also when empty) or ``"stop"``."""
    text = str(value).strip().lower() if value is not None else ""
    if text in ("", RELEASE_DELETE):
        return RELEASE_DELETE
    if text == RELEASE_STOP:
        return RELEASE_STOP
    raise BrevInvalidInputError(f"Invalid release {value!r}: use 'delete' or 'stop'.")


@dataclass(frozen=True)
class DeleteSpec:
    """A delete task's checked parameters (built by :func:`~airflow_provider_brev.core.validation.delete_spec`).

    :param instance_name: the instance to release.
    :param wait_for_deletion: wait until ``brev ls`` no longer lists it.
    :param deletion_timeout: seconds to wait for that.
    :param release: :data:`RELEASE_DELETE` or :data:`RELEASE_STOP`.
    """

    instance_name: str
    wait_for_deletion: bool
    deletion_timeout: float
    release: str = RELEASE_DELETE

    @property
    def stop(self) -> bool:
        """The teardown asks to stop the instance (when it was created under a reuse key) instead of deleting it."""
        return self.release == RELEASE_STOP


__all__ = ["RELEASE_DELETE", "RELEASE_STOP", "DeleteSpec", "release_policy"]
