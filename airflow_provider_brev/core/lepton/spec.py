"""The Lepton job a step submits: its parameters, checked, and the API body built from them (pure).

:func:`lepton_job_spec` checks the platform parameters of a Lepton step (resource shape, node groups, priority,
image pull secrets, retries, TTL, queue limit) before any API call (bad input costs nothing) and
:meth:`LeptonJobSpec.body` builds the body of ``POST /jobs`` -- a dict of ``leptonai.api.v2.types.job.LeptonJob``'s
fields. The job's environment holds plain values only where they are not secret: everything secret (the plan with
its presigned URLs, ``secret_env`` values) reaches the container through a workspace secret referenced by name
(``value_from.secret_name_ref``), never as a value in the job spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.values import (
    bool_value,
    conn_id,
    duration_seconds,
    env_mapping,
    integer,
    is_empty,
    optional,
    refuse,
    safe_text,
)
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Lepton's default ``ttl_seconds_after_finished`` (the SDK's ``DefaultTTLSecondsAfterFinished``).
DEFAULT_TTL_SECONDS = 600
#: How long a job may wait in its node group's queue by default before the step gives up (typed error).
DEFAULT_QUEUE_TIMEOUT = 3600.0
#: The canonical priority classes (``lep job create --queue-priority``), by the names and numbers users give.
PRIORITIES: dict[str, str] = {
    **{name: f"low-{n}000" for n, name in ((1, "low"), (1, "l"), (1, "1"), (2, "2"), (3, "3"))},
    **{name: f"mid-{n}000" for n, name in ((4, "mid"), (4, "m"), (4, "medium"), (4, "4"), (5, "5"), (6, "6"))},
    **{name: f"high-{n}000" for n, name in ((7, "high"), (7, "h"), (7, "7"), (8, "8"), (9, "9"))},
}
PRIORITIES.update({value: value for value in list(PRIORITIES.values())})

#: A resource shape: ``gpu.8xh100-sxm``, ``cpu.small``.
SHAPE_RE = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9][a-z0-9-]*)+$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class LeptonJobSpec:
    """Where and how a Lepton job runs (checked by :func:`lepton_job_spec`).

    :param lepton_conn_id: the Lepton connection.
    :param resource_shape: e.g. ``gpu.8xh100-sxm`` or ``cpu.small``.
    :param node_groups: dedicated node groups the job may use (names or ids, as the workspace lists them).
    :param priority: a canonical priority class (``mid-4000``) or ``None`` (Lepton's default); needs node groups.
    :param can_preempt: may preempt lower-priority jobs (node groups only).
    :param can_be_preempted: may be preempted by higher-priority jobs (node groups only).
    :param image_pull_secrets: workspace registry secrets for a private image (e.g. nvcr.io).
    :param secret_refs: environment variable -> existing workspace secret (its value never passes the worker).
    :param max_failure_retry: restarts of a failed container before the job fails (Lepton's own retries).
    :param ttl_seconds_after_finished: seconds Lepton keeps the finished job (and its log) before removing it.
    :param queue_timeout: seconds the job may wait for resources before the step fails with
        :class:`~airflow_provider_brev.exceptions.LeptonResourcesUnavailableError` (``None``: no limit).
    :param shared_memory_size: ``/dev/shm`` in MiB (``None``: Lepton's default).
    """

    lepton_conn_id: str
    resource_shape: str
    node_groups: tuple[str, ...] = ()
    priority: str | None = None
    can_preempt: bool | None = None
    can_be_preempted: bool | None = None
    image_pull_secrets: tuple[str, ...] = ()
    secret_refs: dict[str, str] = field(default_factory=dict)
    max_failure_retry: int = 0
    ttl_seconds_after_finished: int = DEFAULT_TTL_SECONDS
    queue_timeout: float | None = DEFAULT_QUEUE_TIMEOUT
    shared_memory_size: int | None = None

    def body(
        self,
        *,
        name: str,
        image: str,
        command: list[str],
        env: Mapping[str, str] | None = None,
        secret_env_refs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The ``POST /jobs`` body of the job ``name`` (its id too): one worker, one completion.

        :param env: plain (non-secret) environment variables.
        :param secret_env_refs: environment variable -> workspace secret name (besides :attr:`secret_refs`).
        """
        envs: list[dict[str, Any]] = [{"name": key, "value": value} for key, value in sorted((env or {}).items())]
        refs = {**self.secret_refs, **(secret_env_refs or {})}
        envs += [{"name": key, "value_from": {"secret_name_ref": ref}} for key, ref in sorted(refs.items())]
        spec: dict[str, Any] = {
            "resource_shape": self.resource_shape,
            "container": {"image": image, "command": list(command)},
            "completions": 1,
            "parallelism": 1,
            "max_failure_retry": self.max_failure_retry,
            "envs": envs,
            "image_pull_secrets": list(self.image_pull_secrets),
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
        }
        if self.shared_memory_size is not None:
            spec["shared_memory_size"] = self.shared_memory_size
        if self.node_groups:
            spec["affinity"] = {"allowed_dedicated_node_groups": list(self.node_groups)}
        queue = {
            key: value
            for key, value in (
                ("priority_class", self.priority),
                ("can_preempt", self.can_preempt),
                ("can_be_preempted", self.can_be_preempted),
            )
            if value is not None
        }
        if queue:
            spec["queue_config"] = queue
        return {"metadata": {"id": name, "name": name, "labels": dict(labels or {})}, "spec": spec}


def _names(name: str, value: Any) -> tuple[str, ...]:
    if is_empty(value):
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        refuse(name, value, "a name or a list of names")
    for item in items:
        if not isinstance(item, str) or not _NAME_RE.match(item):
            refuse(name, item, "names of letters, digits, '.', '_' and '-'")
    return tuple(items)


def priority_class(value: Any) -> str | None:
    """A priority (``low``/``mid``/``high``, ``1``-``9`` or ``mid-4000``) as Lepton's canonical class."""
    if is_empty(value):
        return None
    canonical = PRIORITIES.get(str(value).strip().lower())
    if canonical is None:
        raise BrevInvalidInputError(
            f"priority must be low, mid, high, a number 1-9 or a class like 'mid-4000', got {value!r}."
        )
    return canonical


def resource_shape(value: Any) -> str:
    """A resource shape such as ``gpu.8xh100-sxm`` or ``cpu.small``."""
    text = safe_text("resource_shape", value)
    if not SHAPE_RE.match(text):
        refuse("resource_shape", value, "a Lepton resource shape such as 'gpu.8xh100-sxm' or 'cpu.small'")
    return text


def secret_refs(value: Any) -> dict[str, str]:
    """``{ENV_NAME: workspace secret name}``."""
    refs = env_mapping("secret_refs", value) or {}
    for key, ref in refs.items():
        if not _NAME_RE.match(ref):
            refuse(f"secret_refs[{key!r}]", ref, "the name of a workspace secret")
    return refs


def lepton_job_spec(params: Mapping[str, Any]) -> LeptonJobSpec:
    """A Lepton step's platform parameters, checked (raises :class:`BrevInvalidInputError` naming one)."""
    node_groups = _names("node_groups", params.get("node_groups"))
    priority = priority_class(params.get("priority"))
    can_preempt = optional(bool_value, "can_preempt", params.get("can_preempt"))
    can_be_preempted = optional(bool_value, "can_be_preempted", params.get("can_be_preempted"))
    if not node_groups and (priority or can_preempt is not None or can_be_preempted is not None):
        raise BrevInvalidInputError(
            "priority, can_preempt and can_be_preempted apply to dedicated node groups: pass node_groups too."
        )
    shm = params.get("shared_memory_size")
    ttl = params.get("ttl_seconds_after_finished")
    ttl = DEFAULT_TTL_SECONDS if is_empty(ttl) else ttl
    return LeptonJobSpec(
        lepton_conn_id=conn_id("lepton_conn_id", params.get("lepton_conn_id")),
        resource_shape=resource_shape(params.get("resource_shape")),
        node_groups=node_groups,
        priority=priority,
        can_preempt=can_preempt,
        can_be_preempted=can_be_preempted,
        image_pull_secrets=_names("image_pull_secrets", params.get("image_pull_secrets")),
        secret_refs=secret_refs(params.get("secret_refs")),
        max_failure_retry=integer("max_failure_retry", params.get("max_failure_retry") or 0, minimum=0, maximum=100),
        ttl_seconds_after_finished=integer("ttl_seconds_after_finished", ttl, minimum=0),
        queue_timeout=optional(duration_seconds, "queue_timeout", params.get("queue_timeout")),
        shared_memory_size=None if is_empty(shm) else integer("shared_memory_size", shm, minimum=1),
    )
