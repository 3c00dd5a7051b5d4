"""The ``docker run`` of one TAO action on a Brev instance, and the checks of what goes into it (pure).

:func:`build_tao_command` -- ``docker run --gpus ... <image> <task> <action> -e <spec> key=value ...``; secret
environment variables are passed by *name* only (``-e NAME``: docker takes the value from its own environment,
which the job sourced from a 0600 file), never as ``NAME=value``. Every interpolated value is ``shlex.quote``-d.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_brev.core.protocol.remote_scripts import HomePath, shell_value

STARTED_MARKER = ".brev-tao-started"  # the job touches it when the container starts
#: Container path where the results directory is mounted.
CONTAINER_RESULTS = "/results"


#: Container path of the spec directory.
CONTAINER_SPECS = "/specs"


_IMAGE_RE = re.compile(r"^[a-z0-9.-]+(?::\d+)?/[a-z0-9._/-]+(?::[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$")


_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def validate_image(image: object) -> str:
    """A full image reference with a registry, repository and an explicit tag or digest (anything else, a template
    or a value that is not a string included, raises :class:`ValueError`)."""
    if not isinstance(image, str) or not _IMAGE_RE.match(image.strip()):
        raise ValueError(
            f"Invalid TAO image {image!r}: give a full reference with registry and an explicit tag or digest, "
            "e.g. 'nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt' or '...@sha256:<digest>' (no implicit 'latest')."
        )
    return image.strip()


def images_to_prefetch(own: str, declared: Iterable[object]) -> list[str]:
    """The images a step starts pulling in the background once its own (``own``) is there: those later steps on
    the same instance declare (``declared``, as written in the DAG), each once, in order -- only full references
    (:func:`validate_image`); a template (``{{ params.image }}``) is none, it is rendered, and pulled, by its own
    step."""
    chosen: list[str] = []
    for image in declared:
        try:
            checked = validate_image(image)
        except ValueError:
            continue
        if checked != own and checked not in chosen:
            chosen.append(checked)
    return chosen


def image_registry(image: str) -> str:
    return image.partition("/")[0]


def remote_path_value(path: str) -> str | HomePath:
    """A remote script's value for a path on the instance: absolute as is, else below ``$HOME``."""
    if not path or "\n" in path or "\x00" in path:
        raise ValueError(f"Invalid remote path {path!r}")
    if path.startswith("/"):
        return path
    return HomePath(path[2:] if path.startswith("~/") else path)


def remote_path(path: str) -> str:
    """Shell expression for a path on the instance: absolute as is, relative to ``$HOME``."""
    return shell_value(remote_path_value(path))


def format_override(key: str, value: Any) -> str:
    """``key=value`` for Hydra overrides (JSON for lists/dicts/bools, plain text otherwise)."""
    if not _KEY_RE.match(key):
        raise ValueError(f"Invalid override key {key!r}")
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (list, dict)):
        text = json.dumps(value, separators=(",", ":"))
    elif value is None:
        text = "null"
    else:
        text = str(value)
    return f"{key}={text}"


def build_tao_command(
    *,
    image: str,
    task: str,
    action: str,
    spec_file: str,
    results_dir: str,
    overrides: Mapping[str, Any] | None = None,
    mounts: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    secret_env_names: Sequence[str] = (),
    num_gpus: int | str = "all",
    shm_size: str | None = "8g",
    ipc: str | None = None,
    container_name: str | None = None,
    extra_docker_args: Sequence[str] = (),
) -> str:
    """The shell command that runs one TAO action in its container.

    :param spec_file: spec file name inside the instance's ``<results_dir>/specs`` directory.
    :param results_dir: results directory on the instance (absolute or relative to ``$HOME``); mounted at
        ``/results``, and TAO's ``results_dir`` override points there.
    :param mounts: extra ``{instance path: container path}`` bind mounts (instance paths absolute or relative to
        ``$HOME``).
    :param env: plain container environment variables (they are on the command line).
    :param secret_env_names: names of variables whose values the job's environment holds: passed as ``-e NAME``.
    """
    validate_image(image)
    for word, what in ((task, "task"), (action, "action")):
        if not re.fullmatch(r"[a-z][a-z0-9_]*", word or ""):
            raise ValueError(f"Invalid TAO {what} {word!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", spec_file):
        raise ValueError(f"Invalid spec file name {spec_file!r}")
    gpus = "all" if str(num_gpus) == "all" else str(int(num_gpus))
    args = ["docker", "run", "--rm", "--gpus", gpus]
    if container_name:
        args += ["--name", shlex.quote(container_name)]
    if shm_size:
        args += ["--shm-size", shlex.quote(shm_size)]
    if ipc:
        args += ["--ipc", shlex.quote(ipc)]
    args += ["-v", f"{remote_path(results_dir)}:{CONTAINER_RESULTS}"]
    args += ["-v", f"{remote_path(results_dir.rstrip('/') + '/specs')}:{CONTAINER_SPECS}:ro"]
    for host, container in (mounts or {}).items():
        if not container.startswith("/"):
            raise ValueError(f"Container mount path {container!r} must be absolute")
        args += ["-v", f"{remote_path(host)}:{shlex.quote(container)}"]
    for key, value in (env or {}).items():
        if not _NAME_RE.match(key):
            raise ValueError(f"Invalid environment variable name {key!r}")
        args += ["-e", shlex.quote(f"{key}={value}")]
    for key in secret_env_names:
        if not _NAME_RE.match(key):
            raise ValueError(f"Invalid environment variable name {key!r}")
        args += ["-e", key]
    args += [shlex.quote(a) for a in extra_docker_args]
    args += [shlex.quote(image), task, action, "-e", shlex.quote(f"{CONTAINER_SPECS}/{spec_file}")]
    # Hydra rebases results_dir per action (``<results_dir>/<action>/``); gap analysis writes into results_dir
    # itself, so point it at the same per-action directory.
    results_override = f"{CONTAINER_RESULTS}/{action}" if task == "gap_analysis" else CONTAINER_RESULTS
    merged = {"results_dir": results_override, **(overrides or {})}
    if gpus != "all" and task != "gap_analysis":
        merged.setdefault(f"{action}.num_gpus", int(gpus))
    args += [shlex.quote(format_override(k, v)) for k, v in merged.items()]
    marker = remote_path(f"{results_dir.rstrip('/')}/{action}/{STARTED_MARKER}")
    action_dir = remote_path(f"{results_dir.rstrip('/')}/{action}")
    return f"mkdir -p {action_dir} && touch {marker} && " + " ".join(args)


def spec_references_hugging_face(spec: Any) -> bool:
    """Whether any string in the spec points at Hugging Face (needs ``HF_TOKEN``)."""
    if isinstance(spec, Mapping):
        return any(spec_references_hugging_face(v) for v in spec.values())
    if isinstance(spec, (list, tuple)):
        return any(spec_references_hugging_face(v) for v in spec)
    if isinstance(spec, str):
        lowered = spec.lower()
        return lowered.startswith(("hf://", "hf_model://", "hf_dataset://")) or "huggingface.co" in lowered
    return False
