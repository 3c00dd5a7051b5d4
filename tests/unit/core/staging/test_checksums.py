"""Unit tests of ``airflow_provider_brev/core/staging/checksums.py``."""

from __future__ import annotations

import base64
import hashlib
import random

import pytest

from airflow_provider_brev.core.staging.checksums import (
    MD5_METADATA_KEY,
    MIB,
    S3_MAX_PART_SIZE,
    S3_MAX_PARTS,
    S3_MAX_SINGLE_PUT,
    S3_MIN_PART_SIZE,
    choose_part_size,
    is_md5,
    md5_hex_to_base64,
    multipart_etag,
    normalize_etag,
    split_parts,
)
from airflow_provider_brev.core.staging.reports import RemoteFile, parse_transfer_output
from airflow_provider_brev.core.staging.rounds import StagedUpload, plan_uploads
from airflow_provider_brev.core.staging.scripts import OP_PUT, TransferTask, build_transfer_script
from unit.core.staging.rounds_helpers import MD5_A, MD5_B
from unit.core.staging.scripts_helpers import BUCKET, listed_signature, md5, part_tasks


def test_parts_and_etags():
    assert split_parts(0, 5) == [(1, 0, 0)]
    assert split_parts(11, 5) == [(1, 0, 5), (2, 5, 5), (3, 10, 1)]
    assert choose_part_size(100 * MIB, 5 * MIB) == 5 * MIB
    grown = choose_part_size(10_001 * 5 * MIB, 5 * MIB)
    assert grown % MIB == 0 and len(split_parts(10_001 * 5 * MIB, grown)) <= 10_000
    assert (
        multipart_etag([md5(b"a"), md5(b"b")])
        == hashlib.md5(hashlib.md5(b"a").digest() + hashlib.md5(b"b").digest()).hexdigest() + "-2"
    )
    assert md5_hex_to_base64(md5(b"")) == "1B2M2Y8AsgTpgAmY7PhCfg=="


def test_upload_single_and_multipart_then_complete(s3, instance):
    rng = random.Random(3)
    small, big = rng.randbytes(10_000), rng.randbytes(11 * MIB + 5)
    src = instance.home / "results"
    (src / "nested").mkdir(parents=True)
    (src / "nested/small.bin").write_bytes(small)
    (src / "big.bin").write_bytes(big)
    created = s3.create_multipart_upload(Bucket=BUCKET, Key="up1/big.bin")
    upload_id = created["UploadId"]
    tasks = [
        TransferTask(
            key="0",
            op=OP_PUT,
            relpath="nested/small.bin",
            file_size=len(small),
            md5=md5(small),
            url=s3.generate_presigned_url(
                "put_object",
                Params={"Bucket": BUCKET, "Key": "up1/nested/small.bin", "ContentMD5": md5_hex_to_base64(md5(small))},
            ),
        )
    ]
    part_size = 5 * MIB
    parts = split_parts(len(big), part_size)
    tasks += part_tasks(s3, "up1/big.bin", upload_id, "big.bin", len(big), parts, prefix="1", content_md5=True)
    instance.ship("u1", tasks)
    done = instance.run(build_transfer_script(xfer_id="u1", remote_dir="results", concurrency=2))
    report = parse_transfer_output(done.stdout.splitlines())
    assert report.complete and not report.failed
    assert report.ok["0"].etag == md5(small)
    part_md5s = []
    for number, offset, length in split_parts(len(big), part_size):
        result = report.ok[f"1.{number}"]
        assert (result.size, result.md5) == (length, md5(big[offset : offset + length]))
        assert result.etag == result.md5
        part_md5s.append(result.md5)
    s3.complete_multipart_upload(
        Bucket=BUCKET,
        Key="up1/big.bin",
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": f'"{m}"'} for n, m in enumerate(part_md5s)]},
    )
    head = s3.head_object(Bucket=BUCKET, Key="up1/big.bin")
    assert head["ETag"].strip('"') == multipart_etag(part_md5s)
    assert s3.get_object(Bucket=BUCKET, Key="up1/big.bin")["Body"].read() == big
    assert s3.get_object(Bucket=BUCKET, Key="up1/nested/small.bin")["Body"].read() == small
    argv = instance.curl_log.read_text()
    assert "X-Amz" not in argv and "http://" not in argv
    assert f"Content-MD5: {md5_hex_to_base64(md5(small))}" in argv
    for m in part_md5s:  # each part carried its own Content-MD5 computed on the instance
        assert f"Content-MD5: {md5_hex_to_base64(m)}" in argv
    assert instance.leftovers() == []
    assert (src / "big.bin").read_bytes() == big  # sources untouched


def test_a_part_of_a_file_rewritten_after_an_earlier_part_was_read_fails_as_changed(s3, instance):
    (instance.home / "r").mkdir()
    (instance.home / "r/big").write_bytes(b"A" * (6 * MIB))
    signature = listed_signature(instance, "r", "big")
    rewrite = f"echo B >> {instance.home}/r/big; truncate -s {6 * MIB} {instance.home}/r/big"  # same size, in place
    once = instance.home / "rewritten"
    instance.set_curl(pre=f"[[ $* == *-T* && ! -e {once} ]] && touch {once} && {{ {rewrite}; }}")
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="up4/big")["UploadId"]
    tasks = part_tasks(s3, "up4/big", upload_id, "big", 6 * MIB, split_parts(6 * MIB, 5 * MIB), signature=signature)
    instance.ship("u4", tasks)
    done = instance.run(build_transfer_script(xfer_id="u4", remote_dir="r", concurrency=1))
    report = parse_transfer_output(done.stdout.splitlines())
    assert "0.1" in report.ok  # read and sent before the file changed: its bytes are the listed ones
    assert report.failed["0.2"] == ("changed", "rewritten since it was listed")
    s3.abort_multipart_upload(Bucket=BUCKET, Key="up4/big", UploadId=upload_id)


def test_s3_limits():
    assert MD5_METADATA_KEY == "airflow-brev-md5"
    assert (MIB, S3_MIN_PART_SIZE, S3_MAX_PART_SIZE, S3_MAX_PARTS) == (1048576, 5 * 1048576, 5 * 1024 * 1048576, 10000)
    assert S3_MAX_SINGLE_PUT == 5 * 1024 * 1048576


def test_md5_and_etag_rules():
    md5 = hashlib.md5(b"x").hexdigest()
    assert is_md5(md5) and not is_md5(md5.upper()) and not is_md5(md5[:-1]) and not is_md5(None)
    assert not is_md5(b"0" * 32)
    assert normalize_etag('"ABC-2"') == "abc-2"
    assert normalize_etag(None) == ""
    assert md5_hex_to_base64(md5) == base64.b64encode(bytes.fromhex(md5)).decode()
    with pytest.raises(ValueError, match="not an md5"):
        md5_hex_to_base64("zz")
    parts = [hashlib.md5(b"a").hexdigest(), hashlib.md5(b"b").hexdigest()]
    digest = hashlib.md5(bytes.fromhex(parts[0]) + bytes.fromhex(parts[1])).hexdigest()
    assert multipart_etag(parts) == f"{digest}-2"


def test_part_arithmetic():
    assert split_parts(10, 4) == [(1, 0, 4), (2, 4, 4), (3, 8, 2)]
    assert split_parts(8, 4) == [(1, 0, 4), (2, 4, 4)]
    assert split_parts(0, 4) == [(1, 0, 0)]
    with pytest.raises(ValueError, match="part_size must be positive"):
        split_parts(10, 0)
    assert choose_part_size(8 * MIB * S3_MAX_PARTS, 8 * MIB) == 8 * MIB  # exactly 10,000 parts fit
    assert choose_part_size(8 * MIB * S3_MAX_PARTS + 1, 8 * MIB) == 9 * MIB
    assert choose_part_size(100 * MIB * S3_MAX_PARTS, 8 * MIB) == 100 * MIB


def test_uploads_are_planned_with_multipart_above_the_threshold():
    files = [RemoteFile("big.bin", 12 * MIB, MD5_A), RemoteFile("small.txt", 10, MD5_B), RemoteFile("x", 1, None)]
    uploads, bad = plan_uploads(files, "out/", multipart_threshold=5 * MIB, part_size=5 * MIB)
    assert [(u.key, u.multipart, u.part_size, u.part_count) for u in uploads] == [
        ("out/big.bin", True, 5 * MIB, 3),
        ("out/small.txt", False, 0, 1),
    ]
    assert bad == ["x: no md5"]
    (huge,), _ = plan_uploads([RemoteFile("h", 10**12, MD5_A)], "", multipart_threshold=0, part_size=5 * MIB)
    assert huge.part_count <= S3_MAX_PARTS and huge.part_size % MIB == 0


def test_multipart_parts_settle_one_by_one():
    upload = StagedUpload("big.bin", "out/big.bin", 11 * MIB, MD5_A, multipart=True, part_size=5 * MIB)
    report = parse_transfer_output(
        [f"BREV_XFER_OK 0.1 {5 * MIB} {MD5_A} e1", "BREV_XFER_FAIL 0.2 curl exit 56", f"BREV_XFER_OK 0.3 10 {MD5_B} e3"]
    )
    assert upload.settle_parts("0", report) == ("curl", "part 2: exit 56")
    assert upload.parts == {1: ("e1", MD5_A)}  # part 3 reported the wrong length: not kept
    assert [n for n, _, _ in upload.missing_parts()] == [2, 3]
    report = parse_transfer_output([f"BREV_XFER_OK 0.2 {5 * MIB} {MD5_B} e2", f"BREV_XFER_OK 0.3 {MIB} {MD5_A} e3"])
    assert upload.settle_parts("0", report) is None
    assert upload.expected_etag() == multipart_etag([MD5_A, MD5_B, MD5_A])
    upload.restart()
    assert (upload.upload_id, upload.parts, len(upload.missing_parts())) == (None, {}, 3)


def test_the_md5_metadata_key_is_found_again_after_s3_stores_it(s3):
    # S3 sends user metadata as x-amz-meta-* headers and answers their names in lower case: a key with capitals
    # would never be found again on the object it was written to
    s3.put_object(Bucket=BUCKET, Key="meta/x", Body=b"x", Metadata={MD5_METADATA_KEY: md5(b"x")})
    assert s3.head_object(Bucket=BUCKET, Key="meta/x")["Metadata"] == {MD5_METADATA_KEY: md5(b"x")}


def test_an_etag_is_opaque_text_only_its_quotes_are_taken_off():
    assert normalize_etag('"Xa9-X"') == "xa9-x"


def test_parts_may_be_one_byte_and_exactly_the_maximum_count_of_an_odd_part_size_is_kept():
    assert split_parts(3, 1) == [(1, 0, 1), (2, 1, 1), (3, 2, 1)]
    odd = 5 * MIB + 1  # not whole MiB: growing it would round it up
    assert choose_part_size(odd * S3_MAX_PARTS, odd) == odd
    assert choose_part_size(odd * S3_MAX_PARTS + 1, odd) == 6 * MIB


def test_a_file_over_5_gib_is_uploaded_in_parts_whatever_the_threshold():
    gib = 1024 * MIB  # S3 takes at most 5 GiB in one PUT
    files = [RemoteFile("at-limit", 5 * gib, MD5_A), RemoteFile("over", 5 * gib + 1, MD5_B)]
    uploads, _ = plan_uploads(files, "", multipart_threshold=10 * gib, part_size=8 * MIB)
    assert [(u.key, u.multipart) for u in uploads] == [("at-limit", False), ("over", True)]
