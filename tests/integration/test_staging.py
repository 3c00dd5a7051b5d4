"""Step staging (``airflow_provider_brev.staging.sync``): incremental ``sync_inputs`` / ``sync_outputs`` against
the simulator (transfer scripts run for real in the instance's sandbox) and a real moto S3 server.
"""

from __future__ import annotations

import hashlib
import json
import logging

import pytest

from airflow_provider_brev.core.staging.listing import md5_cache_path
from airflow_provider_brev.core.staging.types import MANIFEST_NAME
from airflow_provider_brev.exceptions import BrevInvalidInputError, BrevTransferError
from airflow_provider_brev.staging.sync import sync_inputs, sync_outputs, validate_inputs, validate_outputs
from integration.test_transfers import URL_MARKERS, install_flaky_curl

INSTANCE = "staging-box"


class ListLog(logging.Handler):
    """Every formatted record of one logger (the service's ``log``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def box(brev_sim, aws_connection, monkeypatch):
    """A ready instance, a BrevHook for it, and a logger whose lines are kept."""
    from airflow_provider_brev.hooks.brev import BrevHook

    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.create_instance_directly(INSTANCE)
    log = logging.getLogger(f"test.staging.{id(brev_sim)}")
    log.setLevel(logging.INFO)
    handler = ListLog()
    log.addHandler(handler)

    class Box:
        hook = BrevHook(log_cli_output=False)
        home = brev_sim.sandbox(INSTANCE)
        logger = log
        lines = handler

        def sync_in(self, inputs):
            return sync_inputs(self.hook, INSTANCE, inputs, aws_conn_id="aws_default", log=log)

        def sync_out(self, outputs, final=True):
            return sync_outputs(self.hook, INSTANCE, outputs, aws_conn_id="aws_default", log=log, final=final)

    yield Box()
    log.removeHandler(handler)


def copies(sim) -> int:
    return len(sim.calls("copy"))


def assert_no_secrets(sim, aws, box) -> None:
    needles = (*aws.secrets, *URL_MARKERS)
    for call in sim.calls():
        recorded = json.dumps([call.get("argv"), call.get("ssh_argv"), call.get("ssh_invocations")])
        for needle in needles:
            assert needle not in recorded
    for needle in needles:
        assert needle not in json.dumps(sim.runs())
        assert needle not in box.lines.text
    for path in box.home.rglob("*"):
        assert ".airflow-brev-part" not in path.name and not path.name.startswith(".airflow-brev-xfer-"), path
        if path.is_file() and not path.is_symlink():
            for needle in needles:
                assert needle.encode() not in path.read_bytes(), f"{needle} in {path}"


def test_inputs_sync_incrementally(box, brev_sim, aws_connection):
    aws = aws_connection
    files = {f"imgs/{n:03d}.jpg": bytes([n]) * (1000 + n) for n in range(12)} | {"labels.csv": b"a,b\n", "e": b""}
    for rel, data in files.items():
        aws.put(f"ds/v1/{rel}", data)
    inputs = {f"s3://{aws.bucket}/ds/v1": "data/ds"}

    (first,) = box.sync_in(inputs)
    assert (first.transferred, first.skipped, first.bytes) == (14, 0, sum(map(len, files.values())))
    assert first.to_dict().keys() == {"uri", "directory", "transferred", "skipped", "bytes", "seconds"}
    assert first.uri == f"s3://{aws.bucket}/ds/v1/" and first.directory == "data/ds"
    for rel, data in files.items():
        assert (box.home / "data/ds" / rel).read_bytes() == data
    manifest = (box.home / "data/ds" / MANIFEST_NAME).read_text().splitlines()
    assert json.loads(manifest[0]) == {"source": first.uri} and len(manifest) == 15

    copies_before = copies(brev_sim)
    (second,) = box.sync_in(inputs)
    assert (second.transferred, second.skipped, second.bytes) == (0, 14, 0)
    assert copies(brev_sim) == copies_before  # no plan file, no manifest rewrite: nothing shipped at all

    aws.put("ds/v1/imgs/000.jpg", b"changed in S3")  # changed object
    aws.put("ds/v1/new.txt", b"new object")  # new object
    (box.home / "data/ds/imgs/001.jpg").unlink()  # deleted locally
    (box.home / "data/ds/imgs/002.jpg").write_bytes(b"edited locally")  # edited locally (other size)
    (box.home / "data/ds/mine.txt").write_text("a local file not in S3 stays")
    (third,) = box.sync_in(inputs)
    assert (third.transferred, third.skipped) == (4, 11)
    assert (box.home / "data/ds/imgs/000.jpg").read_bytes() == b"changed in S3"
    assert (box.home / "data/ds/imgs/001.jpg").read_bytes() == files["imgs/001.jpg"]
    assert (box.home / "data/ds/imgs/002.jpg").read_bytes() == files["imgs/002.jpg"]
    assert (box.home / "data/ds/new.txt").read_bytes() == b"new object"
    assert (box.home / "data/ds/mine.txt").exists()
    assert box.sync_in(inputs)[0].transferred == 0
    assert_no_secrets(brev_sim, aws, box)


def test_a_failed_object_is_named_and_the_rest_is_kept(box, brev_sim, aws_connection, tmp_path):
    aws = aws_connection
    for n in range(5):
        aws.put(f"in/f{n}.bin", hashlib.sha256(bytes([n])).digest() * 100)
    install_flaky_curl(brev_sim, tmp_path, always="*/f3.bin", once="no-such-file")
    inputs = {f"s3://{aws.bucket}/in/": "~/inp"}
    with pytest.raises(BrevTransferError, match=r"1 of 5 file\(s\).*f3\.bin \(curl: exit 7") as err:
        box.sync_in(inputs)
    for needle in (*aws.secrets, *URL_MARKERS):
        assert needle not in str(err.value)
    assert sorted(p.name for p in (box.home / "inp").glob("*.bin")) == ["f0.bin", "f1.bin", "f2.bin", "f4.bin"]
    (brev_sim.tools_bin / "curl").unlink()  # the network is back
    (report,) = box.sync_in(inputs)
    assert (report.transferred, report.skipped) == (1, 4)  # only the file that failed
    assert (box.home / "inp/f3.bin").read_bytes() == aws.get("in/f3.bin")
    assert_no_secrets(brev_sim, aws, box)


def test_outputs_upload_new_and_changed_files_and_never_delete(box, brev_sim, aws_connection):
    aws = aws_connection
    out = box.home / "work/out"
    (out / "ckpt").mkdir(parents=True)
    (out / "ckpt/epoch1.pt").write_bytes(b"1" * 5000)
    (out / "metrics.json").write_text('{"loss": 1}')
    (out / MANIFEST_NAME).write_text("{}\n")  # a manifest is never uploaded
    aws.put("runs/r1/keep-me.txt", b"was there before")
    outputs = {"work/out": f"s3://{aws.bucket}/runs/r1"}

    assert box.sync_out({"work/not-yet": f"s3://{aws.bucket}/runs/r1"})[0].transferred == 0
    (first,) = box.sync_out(outputs)
    assert (first.transferred, first.skipped, first.bytes) == (2, 0, 5000 + len('{"loss": 1}'))
    assert aws.keys("runs/") == ["runs/r1/ckpt/epoch1.pt", "runs/r1/keep-me.txt", "runs/r1/metrics.json"]
    (second,) = box.sync_out(outputs)
    assert (second.transferred, second.skipped) == (0, 2)

    (out / "ckpt/epoch2.pt").write_bytes(b"2" * 6000)  # new
    (out / "metrics.json").write_text('{"loss": 0.5}')  # changed
    (out / "ckpt/epoch1.pt").unlink()  # deleted locally: stays in S3
    (third,) = box.sync_out(outputs)
    assert (third.transferred, third.skipped) == (2, 0)
    assert aws.keys("runs/") == [
        "runs/r1/ckpt/epoch1.pt",
        "runs/r1/ckpt/epoch2.pt",
        "runs/r1/keep-me.txt",
        "runs/r1/metrics.json",
    ]
    assert aws.get("runs/r1/metrics.json") == b'{"loss": 0.5}'
    assert aws.get("runs/r1/keep-me.txt") == b"was there before"
    assert_no_secrets(brev_sim, aws, box)


def test_periodic_output_syncs_keep_an_md5_cache_that_the_last_sync_removes(box, brev_sim, aws_connection):
    """A running step's periodic syncs keep the md5s of unchanged files on the instance (outside the outputs); a
    file rewritten with the same size is still uploaded; the step's last sync removes the cache."""
    aws = aws_connection
    out = box.home / "work/out"
    out.mkdir(parents=True)
    (out / "ckpt_001.pth").write_bytes(b"1" * 5000)
    outputs = {"work/out": f"s3://{aws.bucket}/runs/r2"}
    cache = box.home / md5_cache_path("work/out")
    (first,) = box.sync_out(outputs, final=False)
    assert first.transferred == 1
    assert cache.is_file()
    (out / "ckpt_001.pth").write_bytes(b"2" * 5000)
    (second,) = box.sync_out(outputs, final=False)
    assert (second.transferred, second.skipped) == (1, 0)
    assert aws.get("runs/r2/ckpt_001.pth") == b"2" * 5000
    (last,) = box.sync_out(outputs)
    assert (last.transferred, last.skipped) == (0, 1)
    assert not cache.exists()
    assert aws.keys("runs/r2/") == ["runs/r2/ckpt_001.pth"]  # the cache itself is never uploaded


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (validate_inputs, {"http://b/p": "d"}, "s3://"),
        (validate_inputs, {"s3://Bad_Bucket/p": "d"}, "Invalid bucket"),
        (validate_inputs, {"s3://bucket/p": "../etc"}, "'..'"),
        (validate_inputs, {"s3://bucket/p": "a/./b"}, "'.'"),
        (validate_inputs, {"s3://bucket/p": "d\x00"}, "NUL"),
        (validate_inputs, {"s3://bucket/p": "/"}, "is the root directory"),
        (validate_inputs, {"s3://bucket/p": "~"}, "is the remote home itself"),
        (validate_inputs, {"s3://bucket/a": "data", "s3://bucket/b": "~/data/x"}, "overlap"),
        (validate_inputs, ["s3://bucket/p"], "mapping"),
        (validate_outputs, {"out": "s3://bucket/a/../b"}, "'..'"),
        (validate_outputs, {"out": "s3://bucket/a", "/abs/out/": "s3://bucket/b", "out/": "s3://bucket/c"}, "overlap"),
    ],
)
def test_bad_shapes_are_refused_before_anything_runs(check, value, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        check(value)


def test_shapes_are_normalised():
    (pair,) = validate_inputs({"s3://my-bucket/data/set": "/mnt/data/"})
    assert (pair.uri, pair.bucket, pair.prefix, pair.directory) == (
        "s3://my-bucket/data/set/",
        "my-bucket",
        "data/set/",
        "/mnt/data",
    )
    assert [p.directory for p in validate_outputs({"~/out": "s3://b-1/x", "/out": "s3://b-1/y"})] == ["~/out", "/out"]
    assert validate_inputs(None) == [] and validate_inputs({}) == []


ROUND = "airflow-provider-brev transfer round"  # the first line of every transfer round's script
MIB = 1024 * 1024


@pytest.mark.parametrize("multipart", [True, False], ids=["multipart", "single-put"])
def test_a_checkpoint_saved_again_between_listing_and_upload_is_left_to_the_next_sync(
    box, brev_sim, aws_connection, multipart
):
    """The file is rewritten in place, same size, after the sync listed (and hashed) it and before its upload
    round (a simulator gate, not timing): it must not reach S3 with the md5 of what it held before."""
    aws = aws_connection
    size = 6 * MIB
    out = box.home / "work/out"
    out.mkdir(parents=True)
    (out / "model.pth").write_bytes(b"A" * size)
    resave = f"head -c {size} /dev/zero | tr '\\0' B > work/out/model.pth"
    brev_sim.set_fault("before_exec", match=ROUND, run=resave, times=1)
    outputs = {"work/out": f"s3://{aws.bucket}/runs/r3"}
    sizes = {"multipart_threshold": 5 * MIB if multipart else 64 * MIB, "part_size": 5 * MIB}

    (first,) = sync_outputs(
        box.hook, INSTANCE, outputs, aws_conn_id="aws_default", log=box.logger, final=False, **sizes
    )
    assert (first.transferred, first.skipped) == (0, 0)
    assert "changed while being uploaded" in box.lines.text and "model.pth" in box.lines.text
    assert aws.keys("runs/r3/") == []  # nothing with a stale md5 reached S3
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")

    (last,) = sync_outputs(box.hook, INSTANCE, outputs, aws_conn_id="aws_default", log=box.logger, **sizes)
    assert last.transferred == 1
    assert aws.get("runs/r3/model.pth") == b"B" * size
    # A later input sync of that prefix (a TAO resume from S3) verifies every byte against the recorded md5.
    (restored,) = box.sync_in({f"s3://{aws.bucket}/runs/r3/": "restored"})
    assert restored.transferred == 1
    assert (box.home / "restored/model.pth").read_bytes() == b"B" * size


def test_the_final_sync_of_a_file_rewritten_during_it_fails_naming_it(box, brev_sim, aws_connection):
    aws = aws_connection
    out = box.home / "work/out"
    out.mkdir(parents=True)
    (out / "status.json").write_text('{"epoch": 1}')
    brev_sim.set_fault("before_exec", match=ROUND, run="printf '{\"epoch\": 2}' > work/out/status.json", times=1)
    with pytest.raises(BrevTransferError, match=r"status\.json \(changed: rewritten since it was listed\)"):
        box.sync_out({"work/out": f"s3://{aws.bucket}/runs/r4"})
    assert aws.keys("runs/r4/") == []
