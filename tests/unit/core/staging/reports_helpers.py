"""Test helpers shared by ``core/staging/test_reports.py``, ``core/staging/test_rounds.py``,
``core/staging/test_scripts.py`` (one definition, imported by each)."""

from __future__ import annotations

MD5 = "0" * 31 + "1"


URL = "https://bucket.s3.amazonaws.com/k?X-Amz-Signature=abc"
