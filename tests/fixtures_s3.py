"""S3 for the transfer tests: a real moto server on a free local port, and an ``aws_default`` connection to it.

The connection carries dummy AWS keys (:data:`DUMMY_ACCESS_KEY_ID`, :data:`DUMMY_SECRET_ACCESS_KEY`) whose only
purpose is to be searched for afterwards: neither may ever appear on a ``brev`` command line, in a task log or
in a file left on an instance.
"""

from __future__ import annotations

import json
import secrets
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

DUMMY_ACCESS_KEY_ID = "AKIABREVDUMMYKEYID42"
DUMMY_SECRET_ACCESS_KEY = "brevDummySecretAccessKey/NeverOnTheInstance42"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[str]:
    """A moto S3 server for the whole session; yields its endpoint URL (``http://127.0.0.1:<port>``)."""
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import WSGIRequestHandler

    # The server runs in the test process: its request log (which quotes presigned URLs, as S3's access log
    # would) must not be mistaken for the provider's task logs.
    WSGIRequestHandler.log_request = lambda *args, **kwargs: None  # type: ignore[method-assign]
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class AwsTestConnection:
    endpoint: str
    bucket: str
    client: Any
    access_key_id: str = DUMMY_ACCESS_KEY_ID
    secret_access_key: str = DUMMY_SECRET_ACCESS_KEY

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never leave the worker."""
        return (self.access_key_id, self.secret_access_key)

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def keys(self, prefix: str = "") -> list[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        return sorted(
            obj["Key"]
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
        )


def s3_client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        config=Config(signature_version="s3v4"),  # presigned URLs like the operators make them
    )


@pytest.fixture
def aws_connection(moto_s3: str, monkeypatch: pytest.MonkeyPatch) -> AwsTestConnection:
    """``AIRFLOW_CONN_AWS_DEFAULT`` pointing at moto (dummy keys) and a fresh, empty bucket."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv(
        "AIRFLOW_CONN_AWS_DEFAULT",
        json.dumps(
            {
                "conn_type": "aws",
                "login": DUMMY_ACCESS_KEY_ID,
                "password": DUMMY_SECRET_ACCESS_KEY,
                "extra": {"endpoint_url": moto_s3, "region_name": REGION},
            }
        ),
    )
    client = s3_client(moto_s3)
    bucket = f"brev-test-{secrets.token_hex(6)}"
    client.create_bucket(Bucket=bucket)
    return AwsTestConnection(endpoint=moto_s3, bucket=bucket, client=client)
