"""Test helpers shared by ``core/staging/conftest.py``, ``core/staging/test_checksums.py``,
``core/staging/test_reports.py``, ``core/staging/test_scripts.py`` (one definition, imported by each)."""

from __future__ import annotations

import hashlib

from airflow_provider_brev.core.staging.listing import build_list_script
from airflow_provider_brev.core.staging.reports import parse_list_output

BUCKET = "brev-unit-transfers"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def listed_signature(instance, directory: str, relpath: str) -> str:
    report = parse_list_output(instance.run(build_list_script(directory)).stdout.splitlines())
    (entry,) = [f for f in report.files if f.relpath == relpath]
    assert entry.signature
    return entry.signature
