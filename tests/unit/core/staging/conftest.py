"""Fixtures shared by the unit tests of ``core/staging/``: a moto S3 bucket."""

from __future__ import annotations

import pytest

from unit.core.staging.scripts_helpers import BUCKET


@pytest.fixture(scope="module")
def s3(moto_s3):
    from airflow_provider_brev.testing.local_s3 import s3_client

    client = s3_client(moto_s3)
    client.create_bucket(Bucket=BUCKET)
    return client
