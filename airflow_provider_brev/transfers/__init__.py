"""Transfers between S3 and Brev instances (presigned URLs only: no AWS credential reaches an instance)."""

from __future__ import annotations

from airflow_provider_brev.transfers.s3 import (
    BrevToS3Operator,
    BrevTransferConflictError,
    BrevTransferError,
    S3ToBrevOperator,
)

__all__ = ["BrevToS3Operator", "BrevTransferConflictError", "BrevTransferError", "S3ToBrevOperator"]
