"""The report a Lepton job's agent prints as its last log line, and what it means (pure).

The job runs the provider's agent (``airflow_provider_brev/remote/lepton_agent.py``) around the workload: it
downloads the inputs, runs the command, uploads the outputs, runs the workload's report script (TAO: what the
action left behind) and prints one line ``AIRFLOW_LEPTON_RESULT <base64 JSON>``::

    {"exit_code": 0, "uploaded": 12, "upload_failures": [], "downloaded": 40, "report": ["BREV_TAO_STATUS ...", ...]}

The log keeps it after the container is gone (until ``ttl_seconds_after_finished``): the step reads the job's result
from it. No secret is in it (file names, counts, the report's markers).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

#: The prefix of the agent's result line (the agent has the same constant: tests/unit/core/lepton/test_report.py).
RESULT_MARKER = "AIRFLOW_LEPTON_RESULT "


@dataclass(frozen=True)
class JobReport:
    """What the agent reported.

    :param exit_code: the workload command's exit code.
    :param downloaded: input files downloaded.
    :param uploaded: output files uploaded (all syncs).
    :param upload_failures: output files that could not be uploaded (names).
    :param report: the workload's report lines (TAO: ``BREV_TAO_*`` markers).
    """

    exit_code: int
    downloaded: int = 0
    uploaded: int = 0
    upload_failures: list[str] = field(default_factory=list)
    report: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "downloaded": self.downloaded,
            "uploaded": self.uploaded,
            "upload_failures": list(self.upload_failures),
            "report": list(self.report),
        }


def render_result(report: JobReport) -> str:
    """The result line the agent prints for ``report`` (tests and the fake use it)."""
    return RESULT_MARKER + base64.b64encode(json.dumps(report.to_dict()).encode()).decode()


def parse_result(line: str) -> JobReport | None:
    """The report of a result line, or ``None`` when ``line`` is not one (or is damaged)."""
    if not line.startswith(RESULT_MARKER):
        return None
    try:
        data = json.loads(base64.b64decode(line[len(RESULT_MARKER) :].strip(), validate=True))
        return JobReport(
            exit_code=int(data["exit_code"]),
            downloaded=int(data.get("downloaded", 0)),
            uploaded=int(data.get("uploaded", 0)),
            upload_failures=[str(name) for name in data.get("upload_failures", [])],
            report=[str(item) for item in data.get("report", [])],
        )
    except (ValueError, TypeError, KeyError):  # binascii.Error and JSONDecodeError are ValueErrors
        return None


def report_from_dict(data: dict[str, Any] | None) -> JobReport | None:
    """A report kept in a trigger event or XCom (:meth:`JobReport.to_dict`)."""
    if not isinstance(data, dict) or "exit_code" not in data:
        return None
    return JobReport(
        exit_code=int(data["exit_code"]),
        downloaded=int(data.get("downloaded", 0)),
        uploaded=int(data.get("uploaded", 0)),
        upload_failures=list(data.get("upload_failures", [])),
        report=list(data.get("report", [])),
    )
