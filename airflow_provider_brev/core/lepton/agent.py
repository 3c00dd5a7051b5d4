"""The job's command and its plan: what the provider's agent in a Lepton container does (pure).

The container runs ``bash -c 'mkdir -p /workspace && cd /workspace && exec python3 -c "$AIRFLOW_LEPTON_AGENT"'``:
the agent's source (``airflow_provider_brev/remote/lepton_agent.py``, read with :mod:`importlib.resources`) is a
plain environment variable of the job (no secret in it); its **plan** (:func:`job_plan`) -- the presigned URLs of
the inputs and the output upload policies, the secret environment and what to redact of it -- is the value of a
workspace secret the job references by name (:func:`encode_plan`; :data:`PLAN_ENV`). Directories are relative to
the working directory :data:`WORKDIR`.
"""

from __future__ import annotations

import base64
import json
import zlib
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.secrets import redaction_fragments
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The job's working directory in the container: relative ``inputs``/``outputs`` directories are below it.
WORKDIR = "/workspace"
#: The environment variables of the agent's source (plain) and of its plan (a secret reference).
AGENT_ENV = "AIRFLOW_LEPTON_AGENT"
PLAN_ENV = "AIRFLOW_LEPTON_PLAN"
#: The largest encoded plan (a workspace secret's value): about 1,500 input objects.
MAX_PLAN_BYTES = 1024 * 1024
#: The agent's local state directory (its log copy), below the working directory.
STATE_DIR = ".airflow-lepton"


@cache
def agent_source() -> str:
    """The agent's source text."""
    return resources.files("airflow_provider_brev.remote").joinpath("lepton_agent.py").read_text(encoding="utf-8")


def job_command() -> list[str]:
    """The container's command: into the working directory, then the agent."""
    return ["bash", "-c", f'mkdir -p {WORKDIR} && cd {WORKDIR} && exec python3 -c "${AGENT_ENV}"']


def container_path(path: str) -> str:
    """A directory below the working directory as the container sees it (absolute)."""
    return f"{WORKDIR}/{path.strip('/')}" if not path.startswith("/") else path


def job_directory(name: str, value: Any) -> str:
    """An ``inputs``/``outputs`` directory of a Lepton step: relative (below :data:`WORKDIR`), no ``..``."""
    text = str(value or "").strip()
    parts = [part for part in text.replace("\\", "/").split("/") if part not in ("", ".")]
    if not text or text.startswith(("/", "~")) or ".." in parts or any(c in text for c in "\x00\n\r"):
        raise BrevInvalidInputError(
            f"{name} directory {value!r} must be a relative path below the job's working directory {WORKDIR} "
            "(e.g. 'data' or 'results/train'), without '..'."
        )
    return "/".join(parts)


def job_plan(
    *,
    command: str,
    secret_env: Mapping[str, str] | None,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    files: Mapping[str, str],
    report: str | None,
    sync_interval: float | None,
) -> dict[str, Any]:
    """The agent's plan: what to download, write, run, redact, upload and report.

    :param command: the shell command (``bash -c``).
    :param secret_env: secret environment variables of the command; their fragments
        (:func:`~airflow_provider_brev.core.secrets.redaction_fragments`) are what the agent redacts from the output.
    :param inputs: presigned downloads ``{"url", "path", "size"}``.
    :param outputs: output upload policies ``{"dir", "prefix", "post"}``.
    :param files: files to write first (path below the working directory -> text).
    :param report: the report script, or ``None``.
    :param sync_interval: seconds between output uploads while the command runs.
    """
    secrets = dict(secret_env or {})
    return {
        "command": command,
        "env": {},
        "secret_env": secrets,
        "redact": redaction_fragments(secrets),
        "inputs": list(inputs),
        "outputs": list(outputs),
        "files": dict(files),
        "report": report,
        "sync_interval": sync_interval,
    }


def encode_plan(plan: dict[str, Any]) -> str:
    """The plan as the agent reads it: zlib-compressed JSON in base64 (raises when larger than a secret may be)."""
    encoded = base64.b64encode(zlib.compress(json.dumps(plan, separators=(",", ":")).encode(), 9)).decode()
    if len(encoded) > MAX_PLAN_BYTES:
        raise BrevInvalidInputError(
            f"The job's plan ({len(plan.get('inputs') or [])} input objects) is {len(encoded)} bytes, more than a "
            f"Lepton secret holds ({MAX_PLAN_BYTES}): stage fewer, larger objects (e.g. one archive)."
        )
    return encoded


def decode_plan(encoded: str) -> dict[str, Any]:
    """The plan of :func:`encode_plan` (tests, the fake)."""
    return dict(json.loads(zlib.decompress(base64.b64decode(encoded))))
