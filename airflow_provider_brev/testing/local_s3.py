"""A local S3 for tests: a real moto server on a free port of 127.0.0.1, buckets in it, and the ``aws_default``
connection pointing at it. The pytest plugin's ``brev_s3`` fixture (:mod:`.pytest_plugin`) and this repository's
own S3 fixtures (``tests/fixtures_s3.py``) are built on it.

moto is not a dependency of the provider: it comes with the ``testing`` extra (``pip install '.[testing]'`` in a
checkout, ``airflow-provider-brev[testing]`` once published), or ``pip install 'moto[server,s3]'``. It is imported
when a server starts, not when this module is imported.

The connection carries dummy AWS keys (:data:`DUMMY_ACCESS_KEY_ID`, :data:`DUMMY_SECRET_ACCESS_KEY`): search for
them (:attr:`LocalS3Bucket.secrets`) in task logs, XComs and ``brev`` command lines to prove that no key leaves the
worker.
"""

from __future__ import annotations

import json
import secrets
import socket
from dataclasses import dataclass
from typing import Any

DUMMY_ACCESS_KEY_ID = "AKIABREVDUMMYKEYID42"
DUMMY_SECRET_ACCESS_KEY = "brevDummySecretAccessKey/NeverOnTheInstance42"
REGION = "us-east-1"
#: what :func:`isolated_aws_environment` removes: credentials or profiles of the machine must not reach the tests
AWS_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
MISSING_MOTO = (
    "the local S3 (brev_s3) needs moto's server: install the provider's testing extra (pip install '.[testing]' in a "
    "checkout, 'airflow-provider-brev[testing]' once published) or pip install 'moto[server,s3]'"
)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalS3Server:
    """A moto S3 server in this process (``moto.server.ThreadedMotoServer``) on a free port of 127.0.0.1.

    Its request log is silenced while it runs: it would quote presigned URLs, which are credentials.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._log_request: Any = None

    def start(self) -> LocalS3Server:
        """Start the server; raises ``ImportError`` saying what to install when moto's server is missing."""
        try:
            from moto.server import ThreadedMotoServer
            from werkzeug.serving import WSGIRequestHandler
        except ImportError as err:
            raise ImportError(MISSING_MOTO) from err
        self._log_request = WSGIRequestHandler.log_request
        WSGIRequestHandler.log_request = lambda *args, **kwargs: None  # type: ignore[method-assign]
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
            from werkzeug.serving import WSGIRequestHandler

            WSGIRequestHandler.log_request = self._log_request  # type: ignore[method-assign]

    def client(self) -> Any:
        """A boto3 S3 client with the dummy keys, presigning with SigV4 as the provider does."""
        return s3_client(self.endpoint)

    def new_bucket(self, prefix: str = "brev-test") -> LocalS3Bucket:
        """A fresh, empty bucket named ``<prefix>-<12 random hex digits>``."""
        client = self.client()
        bucket = f"{prefix}-{secrets.token_hex(6)}"
        client.create_bucket(Bucket=bucket)
        return LocalS3Bucket(endpoint=self.endpoint, bucket=bucket, client=client)


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client of ``endpoint`` with the dummy keys (SigV4, as the provider presigns)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        config=Config(signature_version="s3v4"),
    )


def connection_json(endpoint: str) -> str:
    """An Airflow ``aws`` connection (JSON form, for ``AIRFLOW_CONN_AWS_DEFAULT``) to ``endpoint``, dummy keys."""
    return json.dumps(
        {
            "conn_type": "aws",
            "login": DUMMY_ACCESS_KEY_ID,
            "password": DUMMY_SECRET_ACCESS_KEY,
            "extra": {"endpoint_url": endpoint, "region_name": REGION},
        }
    )


def isolated_aws_environment(endpoint: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment variables to set (``AIRFLOW_CONN_AWS_DEFAULT`` to ``endpoint``; no instance metadata, no
    config or credentials file) and those to remove (:data:`AWS_CREDENTIAL_VARIABLES`, ``AWS_DEFAULT_PROFILE``)."""
    env = {
        "AIRFLOW_CONN_AWS_DEFAULT": connection_json(endpoint),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    return env, (*AWS_CREDENTIAL_VARIABLES, "AWS_DEFAULT_PROFILE")


@dataclass
class LocalS3Bucket:
    """One bucket of a :class:`LocalS3Server`, what the ``brev_s3`` fixture yields.

    :param endpoint: the server's URL (``http://127.0.0.1:<port>``), the connection's ``endpoint_url``.
    :param bucket: the bucket's name.
    :param client: a boto3 S3 client of the server (dummy keys).
    :param access_key_id: the connection's access key id.
    :param secret_access_key: the connection's secret key.
    """

    endpoint: str
    bucket: str
    client: Any
    access_key_id: str = DUMMY_ACCESS_KEY_ID
    secret_access_key: str = DUMMY_SECRET_ACCESS_KEY

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never leave the worker (the connection's keys)."""
        return (self.access_key_id, self.secret_access_key)

    def uri(self, key: str = "") -> str:
        """``s3://<bucket>/<key>``."""
        return f"s3://{self.bucket}/{key}"

    def put(self, key: str, data: bytes) -> None:
        """Write an object."""
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        """An object's content."""
        return bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def keys(self, prefix: str = "") -> list[str]:
        """Every key under ``prefix``, sorted."""
        paginator = self.client.get_paginator("list_objects_v2")
        return sorted(
            obj["Key"]
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
        )
