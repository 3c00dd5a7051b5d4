"""Unit tests of ``airflow_provider_brev/utils/lineage.py``."""

from __future__ import annotations

import sys

import pytest

from airflow_provider_brev.utils.lineage import operator_lineage


def test_operator_lineage_is_none_without_the_openlineage_provider(monkeypatch):
    monkeypatch.setitem(sys.modules, "airflow.providers.openlineage.extractors", None)  # import raises ImportError
    assert operator_lineage(["s3://bkt/a/"], []) is None


def test_operator_lineage_with_the_openlineage_provider():
    pytest.importorskip("airflow.providers.openlineage.extractors")
    lineage = operator_lineage(["s3://bkt/in/", "s3://bkt/in"], ["s3://out/out/"])
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("s3://bkt", "in")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://out", "out")]
