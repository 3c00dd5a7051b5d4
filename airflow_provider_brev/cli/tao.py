"""Pure builders and parsers for running NVIDIA TAO Toolkit containers on a Brev instance.

* :func:`build_tao_command` -- ``docker run --gpus ... <image> <task> <action> -e <spec> key=value ...``;
  secret environment variables are passed by *name* only (``-e NAME``: docker takes the value from its own
  environment, which the job sourced from a 0600 file), never as ``NAME=value``.
* :func:`build_report_command` / :func:`parse_report` -- one ``brev exec`` that reads what TAO left behind:
  the last ``status.json`` record, checkpoints written since this launch, small result files, the
  gap-analysis ``unreachable_kpi.txt``, and known fault signatures from the job log.
* :func:`classify_fault` -- program faults (out of memory, CUDA assert, bad spec) that retrying cannot fix.
* :func:`verify_tao_run` -- whether a finished run counts as success: exit code 0 **and** a final ``SUCCESS``
  record in ``status.json`` (and, where required, a checkpoint written by this run -- after a resume, one beyond
  the checkpoint it resumed from); otherwise which failure it is (:class:`TaoVerdict`), which the TAO operators
  turn into their typed errors.
* :func:`checkpoints_uri` / :func:`newest_checkpoint` / :func:`resume_overrides` -- resuming an interrupted
  ``train`` from the newest checkpoint of the same run in the step's S3 ``outputs``.

Every interpolated value is ``shlex.quote``-d.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_brev.cli.manifest import StagingPair

#: Container path where the results directory is mounted.
CONTAINER_RESULTS = "/results"
#: Container path of the spec directory.
CONTAINER_SPECS = "/specs"
STARTED_MARKER = ".brev-tao-started"
MAX_REPORT_FILE_BYTES = 256 * 1024

_IMAGE_RE = re.compile(r"^[a-z0-9.-]+(?::\d+)?/[a-z0-9._/-]+(?::[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")

#: Log signatures of program faults: retrying on another instance cannot help.
PROGRAM_FAULTS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "out of memory",
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.IGNORECASE),
        "reduce the batch size (halve dataset.batch_size) or use a GPU with more memory",
    ),
    (
        "CUDA device-side assert",
        re.compile(r"device-side assert|CUDA error: an illegal", re.IGNORECASE),
        "check labels/class counts in the dataset and spec",
    ),
    (
        "invalid spec",
        re.compile(
            r"omegaconf\.errors|ConfigKeyError|ValidationError|requires .*-e/--experiment_spec_file|"
            r"Key '[^']+' not in|Could not override",
            re.IGNORECASE,
        ),
        "fix the experiment spec or overrides",
    ),
    (
        "shared memory exhausted",
        re.compile(r"bus error|shared memory|shm_size", re.IGNORECASE),
        "run the container with a larger --shm-size (shm_size='8g') or ipc='host'",
    ),
    (
        "missing input file",
        re.compile(r"FileNotFoundError|No such file or directory", re.IGNORECASE),
        "stage the inputs onto the instance (S3ToBrevOperator) and check the spec paths",
    ),
)
FAULT_PATTERN = "|".join(pattern.pattern for _, pattern, _ in PROGRAM_FAULTS)


def validate_image(image: str) -> str:
    """A full image reference with a registry, repository and an explicit tag or digest."""
    if not isinstance(image, str) or not _IMAGE_RE.match(image.strip()):
        raise ValueError(
            f"Invalid TAO image {image!r}: give a full reference with registry and an explicit tag or digest, "
            "e.g. 'nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt' or '...@sha256:<digest>' (no implicit 'latest')."
        )
    return image.strip()


def image_registry(image: str) -> str:
    return image.split("/", 1)[0]


def remote_path(path: str) -> str:
    """Shell expression for a path on the instance: absolute as is, relative to ``$HOME``."""
    if not path or "\n" in path or "\x00" in path:
        raise ValueError(f"Invalid remote path {path!r}")
    if path.startswith("/"):
        return shlex.quote(path)
    if path.startswith("~/"):
        path = path[2:]
    return '"$HOME"/' + shlex.quote(path)


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


def build_report_command(*, results_dir: str, action: str, job_log: str | None = None) -> str:
    """One command that reports what TAO wrote for ``action`` (always exits 0)."""
    base = remote_path(f"{results_dir.rstrip('/')}/{action}")
    files = ("metrics.json", "threshold.txt", "results.json", "weak_samples_breakdown.txt", "unreachable_kpi.txt")
    lines = [
        f"__d={base}",
        'if [ -f "$__d/status.json" ]; then printf "BREV_TAO_STATUS %s\\n" "$(tail -n 1 "$__d/status.json" | base64 -w 0)"; '
        'else echo "BREV_TAO_STATUS -"; fi',
        f'if [ -e "$__d/{STARTED_MARKER}" ]; then echo "BREV_TAO_STARTED $(stat -c %Y "$__d/{STARTED_MARKER}")"; fi',
        'find "$__d" -maxdepth 2 -type f \\( -name "model_epoch_*.pth" -o -name "*.onnx" -o -name "*.engine" \\) '
        '-printf "BREV_TAO_CKPT %T@ %s %P\\n" 2>/dev/null',
    ]
    for name in files:
        lines.append(
            f'if [ -f "$__d/{name}" ]; then printf "BREV_TAO_FILE {name} %s\\n" '
            f'"$(head -c {MAX_REPORT_FILE_BYTES} "$__d/{name}" | base64 -w 0)"; fi'
        )
    if job_log:
        lines.append(
            f"tail -c 262144 {remote_path(job_log)} 2>/dev/null | grep -E -m 5 {shlex.quote(FAULT_PATTERN)} "
            '| while IFS= read -r __l; do printf "BREV_TAO_FAULT %s\\n" "$(printf %s "$__l" | base64 -w 0)"; done'
        )
    lines += ["echo BREV_TAO_END", "exit 0"]
    return "\n".join(lines)


@dataclass
class TaoReport:
    """What TAO left on the instance for one action."""

    last_status: dict[str, Any] | None = None
    started_at: float | None = None
    checkpoints: list[tuple[float, int, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    fault_lines: list[str] = field(default_factory=list)

    @property
    def new_checkpoints(self) -> list[str]:
        """Checkpoints written since this launch (mtime at or after the start marker)."""
        if self.started_at is None:
            return [path for _, _, path in self.checkpoints]
        return [path for mtime, _, path in self.checkpoints if mtime >= self.started_at - 1]

    @property
    def unreachable_kpi(self) -> str | None:
        return self.files.get("unreachable_kpi.txt")

    def kpis(self) -> dict[str, Any]:
        """KPIs from the last status record, ``metrics.json`` and ``threshold.txt``."""
        kpis: dict[str, Any] = {}
        if self.last_status and isinstance(self.last_status.get("kpi"), dict):
            kpis.update(self.last_status["kpi"])
        for name in ("metrics.json", "results.json"):
            if name in self.files:
                try:
                    data = json.loads(self.files[name])
                except ValueError:
                    continue
                if isinstance(data, dict):
                    kpis.update({k: v for k, v in data.items() if isinstance(v, (int, float, str, bool))})
        if "threshold.txt" in self.files:
            try:
                kpis["threshold"] = float(self.files["threshold.txt"].strip().split()[0])
            except (ValueError, IndexError):
                kpis["threshold"] = self.files["threshold.txt"].strip()
        return kpis


def _b64(text: str) -> str:
    try:
        return base64.b64decode(text.strip(), validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def parse_report(stdout_lines: Sequence[str]) -> TaoReport:
    """Parse :func:`build_report_command`'s output; ``ValueError`` if it was cut short."""
    report = TaoReport()
    ended = False
    for raw in stdout_lines:
        line = raw.strip()
        if line == "BREV_TAO_END":
            ended = True
        elif line.startswith("BREV_TAO_STATUS "):
            payload = line.split(" ", 1)[1]
            if payload != "-":
                try:
                    report.last_status = json.loads(_b64(payload))
                except ValueError:
                    report.last_status = {"status": "UNPARSEABLE"}
        elif line.startswith("BREV_TAO_STARTED "):
            report.started_at = float(line.split()[1])
        elif line.startswith("BREV_TAO_CKPT "):
            _, mtime, size, path = line.split(" ", 3)
            report.checkpoints.append((float(mtime), int(size), path))
        elif line.startswith("BREV_TAO_FILE "):
            parts = line.split(" ", 2)
            report.files[parts[1]] = _b64(parts[2]) if len(parts) > 2 else ""
        elif line.startswith("BREV_TAO_FAULT "):
            report.fault_lines.append(_b64(line.split(" ", 1)[1]))
    if not ended:
        raise ValueError("the TAO report was cut short")
    report.checkpoints.sort()
    return report


def classify_fault(lines: Sequence[str]) -> tuple[str, str, str] | None:
    """``(kind, hint, line)`` of the first program fault found in ``lines``, else ``None``."""
    for line in lines:
        for kind, pattern, hint in PROGRAM_FAULTS:
            if pattern.search(line):
                return kind, hint, line.strip()
    return None


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


# ------------------------------------------------------------------------------------------------ verdict

#: :attr:`TaoVerdict.kind` values.
VERIFIED = "verified"
UNREACHABLE_KPI = "unreachable_kpi"
PROGRAM_FAULT = "program_fault"
COMMAND_FAILED = "command_failed"
NOT_VERIFIED = "not_verified"


@dataclass(frozen=True)
class TaoVerdict:
    """What a finished TAO run amounts to.

    :param kind: :data:`VERIFIED` (success), :data:`UNREACHABLE_KPI` and :data:`PROGRAM_FAULT` (retrying cannot
        help), :data:`COMMAND_FAILED` (non-zero exit for an infrastructure or unknown reason: may retry),
        :data:`NOT_VERIFIED` (exit code 0 but TAO's own records do not confirm success).
    :param message: what happened and what to do, for the task log and the error.
    """

    kind: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == VERIFIED


def verify_tao_run(
    report: TaoReport,
    *,
    exit_code: int,
    task: str,
    action: str,
    results_dir: str,
    require_new_checkpoint: bool,
    resumed_from: str | None = None,
) -> TaoVerdict:
    """Judge a finished TAO run from its exit code and the report of what it left (:func:`parse_report`).

    Order matters: gap analysis's ``unreachable_kpi.txt`` wins over everything; a non-zero exit is a program
    fault when the log shows one (:func:`classify_fault`), else a plain command failure; an exit code 0 still
    needs a last ``status.json`` record ``SUCCESS`` and, with ``require_new_checkpoint``, a checkpoint newer than
    the launch (TAO can report PASS without training) -- after a resume from ``resumed_from`` (a checkpoint file
    name restored just before the launch), one of a later epoch.
    """
    what = f"TAO {task} {action}"
    if report.unreachable_kpi is not None:
        return TaoVerdict(
            UNREACHABLE_KPI,
            f"{what}: no threshold meets the recall target (unreachable_kpi.txt: "
            f"{report.unreachable_kpi.strip()[:300]}). Retrain or relabel; retrying cannot help, so no retry.",
        )
    if exit_code != 0:
        fault = classify_fault(report.fault_lines)
        if fault is None:
            return TaoVerdict(COMMAND_FAILED, f"{what} failed with exit code {exit_code}.")
        kind, hint, line = fault
        return TaoVerdict(
            PROGRAM_FAULT,
            f"{what} failed with exit code {exit_code}: {kind} ({line[:300]}). Not retried: {hint}.",
        )
    status = (report.last_status or {}).get("status")
    if status != "SUCCESS":
        return TaoVerdict(
            NOT_VERIFIED,
            f"{what} exited 0 but the last status.json record is {status or 'missing'} "
            f"(in {results_dir.rstrip('/')}/{action}/status.json): not counted as success.",
        )
    if require_new_checkpoint and resumed_from and not checkpoints_after(report.new_checkpoints, resumed_from):
        return TaoVerdict(
            NOT_VERIFIED,
            f"{what} exited 0 and status.json says SUCCESS, but it wrote no checkpoint beyond {resumed_from}, the one "
            "it resumed from: the resume trained nothing (e.g. that checkpoint was already at train.num_epochs).",
        )
    if require_new_checkpoint and not report.new_checkpoints:
        return TaoVerdict(
            NOT_VERIFIED,
            f"{what} exited 0 and status.json says SUCCESS, but no new checkpoint was written (TAO's silent PASS: "
            "e.g. resume_training_checkpoint_path on a model that already used up its epochs). For warm starts use "
            "train.pretrained_model_path.",
        )
    return TaoVerdict(VERIFIED, f"{what} succeeded.")


# ------------------------------------------------------------------------------------------------ resume

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

    :param outputs: the validated ``outputs`` (:func:`~airflow_provider_brev.cli.manifest.validate_outputs`).
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
