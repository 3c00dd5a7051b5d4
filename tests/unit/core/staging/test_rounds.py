"""The pure decisions of transfer rounds: parameters, what is transferred where, when a file is settled."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.staging.checksums import MIB, S3_MAX_PARTS, multipart_etag
from airflow_provider_brev.core.staging.paths import PathFilter, printable
from airflow_provider_brev.core.staging.reports import RemoteFile, parse_transfer_output
from airflow_provider_brev.core.staging.rounds import (
    StagedDownload,
    StagedUpload,
    describe_failures,
    name_some,
    parse_keys,
    plan_uploads,
    select_downloads,
    task_order,
    transfer_settings,
)
from airflow_provider_brev.core.staging.types import S3Object
from airflow_provider_brev.exceptions import BrevInvalidInputError

MD5_A = "0cc175b9c0f1b6a831c399e269772661"
MD5_B = "92eb5ffee6ae2fec3ad71c777531578f"
GOOD = {
    "instance_name": "gpu-box",
    "s3_bucket": " bucket ",
    "s3_prefix": 20260101,  # a native-rendered "{{ ds_nodash }}"
    "remote_dir": "~/data",
    "include": "*.bin",
    "exclude": None,
    "max_attempts": "3",
    "concurrency": 2,
    "curl_retries": 0,
    "url_expires_in": 3600,
    "transfer_timeout": "60",
    "fail_on_empty": "false",
}


def test_settings_are_normalised():
    s = transfer_settings(**GOOD)
    assert (s.bucket, s.prefix, s.max_attempts, s.transfer_timeout, s.fail_on_empty) == (
        "bucket",
        "20260101/",
        3,
        60.0,
        False,
    )
    assert s.s3_uri == "s3://bucket/20260101/" and s.remote == "gpu-box:~/data"
    assert s.path_filter == PathFilter.create("*.bin")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"instance_name": "Bad Name"}, "Invalid instance name"),
        ({"s3_bucket": ""}, "s3_bucket"),
        ({"remote_dir": " "}, "remote_dir: A directory on the instance must be a non-empty path"),
        ({"remote_dir": "~"}, "remote_dir: The directory '~' is the remote home itself"),
        ({"remote_dir": "."}, "remote_dir: The directory '.' is the remote home itself"),
        ({"remote_dir": "/"}, "remote_dir: The directory '/' is the root directory"),
        ({"remote_dir": "~/.airflow-brev"}, "remote_dir: .*the provider's own working state"),
        ({"include": "[a\\b]"}, "bracket expression"),
        ({"max_attempts": 0}, "max_attempts must be a whole number >= 1"),
        ({"max_attempts": 2.5}, "max_attempts must be a whole number"),
        ({"concurrency": True}, "concurrency"),
        ({"curl_retries": "x"}, "curl_retries must be a whole number >= 0"),
        ({"url_expires_in": 7 * 24 * 3600 + 1}, "7 days"),
        ({"transfer_timeout": "soon"}, "transfer_timeout"),
        ({"transfer_timeout": float("nan")}, "transfer_timeout must be a positive number"),
        ({"fail_on_empty": "perhaps"}, "fail_on_empty must be a boolean"),
    ],
)
def test_bad_settings_are_refused(override, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        transfer_settings(**{**GOOD, **override})


def test_keys_and_booleans():
    assert parse_keys(None) is None and parse_keys([]) is None and parse_keys("") is None
    assert parse_keys("a/b") == ["a/b"]
    with pytest.raises(BrevInvalidInputError, match="not ending in"):
        parse_keys(["a/"])


def test_task_order_and_failure_descriptions():
    assert sorted(["10", "9", "3.2", "3.10", "3.1"], key=task_order) == ["3.1", "3.2", "3.10", "9", "10"]
    failures = {f"f{n:02}": ("curl", "exit 22") for n in range(23)}
    text = describe_failures(failures)
    assert text.startswith("f00 (curl: exit 22); f01 (curl: exit 22)")
    assert text.endswith("f19 (curl: exit 22); and 3 more")


def test_downloads_land_relative_to_the_prefix_or_by_basename():
    objects = [S3Object("in/b/x.bin", 2, MD5_B), S3Object("in/a.bin", 1, MD5_A), S3Object("in/a.txt", 1, MD5_A)]
    selected, skipped = select_downloads(objects, "in/", PathFilter.create("*.bin"))
    assert [(d.relpath, d.key) for d in selected] == [("a.bin", "in/a.bin"), ("b/x.bin", "in/b/x.bin")]
    assert skipped == []
    assert [d.relpath for d in select_downloads(objects[:2], None, PathFilter())[0]] == ["a.bin", "x.bin"]
    with pytest.raises(BrevInvalidInputError, match="Several keys map to the same file: x.bin"):
        select_downloads([S3Object("p/x.bin", 1, ""), S3Object("q/x.bin", 1, "")], None, PathFilter())


def test_keys_no_safe_path_can_hold_are_skipped_and_named_not_fatal():
    objects = [
        S3Object("in/ok.txt", 1, MD5_A),
        S3Object("in/junk//x", 1, MD5_A),
        S3Object("in/../escape", 1, MD5_A),
        S3Object("in/./dot", 1, MD5_A),
        S3Object("in/tab\there", 1, MD5_A),
        S3Object("in/a", 1, MD5_A),  # a file and the "directory" of in/a/b
        S3Object("in/a/b", 1, MD5_B),
    ]
    selected, skipped = select_downloads(objects, "in/", PathFilter())
    assert [d.relpath for d in selected] == ["a/b", "ok.txt"]
    assert skipped == [
        "in/junk//x: 'junk//x' has an empty, '.' or '..' component",
        "in/../escape: '../escape' has an empty, '.' or '..' component",
        "in/./dot: './dot' has an empty, '.' or '..' component",
        "in/tab\there: 'tab\\there' contains a tab, newline or NUL character",
        "in/a: also the directory of other keys",
    ]


def test_names_in_messages_never_carry_control_characters():
    assert printable("ok/name é.txt") == "ok/name é.txt"
    assert printable("evil\x1b[2Jname\x07\x7f\x9b") == "evil\\x1b[2Jname\\x07\\x7f\\x9b"
    assert printable("invoice\u202efdp.exe") == "invoice\\u202efdp.exe"  # a bidi override: reads as "exe.pdf"
    assert name_some(["a\x1b[31m", "b"]) == "a\\x1b[31m, b"
    assert describe_failures({"x\x1b]0;t\x07": ("curl", "exit 22")}) == "x\\x1b]0;t\\x07 (curl: exit 22)"


def test_a_download_settles_only_with_the_expected_size_and_md5():
    item = StagedDownload("k", "a.bin", 1, MD5_A, md5=MD5_A, md5_from_etag=True)
    assert item.settle("0", parse_transfer_output([f"BREV_XFER_OK 0 1 {MD5_A} -"])) is None
    assert item.settle("0", parse_transfer_output([f"BREV_XFER_OK 0 1 {MD5_B} -"]))[0] == "verify"
    failed = item.settle("0", parse_transfer_output([f"BREV_XFER_FAIL 0 md5 got {MD5_B}"]))
    assert failed == ("md5", f"got {MD5_B}") and item.suspects_etag(failed)
    assert item.settle("0", parse_transfer_output(["BREV_XFER_DONE 0"]))[0] == "unreported"
    size_only = StagedDownload("k", "a.bin", 1, "abc-2")
    assert size_only.settle("0", parse_transfer_output([f"BREV_XFER_OK 0 1 {MD5_B} -"])) is None


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
