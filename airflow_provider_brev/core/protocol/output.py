"""Pure parsers for what the ``brev`` CLI prints (listings, search results, versions, help, create output).

Nothing here runs a process: the hook (sync) and the triggers (async) run ``brev`` and hand the output to
these functions, so both sides interpret the CLI identically. Failures are classified in
:mod:`airflow_provider_brev.core.protocol.classify`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevInvalidInputError,
)

#: Workspace statuses Brev reports (``pkg/entity/entity.go``).
STATUS_RUNNING = "RUNNING"
STATUS_DEPLOYING = "DEPLOYING"
STATUS_STARTING = "STARTING"
STATUS_STOPPING = "STOPPING"
STATUS_STOPPED = "STOPPED"
STATUS_DELETING = "DELETING"
STATUS_FAILURE = "FAILURE"
STATUS_UNHEALTHY = "UNHEALTHY"
TERMINAL_BAD_STATUSES = frozenset({STATUS_FAILURE, STATUS_DELETING})


@dataclass(frozen=True)
class BrevInstance:
    """One instance as ``brev ls --json`` reports it.

    :param name: the instance name (what ``brev exec`` / ``brev delete`` take).
    :param id: Brev's opaque workspace id.
    :param status: ``RUNNING``, ``DEPLOYING``, ``DELETING``, ``FAILURE`` ... (``UNHEALTHY`` when running but unhealthy).
    :param build_status: ``PENDING``, ``BUILDING``, ``COMPLETED``, ``CREATE_FAILED`` or empty.
    :param shell_status: ``READY`` when RUNNING and the build COMPLETED, else ``NOT READY``.
    :param health_status: ``HEALTHY``, ``UNHEALTHY``, ``UNAVAILABLE`` or empty.
    :param instance_type: the cloud instance type (``g6e.xlarge`` ...).
    :param gpu: the GPU name (``L40S`` ...) or ``-``.
    :param workspace_group_id: only reported by CLIs that expose placement (the seed's documented CLI).
    """

    name: str
    id: str
    status: str
    build_status: str = ""
    shell_status: str = ""
    health_status: str = ""
    instance_type: str = ""
    gpu: str = ""
    workspace_group_id: str | None = None

    @property
    def is_running(self) -> bool:
        return self.status == STATUS_RUNNING

    @property
    def shell_ready(self) -> bool:
        return self.status == STATUS_RUNNING and (
            self.shell_status == "READY" or (not self.shell_status and self.build_status == "COMPLETED")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "id": self.id,
            "status": self.status,
            "build_status": self.build_status,
            "shell_status": self.shell_status,
            "health_status": self.health_status,
            "instance_type": self.instance_type,
            "gpu": self.gpu,
            "workspace_group_id": self.workspace_group_id,
        }


@dataclass(frozen=True)
class InstanceTypeOffer:
    """One row of ``brev search --json`` (one instance type x GPU configuration)."""

    type: str
    gpu_name: str
    gpu_count: int
    vram_per_gpu_gb: float
    total_vram_gb: float
    price_per_hour: float
    capability: float = 0.0
    provider: str = ""
    boot_time_seconds: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class GpuSpec:
    """A GPU request in the seed's form ``"L40S:1"`` (name and count)."""

    name: str
    count: int = 1

    def __str__(self) -> str:
        return f"{self.name}:{self.count}"


_GPU_SPEC_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9 ._-]*?)\s*(?::\s*(\d+))?\s*$")


def parse_gpu_spec(spec: str) -> GpuSpec:
    """Parse ``"L40S:1"`` / ``"A100"`` / ``"H100:8"`` into a :class:`GpuSpec`.

    :raises BrevInvalidInputError: for anything else.
    """
    match = _GPU_SPEC_RE.match(spec or "")
    if not match:
        raise BrevInvalidInputError(
            f"Invalid gpu {spec!r}: use the form NAME:COUNT, e.g. 'L40S:1' or 'H100:8' "
            "(run `brev search` to see GPU names)."
        )
    count = int(match.group(2)) if match.group(2) else 1
    if count < 1:
        raise BrevInvalidInputError(f"Invalid gpu {spec!r}: the GPU count must be at least 1.")
    return GpuSpec(name=match.group(1), count=count)


def first_json_document(text: str) -> Any:
    """Return the first JSON document in ``text``, skipping leading non-JSON lines.

    Several auth paths print breadcrumbs (``no oauth found for token``, login banners) to stdout even in
    ``--json`` mode, so the JSON may not start on the first line.
    """
    decoder = json.JSONDecoder()
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(("{", "[", "null")):
            candidate = "".join(lines[index:]).lstrip()
            try:
                value, _ = decoder.raw_decode(candidate)
            except json.JSONDecodeError:
                continue
            return value
    raise ValueError("no JSON document found")


def parse_instances(stdout: str) -> list[BrevInstance]:
    """Parse ``brev ls --json``: ``{"workspaces": [...] | null}`` (v0.6.323+) or a bare list / ``null``."""
    try:
        document = first_json_document(stdout)
    except ValueError as err:
        raise BrevCLIError("Could not parse `brev ls --json` output: " + stdout.strip()[:300], command="ls") from err
    if isinstance(document, dict):
        items = document.get("workspaces") or []
    elif isinstance(document, list):
        items = document
    elif document is None:
        items = []
    else:
        raise BrevCLIError(f"Unexpected `brev ls --json` output type {type(document).__name__}", command="ls")
    instances = []
    for item in items:
        if not isinstance(item, dict) or not item.get("name"):
            continue
        instances.append(
            BrevInstance(
                name=str(item["name"]),
                id=str(item.get("id") or ""),
                status=str(item.get("status") or ""),
                build_status=str(item.get("build_status") or ""),
                shell_status=str(item.get("shell_status") or ""),
                health_status=str(item.get("health_status") or ""),
                instance_type=str(item.get("instance_type") or ""),
                gpu=str(item.get("gpu") or ""),
                workspace_group_id=item.get("workspaceGroupId") or item.get("workspace_group_id"),
            )
        )
    return instances


def parse_search(stdout: str) -> list[InstanceTypeOffer]:
    """Parse ``brev search --json`` (a list; ``[]`` when nothing matches)."""
    try:
        document = first_json_document(stdout)
    except ValueError as err:
        raise BrevCLIError(
            "Could not parse `brev search --json` output: " + stdout.strip()[:300], command="search"
        ) from err
    offers = []
    for item in document or []:
        if not isinstance(item, dict) or not item.get("type"):
            continue
        offers.append(
            InstanceTypeOffer(
                type=str(item["type"]),
                gpu_name=str(item.get("gpu_name") or item.get("gpu") or ""),
                gpu_count=int(item.get("gpu_count") or item.get("gpuCount") or 0),
                vram_per_gpu_gb=float(item.get("vram_per_gpu_gb") or 0),
                total_vram_gb=float(item.get("total_vram_gb") or 0),
                price_per_hour=float(item.get("price_per_hour") or 0),
                capability=float(item.get("capability") or 0),
                provider=str(item.get("provider") or ""),
                boot_time_seconds=(
                    float(item["boot_time_seconds"]) if item.get("boot_time_seconds") is not None else None
                ),
                raw=item,
            )
        )
    return offers


def select_offers(
    offers: list[InstanceTypeOffer], gpu: GpuSpec, *, min_vram: float | None = None
) -> list[InstanceTypeOffer]:
    """Offers with exactly ``gpu.count`` GPUs named like ``gpu.name`` (and enough VRAM), cheapest first."""
    wanted = gpu.name.lower().replace(" ", "")
    matching = [
        offer
        for offer in offers
        if wanted in offer.gpu_name.lower().replace(" ", "")
        and offer.gpu_count == gpu.count
        and (min_vram is None or offer.vram_per_gpu_gb >= min_vram)
    ]
    # Deduplicate by type, keep the cheapest row per type, order by price.
    best: dict[str, InstanceTypeOffer] = {}
    for offer in sorted(matching, key=lambda o: (o.price_per_hour, o.type)):
        best.setdefault(offer.type, offer)
    return list(best.values())


_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """Parse ``Current Version: v0.6.327`` (or any text holding ``x.y.z``)."""
    match = _VERSION_RE.search(text or "")
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


_FLAG_RE = re.compile(r"(?:^|[\s,])--([a-z][a-z0-9-]*)")


def parse_help_flags(help_text: str) -> frozenset[str]:
    """The long flags (without ``--``) a cobra ``--help`` text lists."""
    return frozenset(_FLAG_RE.findall(help_text or ""))


def parse_created_names(stdout: str) -> list[str]:
    """Names printed by ``brev create`` on piped stdout (one per line; other noise ignored)."""
    names = []
    for line in stdout.splitlines():
        candidate = line.strip()
        if candidate and re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9._-]*", candidate):
            names.append(candidate)
    return names


def parse_create_wait_failure(output: str, name: str) -> str | None:
    """The failure ``brev create`` printed during its own wait (it still exits 0), or ``None``."""
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith(f"{name}: Timeout waiting for ready state"):
            return stripped
        if stripped.startswith(f"{name}: instance {name} failed"):
            return stripped
    return None


def strip_exec_trailer(lines: list[str], instance_name: str) -> list[str]:
    """Drop the instance-name line ``brev exec`` appends to piped stdout after a successful run."""
    if lines and lines[-1].strip() == instance_name:
        return lines[:-1]
    return lines
