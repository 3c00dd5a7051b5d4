"""Resuming an interrupted TAO ``train`` from the newest checkpoint of the same run in the step's S3 outputs
(pure): :func:`checkpoints_uri` / :func:`newest_checkpoint` / :func:`resume_overrides`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from airflow_provider_brev.core.tao.command import CONTAINER_RESULTS

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from airflow_provider_brev.core.staging.types import StagingPair

#: A training checkpoint's file name (``model_epoch_<EEE>_step_<SSS>.pth``; epochs are 0-based).
CHECKPOINT_NAME_RE = re.compile(r"^model_epoch_(\d+)_step_(\d+)\.pth$")


#: A job log line that shows a new checkpoint was saved (makes an output sync due at once).
CHECKPOINT_LOG_REGEX = r"(?i)sav(?:ed|ing) checkpoint.*model_epoch_\d+_step_\d+\.pth"


#: The override that continues an interrupted run of the same job (never for a new recurring run).
RESUME_KEY = "resume_training_checkpoint_path"


def checkpoint_order(name: str) -> tuple[int, int] | None:
    """``(epoch, step)`` of a checkpoint path or file name, ``None`` when it is not a training checkpoint."""
    match = CHECKPOINT_NAME_RE.match(name.rsplit("/", 1)[-1])
    return (int(match.group(1)), int(match.group(2))) if match else None


def newest_checkpoint(names: Iterable[str]) -> str | None:
    """The checkpoint of the latest epoch (then step) among ``names`` (other files ignored), or ``None``."""
    ranked = [(order, name) for name in names if (order := checkpoint_order(name)) is not None]
    return max(ranked)[1] if ranked else None


def checkpoints_after(paths: Iterable[str], resumed_from: str) -> list[str]:
    """The checkpoints among ``paths`` of a later epoch/step than ``resumed_from``."""
    base = checkpoint_order(resumed_from)
    later = []
    for path in paths:
        order = checkpoint_order(path)
        if order is not None and (base is None or order > base):
            later.append(path)
    return later


def _anchor(directory: str) -> str:
    """A directory on the instance as a comparable path (``x`` and ``~/x`` are the same place)."""
    directory = directory.rstrip("/")
    return directory if directory.startswith("/") else "~/" + directory.removeprefix("~/")


def checkpoints_uri(outputs: Sequence[StagingPair], *, results_dir: str, action: str) -> str | None:
    """The S3 URI prefix where the step's ``outputs`` put ``<results_dir>/<action>/`` (the checkpoints), or
    ``None`` when no output directory covers it (then there is nothing to resume from).

    :param outputs: the validated ``outputs`` (:func:`~airflow_provider_brev.core.staging.manifest.validate_outputs`).
    """
    action_dir = _anchor(f"{results_dir.rstrip('/')}/{action}")
    for pair in outputs:
        directory = _anchor(pair.directory)
        if action_dir == directory:
            return pair.uri
        if action_dir.startswith(directory + "/"):
            return f"{pair.uri}{action_dir[len(directory) + 1 :]}/"
    return None


def resume_overrides(checkpoint: str, *, action: str) -> dict[str, str]:
    """The override that resumes ``action`` from ``checkpoint`` (a file in ``<results_dir>/<action>/``)."""
    return {f"{action}.{RESUME_KEY}": f"{CONTAINER_RESULTS}/{action}/{checkpoint.rsplit('/', 1)[-1]}"}
