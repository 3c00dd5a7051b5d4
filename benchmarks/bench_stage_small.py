"""First sync of many small objects (an image dataset) from S3 to an instance: the provider vs boto3.

A moto S3 server runs in its own process on a free local port and holds ``--objects`` objects of 20-60 KB
(random bytes) under one prefix. Then, in the same run and against the same server:

- **provider**: ``sync_inputs`` (``airflow_provider_brev.staging.sync``) into a fresh directory of a ready
  simulated instance: one listing of the prefix, one listing of the directory, presigning on the worker, and on
  the instance one ``curl --parallel`` process (16 at a time) whose files are verified (size, md5) and moved
  into place in bulk;
- **boto3**: s3transfer's ``TransferManager`` with 10 concurrent requests (what ``aws s3 sync`` uses; awscli is
  not a dependency) downloading every object to a local directory, after one listing.

Reported: ``objects_per_s`` of both, their ratio (goal: the provider is not slower), seconds, bytes, and the
provider's presigning rate. The helpers here are also used by ``bench_restage.py``.

    python benchmarks/bench_stage_small.py --out result.json [--objects 10000]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import WORK_DIR, progress, quiet_provider_logs, use_simulator, write_json

from airflow_provider_brev.testing.local_s3 import free_port

BASE = WORK_DIR / "stage-small"
INSTANCE = "bench-stage"
BUCKET = "bench-stage"
PREFIX = "dataset/images/"
REGION = "us-east-1"
KEY_ID, SECRET = "AKIABENCHDUMMYKEY000", "benchDummySecretKeyNeverOnTheInstance000"


class Moto:
    """A moto S3 server in a child process (its own interpreter: it does not share this process's GIL)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        log = open(BASE / "moto.log", "w")  # noqa: SIM115 (closed with the process)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            config=Config(signature_version="s3v4", max_pool_connections=32),
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a loaded machine: moto still busy with 10,000 objects
            self.proc.kill()
            self.proc.wait()


def setup(objects: int, seed: int = 11) -> tuple[Moto, Any, Any, dict[str, int]]:
    """moto with ``objects`` small objects, a simulator with one ready instance, this process pointed at both.
    Returns ``(moto, simulator, BrevHook, {key: size})``."""
    from airflow_provider_brev.testing.simulator import BrevSimulator

    shutil.rmtree(BASE, ignore_errors=True)
    BASE.mkdir(parents=True)
    moto = Moto()
    client = moto.client()
    client.create_bucket(Bucket=BUCKET)
    rng = random.Random(seed)
    sizes = {f"{PREFIX}class{n % 10}/img{n:05d}.jpg": rng.randint(20_000, 60_000) for n in range(objects)}
    started = time.monotonic()

    def put(item: tuple[str, int]) -> None:
        key, size = item
        client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(size))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, sizes.items()))
    progress(f"seeded {objects} objects ({sum(sizes.values()) / 1e6:.0f} MB) in {time.monotonic() - started:.0f} s")

    sim = BrevSimulator(BASE / "sim").install()
    use_simulator(sim, BASE / "worker-home")
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(
        {
            "conn_type": "aws",
            "login": KEY_ID,
            "password": SECRET,
            "extra": {"endpoint_url": moto.endpoint, "region_name": REGION},
        }
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update({"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null"})
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"
    sim.create_instance_directly(INSTANCE)
    quiet_provider_logs()
    from airflow_provider_brev.hooks.brev import BrevHook

    return moto, sim, BrevHook(log_cli_output=False), sizes


def provider_sync(hook: Any, directory: str) -> tuple[float, Any]:
    """One ``sync_inputs`` of the prefix into ``directory``; returns ``(seconds, SyncReport)``."""
    from airflow_provider_brev.staging.sync import sync_inputs

    log = logging.getLogger("bench.staging")
    log.setLevel(logging.WARNING)
    started = time.monotonic()
    (report,) = sync_inputs(hook, INSTANCE, {f"s3://{BUCKET}/{PREFIX}": directory}, aws_conn_id="aws_default", log=log)
    return time.monotonic() - started, report


def check_placed(sim: Any, directory: str, sizes: dict[str, int]) -> int:
    """Files of the right size under ``directory`` in the instance's sandbox."""
    root = sim.sandbox(INSTANCE) / directory
    return sum(1 for key, size in sizes.items() if (root / key[len(PREFIX) :]).stat().st_size == size)


def boto3_sync(moto: Moto, target: Path, concurrency: int = 10) -> float:
    """List, then download every object with s3transfer's TransferManager (``concurrency`` requests)."""
    from s3transfer.manager import TransferConfig, TransferManager

    client = moto.client()
    started = time.monotonic()
    keys = [
        obj["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX)
        for obj in page.get("Contents", [])
    ]
    config = TransferConfig(max_request_concurrency=concurrency)
    with TransferManager(client, config) as manager:
        futures = []
        for key in keys:
            path = target / key[len(PREFIX) :]
            path.parent.mkdir(parents=True, exist_ok=True)
            futures.append(manager.download(BUCKET, key, str(path)))
        for future in futures:
            future.result()
    return time.monotonic() - started


def presign_rate(count: int = 2000) -> float:
    """URLs per second of the staging hook's presigning (one client, local computation)."""
    from airflow_provider_brev.hooks.s3_staging import S3StagingHook

    staging = S3StagingHook(bucket=BUCKET)
    staging.presign_get("warm-up")
    started = time.monotonic()
    for n in range(count):
        staging.presign_get(f"{PREFIX}x/{n}.jpg")
    return count / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--objects", type=int, default=10_000)
    args = parser.parse_args()
    moto, sim, hook, sizes = setup(args.objects)
    try:
        total = sum(sizes.values())
        progress(f"stage_small: provider sync of {args.objects} objects")
        provider_s, report = provider_sync(hook, "data/images")
        placed = check_placed(sim, "data/images", sizes)
        progress(f"stage_small: boto3 TransferManager (10 concurrent requests) of {args.objects} objects")
        boto3_s = boto3_sync(moto, BASE / "boto3-target")
        rate = presign_rate()
    finally:
        sim.kill_all()
        moto.stop()
    provider_rate, boto3_rate = args.objects / provider_s, args.objects / boto3_s
    result = {
        "objects": args.objects,
        "bytes": total,
        "object_size_range": [20_000, 60_000],
        "provider": {
            "seconds": round(provider_s, 2),
            "objects_per_s": round(provider_rate, 1),
            "mb_per_s": round(total / provider_s / 1e6, 1),
            "objects_downloaded": report.transferred,
            "objects_verified_in_place": placed,
            "method": "sync_inputs: one curl --parallel (16) on the instance, bulk size+md5 verification",
        },
        "boto3": {
            "seconds": round(boto3_s, 2),
            "objects_per_s": round(boto3_rate, 1),
            "mb_per_s": round(total / boto3_s / 1e6, 1),
            "method": "s3transfer TransferManager, max_request_concurrency=10 (aws s3 sync's default)",
        },
        "provider_vs_boto3_speed": round(provider_rate / boto3_rate, 2),
        "presign_urls_per_s": round(rate),
        "moto": "separate process (python -m moto.server), same server for both sides",
    }
    write_json(Path(args.out), result)
    shutil.rmtree(BASE, ignore_errors=True)
    progress(
        f"stage_small: provider {provider_rate:.0f} objects/s ({provider_s:.1f} s), boto3 {boto3_rate:.0f} objects/s "
        f"({boto3_s:.1f} s), presign {rate:.0f} URLs/s"
    )
    return 0 if placed == args.objects else 1


if __name__ == "__main__":
    sys.exit(main())
