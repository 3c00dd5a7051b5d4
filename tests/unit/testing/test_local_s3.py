"""The pytest plugin's local S3 (airflow_provider_brev/testing/local_s3.py, the ``brev_s3`` fixture): a real moto
server that ``aws_default`` reaches, one fresh bucket per test, and a clear message when moto is missing."""

from __future__ import annotations

import os
import sys

import pytest

from airflow_provider_brev.testing.local_s3 import DUMMY_ACCESS_KEY_ID, MISSING_MOTO, LocalS3Server


def test_brev_s3_is_a_fresh_bucket_that_aws_default_reaches(brev_s3, brev_s3_server):
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    assert brev_s3.endpoint == brev_s3_server.endpoint and brev_s3.keys() == []
    brev_s3.put("in/a.txt", b"one\n")
    hook = S3Hook(aws_conn_id="aws_default")
    assert hook.list_keys(bucket_name=brev_s3.bucket, prefix="in/") == ["in/a.txt"]
    assert hook.read_key("in/a.txt", bucket_name=brev_s3.bucket) == "one\n"
    assert brev_s3.keys("in/") == ["in/a.txt"] and brev_s3.get("in/a.txt") == b"one\n"
    assert brev_s3.uri("in/") == f"s3://{brev_s3.bucket}/in/"
    assert DUMMY_ACCESS_KEY_ID in brev_s3.secrets
    assert "AWS_ACCESS_KEY_ID" not in os.environ and os.environ["AWS_CONFIG_FILE"] == "/dev/null"


def test_each_test_gets_its_own_bucket(brev_s3, brev_s3_server):
    other = brev_s3_server.new_bucket()
    assert other.bucket != brev_s3.bucket
    other.put("x", b"x")
    assert brev_s3.keys() == []


def test_without_moto_the_server_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "moto.server", None)  # what `import moto.server` does when it is not installed
    with pytest.raises(ImportError, match=r"testing extra \(pip install '\.\[testing\]' in a checkout") as err:
        LocalS3Server().start()
    assert str(err.value) == MISSING_MOTO
