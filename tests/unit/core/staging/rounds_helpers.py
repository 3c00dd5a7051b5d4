"""Test helpers shared by ``core/staging/test_checksums.py``, ``core/staging/test_reports.py``,
``core/staging/test_types.py`` (one definition, imported by each)."""

from __future__ import annotations

MD5_A = "0cc175b9c0f1b6a831c399e269772661"


MD5_B = "92eb5ffee6ae2fec3ad71c777531578f"
