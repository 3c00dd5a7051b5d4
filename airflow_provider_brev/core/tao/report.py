"""What a finished TAO run left behind, and whether it counts as success (pure).

* :func:`build_report_command` / :func:`parse_report` -- one ``brev exec`` that reads what TAO left behind:
  the last ``status.json`` record, checkpoints written since this launch, small result files, the
  gap-analysis ``unreachable_kpi.txt``, and known fault signatures from the job log.
* :func:`classify_fault` -- program faults (out of memory, CUDA assert, bad spec) that retrying cannot fix.
* :func:`verify_tao_run` -- whether a finished run counts as success: exit code 0 **and** a final ``SUCCESS``
  record in ``status.json`` (and, where required, a checkpoint written by this run -- after a resume, one beyond
  the checkpoint it resumed from); otherwise which failure it is (:class:`TaoVerdict`), which the TAO operators
  turn into their typed errors.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.markers import (
    TAO_CKPT,
    TAO_END,
    TAO_FAULT,
    TAO_FILE,
    TAO_STARTED,
    TAO_STATUS,
    iter_markers,
)
from airflow_provider_brev.core.protocol.remote_scripts import Value, render_script
from airflow_provider_brev.core.tao.checkpoints import checkpoints_after
from airflow_provider_brev.core.tao.command import STARTED_MARKER, remote_path_value

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX_REPORT_FILE_BYTES = 256 * 1024


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


#: The result files the report reads (at most :data:`MAX_REPORT_FILE_BYTES` of each).
REPORT_FILES = ("metrics.json", "threshold.txt", "results.json", "weak_samples_breakdown.txt", "unreachable_kpi.txt")


def build_report_command(*, results_dir: str, action: str, job_log: str | None = None) -> str:
    """One command that reports what TAO wrote for ``action`` (``remote/tao_report.sh``; always exits 0)."""
    values: dict[str, Value] = {
        "__T_DIR": remote_path_value(f"{results_dir.rstrip('/')}/{action}"),
        "__T_STARTED": STARTED_MARKER,
        "__T_FILES": " ".join(REPORT_FILES),
        "__T_MAX": MAX_REPORT_FILE_BYTES,
        "__T_LOG": remote_path_value(job_log) if job_log else "",
        "__T_FAULTS": FAULT_PATTERN,
    }
    return render_script("tao_report", values)


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
    """Parse :func:`build_report_command`'s output (:func:`~airflow_provider_brev.core.protocol.markers.parse_marker`);
    ``ValueError`` if it was cut short."""
    report = TaoReport()
    ended = False
    for marker in iter_markers(stdout_lines):
        if marker.kind == TAO_END:
            ended = True
        elif marker.kind == TAO_STATUS:
            record = marker["record_base64"].strip()
            if record and record != "-":
                try:
                    report.last_status = json.loads(_b64(record))
                except ValueError:
                    report.last_status = {"status": "UNPARSEABLE"}
        elif marker.kind == TAO_STARTED:
            report.started_at = float(marker["epoch"])
        elif marker.kind == TAO_CKPT:
            report.checkpoints.append((float(marker["mtime"]), int(marker["size"]), marker["path"]))
        elif marker.kind == TAO_FILE:
            report.files[marker["name"]] = _b64(marker["content_base64"].strip())
        elif marker.kind == TAO_FAULT and (line := marker["line_base64"].strip()):
            report.fault_lines.append(_b64(line))
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
