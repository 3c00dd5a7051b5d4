"""Test helpers shared by ``core/staging/conftest.py``, ``core/staging/test_checksums.py``,
``core/staging/test_reports.py``, ``core/staging/test_scripts.py`` (one definition, imported by each)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.listing import build_list_script
from airflow_provider_brev.core.staging.reports import parse_list_output
from airflow_provider_brev.core.staging.scripts import OP_PART, TransferTask

if TYPE_CHECKING:
    from collections.abc import Iterable

BUCKET = "brev-unit-transfers"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def listed_signature(instance, directory: str, relpath: str) -> str:
    report = parse_list_output(instance.run(build_list_script(directory)).stdout.splitlines())
    (entry,) = [f for f in report.files if f.relpath == relpath]
    assert entry.signature
    return entry.signature


def part_tasks(
    s3: Any, key: str, upload_id: str, relpath: str, file_size: int, parts: Iterable[tuple[int, int, int]], **extra: Any
) -> list[TransferTask]:
    """The tasks that upload ``relpath``'s ``parts`` (``(number, offset, length)``) to ``key``'s multipart upload
    through presigned URLs of the moto server, keyed ``<extra["prefix"]>.<number>`` (default ``0``); ``extra``: the
    tasks' other fields."""
    prefix = extra.pop("prefix", "0")
    return [
        TransferTask(
            key=f"{prefix}.{number}",
            op=OP_PART,
            relpath=relpath,
            file_size=file_size,
            offset=offset,
            length=length,
            url=s3.generate_presigned_url(
                "upload_part", Params={"Bucket": BUCKET, "Key": key, "UploadId": upload_id, "PartNumber": number}
            ),
            **extra,
        )
        for number, offset, length in parts
    ]
