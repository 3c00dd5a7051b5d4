"""``aws s3 sync SRC DST`` for the bill benchmark's seed recipe, on a simulated instance (``bench_bill.py``).

The seed recipe stages with the AWS CLI; simulated instances have none, so this stands in for it: boto3 against the
local moto S3 (``AWS_ENDPOINT_URL`` and keys come from the sandbox environment the benchmark sets), 10 transfers at
once (the AWS CLI's default ``max_concurrent_requests``), and an object is skipped when a file of the same size is
already there (the AWS CLI's default comparison, modification times aside).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CONCURRENCY = 10


def _client():  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")


def _split(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix


def download(src: str, dst: Path) -> int:
    client = _client()
    bucket, prefix = _split(src)
    todo: list[tuple[str, Path]] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            target = dst / obj["Key"][len(prefix) :].lstrip("/")
            if not (target.exists() and target.stat().st_size == obj["Size"]):
                todo.append((obj["Key"], target))

    def fetch(item: tuple[str, Path]) -> None:
        key, target = item
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(target))

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(fetch, todo))
    return len(todo)


def upload(src: Path, dst: str) -> int:
    client = _client()
    bucket, prefix = _split(dst)
    files = [p for p in src.rglob("*") if p.is_file()]

    def put(path: Path) -> None:
        client.upload_file(str(path), bucket, prefix.rstrip("/") + "/" + str(path.relative_to(src)))

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(put, files))
    return len(files)


def main(argv: list[str]) -> int:
    if argv[:2] != ["s3", "sync"] or len(argv) != 4:
        sys.stderr.write("usage: aws s3 sync <SRC> <DST> (one side s3://)\n")
        return 2
    src, dst = argv[2], argv[3]
    count = download(src, Path(dst)) if src.startswith("s3://") else upload(Path(src), dst)
    sys.stdout.write(f"{count} objects transferred\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
