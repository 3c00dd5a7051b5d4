"""Unit tests of ``airflow_provider_brev/transfers/s3.py``."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("operator", "inputs", "outputs"),
    [
        (dict(kind="download", s3_prefix="inputs/"), [("s3://bkt", "inputs")], []),
        (dict(kind="download", s3_keys=["a/x.txt", "b.txt"]), [("s3://bkt", "a/x.txt"), ("s3://bkt", "b.txt")], []),
        (dict(kind="download", s3_prefix=""), [("s3://bkt", "/")], []),
        (dict(kind="upload", s3_prefix="runs/r1/out"), [], [("s3://bkt", "runs/r1/out")]),
    ],
)
def test_transfers_report_the_s3_side(operator, inputs, outputs):
    pytest.importorskip("airflow.providers.openlineage.extractors")
    from airflow_provider_brev.transfers.s3 import BrevToS3Operator, S3ToBrevOperator

    kind = operator.pop("kind")
    cls = S3ToBrevOperator if kind == "download" else BrevToS3Operator
    task = cls(task_id=kind, instance_name="box", s3_bucket="bkt", remote_dir="work", **operator)
    lineage = task.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == inputs
    assert [(d.namespace, d.name) for d in lineage.outputs] == outputs
