"""S3 for the transfer tests: the pytest plugin's local moto S3 (airflow_provider_brev/testing/local_s3.py, the
``brev_s3_server`` and ``brev_s3`` fixtures of airflow_provider_brev/testing/pytest_plugin.py) under the names
this suite has always used.

The connection carries dummy AWS keys (``DUMMY_ACCESS_KEY_ID``, ``DUMMY_SECRET_ACCESS_KEY`` of
airflow_provider_brev/testing/local_s3.py) whose only purpose is to be searched for afterwards: neither may ever
appear on a ``brev`` command line, in a task log or in a file left on an instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from airflow_provider_brev.testing.local_s3 import LocalS3Bucket, LocalS3Server


@pytest.fixture(scope="session")
def moto_s3(brev_s3_server: LocalS3Server) -> str:
    """The session's moto S3 server; its endpoint URL (``http://127.0.0.1:<port>``)."""
    return brev_s3_server.endpoint


@pytest.fixture
def aws_connection(brev_s3: LocalS3Bucket) -> LocalS3Bucket:
    """``AIRFLOW_CONN_AWS_DEFAULT`` pointing at moto (dummy keys) and a fresh, empty bucket."""
    return brev_s3
