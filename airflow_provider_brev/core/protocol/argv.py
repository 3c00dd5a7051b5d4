"""Argument lists for ``brev`` sub-commands (pure): what to ask the installed CLI, given what it supports.

The hook (:mod:`airflow_provider_brev.hooks.brev`) runs what these build; the same builder serves the sync and
the async path. Nothing here ever puts a secret on an argument list (login is built in
:func:`airflow_provider_brev.core.protocol.config.login_args` and only the hook's login step runs it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.output import parse_gpu_spec
from airflow_provider_brev.exceptions import BrevCLIError, BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig

__all__ = ["CreatePlan", "create_args", "instance_type_list", "ls_args", "search_args", "start_args", "stop_args"]

_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def ls_args(config: BrevConnectionConfig, caps: BrevCapabilities) -> list[str]:
    """``brev ls --json`` (with ``--org`` for token sessions); refuses CLIs older than the JSON listing."""
    if not caps.has_json_listing:
        raise BrevCLIError(
            f"The installed brev CLI ({caps.version_text}) has no `ls --json`; upgrade to v0.6.317 or newer."
        )
    args = ["ls", "--json"]
    if config.org and not config.api_key:
        args += ["--org", config.org]
    return args


def stop_args(target: str) -> list[str]:
    """``brev stop <id or name>`` (one instance; the CLI refuses a type that cannot stop)."""
    return ["stop", target]


def start_args(target: str) -> list[str]:
    """``brev start -d <id or name>``: detached, because without ``-d`` the CLI polls forever (reference/brev-cli.md
    §2.8); the caller waits for readiness as after a create."""
    return ["start", "-d", target]


def search_args(*, gpu_name: str | None = None, min_vram: float | None = None, include_cpu: bool = False) -> list[str]:
    """``brev search [cpu] [--gpu-name N] [--min-vram V] --json`` (no login needed)."""
    args = ["search"]
    if include_cpu:
        args.append("cpu")
    if gpu_name:
        args += ["--gpu-name", gpu_name]
    if min_vram:
        args += ["--min-vram", f"{min_vram:g}"]
    args.append("--json")
    return args


def instance_type_list(
    gpu: str | None, instance_types: Sequence[str] | str | None
) -> tuple[str | None, list[str] | None]:
    """Validate a request's shape before anything is asked of Brev: ``(gpu or None, types or None)``.

    Exactly one of ``gpu`` (``"L40S:1"``) and ``instance_types`` must be given; an empty templated value counts as
    not given, so an empty request is an error rather than a silent default instance.
    """
    gpu = (gpu or "").strip() or None
    types: list[str] | None
    if isinstance(instance_types, str):
        types = [t.strip() for t in instance_types.split(",") if t.strip()]
    else:
        types = [str(t).strip() for t in instance_types if str(t).strip()] if instance_types is not None else None
    types = types or None
    if gpu and types:
        raise BrevInvalidInputError(
            "Pass either gpu (e.g. 'L40S:1') or instance_types (e.g. ['g6e.xlarge']), not both."
        )
    if gpu:
        parse_gpu_spec(gpu)
    if types:
        bad = [t for t in types if not _TYPE_RE.match(t)]
        if bad:
            raise BrevInvalidInputError(f"Invalid instance type name(s): {', '.join(map(repr, bad))}.")
    return gpu, types


@dataclass(frozen=True)
class CreatePlan:
    """What ``brev create`` gets, and what to tell the user about it.

    :param args: the argument list after ``brev``.
    :param notes: INFO-level explanations (how ``gpu`` was resolved).
    :param warnings: placement ids the installed CLI cannot accept.
    """

    args: list[str]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def create_args(
    name: str,
    *,
    caps: BrevCapabilities,
    config: BrevConnectionConfig,
    gpu: str | None,
    types: Sequence[str],
    min_vram: float | None,
    cloud_cred_id: str | None,
    workspace_group_id: str | None,
    wait: bool,
    timeout: float,
) -> CreatePlan:
    """The ``brev create`` call for a validated request (``types``: resolved candidates, cheapest first)."""
    args = ["create", name]
    notes: list[str] = []
    warnings: list[str] = []
    if gpu and caps.accepts_gpu_spec:
        args += ["--gpu", str(parse_gpu_spec(gpu))]
    elif types:
        args += ["--type", ",".join(types)]
        if gpu:
            notes.append(
                f"gpu={gpu} resolved through `brev search` to instance types (cheapest first): {', '.join(types)}. "
                "The installed brev CLI has no placement flags, so Brev chooses placement itself."
            )
    if min_vram and not gpu:
        args += ["--min-vram", f"{min_vram:g}"]
    for value, default, flag, accepted in (
        (cloud_cred_id, config.cloud_cred_id, "cloud-cred-id", caps.accepts_cloud_cred_id),
        (workspace_group_id, config.workspace_group_id, "workspace-group-id", caps.accepts_workspace_group_id),
    ):
        chosen = value or default
        if not chosen:
            continue
        if accepted:
            args += [f"--{flag}", chosen]
        else:
            warnings.append(
                f"The installed brev CLI ({caps.version_text}) has no --{flag} flag: "
                f"Brev chooses placement itself, {chosen!r} is not used."
            )
    args += ["--timeout", f"{int(timeout)}"] if wait else ["--detached"]
    return CreatePlan(args=args, notes=notes, warnings=warnings)
