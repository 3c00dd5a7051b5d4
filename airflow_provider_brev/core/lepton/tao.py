"""One TAO action as a Lepton job's command: the TAO entrypoint runs in the job's own container (pure).

On Brev the provider runs ``docker run <image> <task> <action> ...`` on an instance
(:func:`~airflow_provider_brev.core.tao.command.build_tao_command`); on Lepton the job *is* the container, so the
command is the entrypoint itself, with the same overrides and the same start marker, and paths below the job's
working directory (:data:`~airflow_provider_brev.core.lepton.agent.WORKDIR`).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.lepton.agent import container_path
from airflow_provider_brev.core.tao.command import STARTED_MARKER, format_override

if TYPE_CHECKING:
    from collections.abc import Mapping


def tao_job_command(
    *,
    task: str,
    action: str,
    spec_file: str,
    results_dir: str,
    overrides: Mapping[str, Any] | None = None,
    num_gpus: int | str = "all",
) -> str:
    """The shell command of one TAO action in its container (``results_dir`` relative to the working directory;
    the spec is ``<results_dir>/specs/<spec_file>``)."""
    for word, what in ((task, "task"), (action, "action")):
        if not isinstance(word, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", word):
            raise ValueError(f"Invalid TAO {what} {word!r}")
    results = container_path(results_dir)
    spec = f"{results}/specs/{spec_file}"
    target = f"{results}/{action}" if task == "gap_analysis" else results
    merged: dict[str, Any] = {"results_dir": target, **(overrides or {})}
    if str(num_gpus) != "all" and task != "gap_analysis":
        merged.setdefault(f"{action}.num_gpus", int(num_gpus))
    args = [task, action, "-e", shlex.quote(spec), *(shlex.quote(format_override(k, v)) for k, v in merged.items())]
    action_dir = shlex.quote(f"{results}/{action}")
    marker = shlex.quote(f"{results}/{action}/{STARTED_MARKER}")
    return f"mkdir -p {action_dir} && touch {marker} && " + " ".join(args)
