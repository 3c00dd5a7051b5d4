"""Warm-reuse records under concurrent writers: real processes writing records at the same moment to the suite's
metadata database, through the provider's own store (airflow_provider_brev/instances/warm_pool.py). None is lost."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from helpers import clear_warm_records

from airflow_provider_brev.instances.warm_pool import ReuseRegistry
from airflow_provider_brev.instances.warm_pool_stores import MetadataVariables

WRITER = """
import logging, sys, time
from airflow_provider_brev.core.instances.warm_pool import ReuseEntry
from airflow_provider_brev.instances.warm_pool import ReuseRegistry
from airflow_provider_brev.instances.warm_pool_stores import MetadataVariables

key, first, count, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
registry = ReuseRegistry(logging.getLogger("writer"), store=MetadataVariables())
entries = [
    ReuseEntry.from_dict(
        {"key": key, "id": f"i-{i}", "name": f"afbrev-w-{i:08x}-x203001010000", "state": "stopped",
         "since": time.time(), "claimed_by": tag}
    )
    for i in range(first, first + count)
]
print("ready", flush=True)
sys.stdin.readline()  # the gate: every writer starts at once
for entry in entries:
    registry.put(entry)
print("done", flush=True)
"""


def write_at_once(*writers: tuple[str, int, int, str]) -> None:
    """Run one process per ``(reuse key, first id, count, tag)``; all write their records from the same moment."""
    from airflow.configuration import conf

    # the suite's AIRFLOW_HOME and metadata database, and this process's Fernet key (an `airflow` command run by an
    # earlier test may have written a generated one into airflow.cfg, which this process never read)
    env = {**os.environ, "AIRFLOW__CORE__FERNET_KEY": conf.get("core", "fernet_key", fallback="")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, key, str(first), str(count), tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for key, first, count, tag in writers
    ]
    try:
        for proc in procs:  # each has imported Airflow and built its entries
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n", proc.stderr
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        for proc in procs:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def registry(airflow_db):
    clear_warm_records()
    yield ReuseRegistry(logging.getLogger(__name__), store=MetadataVariables())
    clear_warm_records()


@pytest.mark.parametrize("keys", [("nightly", "weekly"), ("nightly", "nightly")], ids=["two-keys", "one-key"])
def test_concurrent_writers_lose_no_record(registry, keys):
    write_at_once((keys[0], 0, 25, "a"), (keys[1], 25, 25, "b"))
    found = {i: registry.find(f"i-{i}") for i in range(50)}
    assert [i for i, entry in found.items() if entry is None] == []  # 0 of 50 lost
    assert {i: (e.key, e.claimed_by) for i, e in found.items() if e is not None} == {
        i: (keys[0], "a") if i < 25 else (keys[1], "b") for i in range(50)
    }


def test_two_writers_of_one_record_leave_one_of_theirs_whole(registry):
    # Only whoever holds an instance writes its record, so this never happens between a run and another; if it did,
    # the record is one writer's, whole -- never a mix, never lost
    write_at_once(("nightly", 0, 25, "a"), ("nightly", 0, 25, "b"))
    found = [registry.find(f"i-{i}") for i in range(25)]
    assert all(e is not None and e.claimed_by in ("a", "b") and e.key == "nightly" for e in found), found
