"""Transfer decisions in detail: what a round's report lines mean (``core/staging/reports.py``), when a file is
settled (``core/staging/rounds.py``: a size check even when the md5 is unknown), the parameter limits, and the
plan and task rules of ``core/staging/scripts.py``."""

from __future__ import annotations

import dataclasses
import re

import pytest

from airflow_provider_brev.core.protocol.remote_scripts import load_script
from airflow_provider_brev.core.staging.listing import build_list_script, md5_cache_path
from airflow_provider_brev.core.staging.paths import PathFilter
from airflow_provider_brev.core.staging.reports import (
    RemoteFile,
    TaskResult,
    TransferReport,
    parse_list_output,
    parse_transfer_output,
    redact,
)
from airflow_provider_brev.core.staging.rounds import (
    DEFAULT_URL_EXPIRES_IN,
    MAX_NAMED_FAILURES,
    MAX_URL_EXPIRES_IN,
    StagedDownload,
    StagedUpload,
    describe_failures,
    name_some,
    parse_keys,
    plan_uploads,
    select_downloads,
    transfer_settings,
)
from airflow_provider_brev.core.staging.scripts import (
    CHANGED,
    FAIL_CODES,
    MAX_SCRIPT_LENGTH,
    OP_GET,
    OP_PART,
    OP_PUT,
    PART_SUFFIX,
    XFER_BASE,
    TransferTask,
    build_plan,
    build_transfer_script,
    plan_path,
)
from airflow_provider_brev.core.staging.types import S3Object, StagingPair
from airflow_provider_brev.exceptions import BrevInvalidInputError

MD5 = "0" * 31 + "1"
#: What the listing prints of a file's identity: size/mtime/ctime/inode (checked again before an upload reads it).
SIG = "5/1700000000.5/1700000000.5/42"
URL = "https://bucket.s3.amazonaws.com/k?X-Amz-Signature=abc"


# ------------------------------------------------------------------------------------------------ reports


def test_ok_lines_need_five_fields_a_task_key_and_a_size():
    report = parse_transfer_output(
        [
            f"BREV_XFER_OK 1 10 {MD5} etag-1\r",
            "BREV_XFER_OK 2 10 - -",
            "BREV_XFER_OK 3 10 notmd5 bad/etag",
            "BREV_XFER_OK 4 x - -",  # size not a number
            "BREV_XFER_OK x.1 10 - -",  # not a task key
            "BREV_XFER_OK 5 10 -",  # four fields
            "BREV_XFER_OK 6 10 - - extra",  # six fields
            "BREV_XFER_OKAY 7 10 - -",
        ]
    )
    assert report.ok == {
        "1": TaskResult(10, MD5, "etag-1"),
        "2": TaskResult(10, None, None),
        "3": TaskResult(10, None, None),
    }
    assert not report.complete and report.error is None


def test_fail_lines_error_and_done():
    report = parse_transfer_output(
        [
            f"BREV_XFER_FAIL 1 curl exit 22 for {URL}",
            "BREV_XFER_FAIL 2 size",
            "BREV_XFER_FAIL 3",  # no code: ignored
            "BREV_XFER_FAIL x curl boom",  # not a task key
            "BREV_XFER_OK 4 1 - -",
            "BREV_XFER_FAIL 4 md5 late failure after the ok",
            "BREV_XFER_ERROR  curl is not installed on the instance ",
            "BREV_XFER_DONE 4",
        ]
    )
    assert report.failed == {"1": ("curl", "exit 22 for <url>"), "2": ("size", "")}
    assert "4" in report.ok and "4" not in report.failed
    assert report.error == "curl is not installed on the instance"
    assert report.complete
    assert report.outcome("4") is None
    assert report.outcome("1") == ("curl", "exit 22 for <url>")
    assert report.outcome("9") == ("error", "curl is not installed on the instance")
    assert TransferReport().outcome("9") == (
        "unreported",
        "no report from the instance (connection lost or script interrupted)",
    )
    assert parse_transfer_output(["BREV_XFER_FAIL 1 md5 x", "BREV_XFER_OK 1 2 - -"]).failed == {}


def test_list_lines():
    report = parse_list_output(
        [
            f"BREV_XFER_FILE 12 {MD5} {SIG} a b/c.txt\r",
            f"BREV_XFER_FILE 3 - {SIG} z.bin",
            f"BREV_XFER_FILE x - {SIG} bad-size",
            f"BREV_XFER_FILE 3 - {SIG}",
            "BREV_XFER_FILE 3 - no-signature z.bin",
            f"BREV_XFER_FILE 4 - {SIG} caf\ufffd",
            'BREV_XFER_MANIFEST {"source": "s3://b/"}',
            "BREV_XFER_UNREADABLE locked.bin",
            "BREV_XFER_LISTED 2 3",
        ]
    )
    assert report.files == [RemoteFile("a b/c.txt", 12, MD5, SIG), RemoteFile("z.bin", 3, None, SIG)]
    assert report.manifest_lines == ['{"source": "s3://b/"}']
    assert report.unreadable == ["locked.bin"]
    assert report.skipped_names == 4  # one not UTF-8 + three counted by the script
    assert report.complete and not report.missing_dir
    assert parse_list_output(["BREV_XFER_LISTED 0 x"]).skipped_names == 0
    assert parse_list_output(["BREV_XFER_LISTED"]).complete
    nodir = parse_list_output([" BREV_XFER_NODIR "])
    assert nodir.missing_dir and nodir.complete
    assert not parse_list_output(["BREV_XFER_FILE 1 - a"]).complete


def test_redaction():
    assert redact(None) == ""  # type: ignore[arg-type]
    assert redact(f"GET {URL} failed") == "GET <url> failed"
    assert redact("X-Amz-Credential=AKIA/x&Signature=s Expires=9 AWSAccessKeyId=k") == (
        "X-Amz-Credential=***&Signature=*** Expires=*** AWSAccessKeyId=***"
    )


# ------------------------------------------------------------------------------------------------- rounds


def _settings(**overrides):
    base = {
        "instance_name": "w-1",
        "s3_bucket": "bucket",
        "s3_prefix": "in",
        "remote_dir": "data",
        "include": None,
        "exclude": None,
        "max_attempts": 3,
        "concurrency": 4,
        "curl_retries": 0,
        "url_expires_in": DEFAULT_URL_EXPIRES_IN,
        "transfer_timeout": 60,
        "fail_on_empty": None,
    }
    return transfer_settings(**{**base, **overrides})


def test_transfer_settings_and_their_limits():
    settings = _settings(s3_bucket=" bucket ", instance_name=20261201, s3_prefix=2026)
    assert (settings.instance_name, settings.bucket, settings.prefix) == ("20261201", "bucket", "2026/")
    assert (settings.s3_uri, settings.remote) == ("s3://bucket/2026/", "20261201:data")
    assert (settings.max_attempts, settings.concurrency, settings.curl_retries) == (3, 4, 0)
    assert (settings.url_expires_in, settings.transfer_timeout, settings.fail_on_empty) == (3600, 60.0, False)
    assert DEFAULT_URL_EXPIRES_IN == 3600 and MAX_URL_EXPIRES_IN == 604800
    assert _settings(url_expires_in=MAX_URL_EXPIRES_IN).url_expires_in == MAX_URL_EXPIRES_IN
    assert _settings(url_expires_in=1).url_expires_in == 1
    assert _settings(concurrency=1, max_attempts=1).concurrency == 1
    assert _settings(fail_on_empty="true").fail_on_empty is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"url_expires_in": MAX_URL_EXPIRES_IN + 1}, "at most 604800 s"),
        ({"url_expires_in": 0}, "url_expires_in"),
        ({"concurrency": 0}, "concurrency"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"curl_retries": -1}, "curl_retries"),
        ({"s3_bucket": "  "}, "s3_bucket must be a non-empty bucket name"),
        ({"s3_bucket": None}, "s3_bucket must be a non-empty bucket name"),
        ({"remote_dir": "a\nb"}, "contains a tab, newline or NUL character"),
        ({"s3_prefix": "a\x00"}, "Invalid S3 prefix"),
        ({"include": ["a\tb"]}, "must not contain tabs"),
        ({"instance_name": "-bad"}, "Invalid instance name"),
        ({"transfer_timeout": 0}, "transfer_timeout"),
    ],
)
def test_bad_transfer_settings_are_refused(overrides, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        _settings(**overrides)


def test_explicit_keys():
    assert parse_keys(None) is None and parse_keys("") is None and parse_keys([]) is None
    assert parse_keys("a/b") == ["a/b"]
    assert parse_keys(("a", "b")) == ["a", "b"]
    for bad in (["a/"], [" "], [3]):
        with pytest.raises(BrevInvalidInputError, match="s3_keys must be object keys"):
            parse_keys(bad)


def test_failure_names_are_capped():
    assert MAX_NAMED_FAILURES == 20
    assert name_some(["a", "b"], limit=2) == "a, b"
    assert name_some(["a", "b", "c"], limit=2) == "a, b, and 1 more"
    assert describe_failures({"b": ("md5", "x"), "a": ("curl", "y")}) == "a (curl: y); b (md5: x)"


def test_a_download_settles_only_with_the_right_size_and_md5():
    report = TransferReport(ok={"1": TaskResult(5, MD5, None), "2": TaskResult(4, None, None)})
    assert StagedDownload("k", "f", 5, "e", md5=MD5).settle("1", report) is None
    assert StagedDownload("k", "f", 5, "e", md5="f" * 32).settle("1", report) == (
        "verify",
        "the reported size or md5 does not match S3",
    )
    # the md5 is unknown (None): the size alone must still match
    assert StagedDownload("k", "f", 5, "e").settle("2", report) == (
        "verify",
        "the reported size or md5 does not match S3",
    )
    assert StagedDownload("k", "f", 4, "e").settle("2", report) is None
    assert StagedDownload("k", "f", 4, "e").settle("3", report) == report.outcome("3")
    failed = TransferReport(failed={"1": ("curl", "x")}, ok={"1": TaskResult(5, MD5, None)})
    assert StagedDownload("k", "f", 5, "e").settle("1", TransferReport(failed={"1": ("curl", "x")})) == ("curl", "x")
    assert failed.outcome("1") is None
    assert StagedDownload("k", "f", 5, "e").settle("9", TransferReport(complete=True)) == report.outcome("9")


def test_an_md5_mismatch_suspects_the_etag_only_when_the_md5_came_from_it():
    assert StagedDownload("k", "f", 1, "e", md5=MD5, md5_from_etag=True).suspects_etag(("md5", "x"))
    assert not StagedDownload("k", "f", 1, "e", md5=MD5).suspects_etag(("md5", "x"))
    assert not StagedDownload("k", "f", 1, "e", md5=MD5, md5_from_etag=True).suspects_etag(("curl", "x"))


def test_selected_downloads_by_prefix_or_basename():
    objects = [S3Object("in/b.txt", 1, "e"), S3Object("in/a/x.pth", 2, "f"), S3Object("in/skip.tmp", 3, "g")]
    found, skipped = select_downloads(objects, "in/", PathFilter.create(exclude="*.tmp"))
    assert skipped == []
    assert [(d.key, d.relpath, d.size, d.etag) for d in found] == [
        ("in/a/x.pth", "a/x.pth", 2, "f"),
        ("in/b.txt", "b.txt", 1, "e"),
    ]
    assert [d.relpath for d in select_downloads([S3Object("x/y/z.bin", 1, "e")], None, PathFilter())[0]] == ["z.bin"]
    with pytest.raises(BrevInvalidInputError, match="Several keys map to the same file: z.bin"):
        select_downloads([S3Object("a/z.bin", 1, "e"), S3Object("b/z.bin", 1, "e")], None, PathFilter())
    # a key no safe path can hold is skipped and named, not the whole transfer failed
    found, skipped = select_downloads([S3Object("in/a", 1, "e"), S3Object("in/a/b", 1, "e")], "in/", PathFilter())
    assert ([d.key for d in found], skipped) == (["in/a/b"], ["in/a: also the directory of other keys"])
    found, skipped = select_downloads([S3Object("in/../x", 1, "e")], "in/", PathFilter())
    assert (found, skipped) == ([], ["in/../x: '../x' has an empty, '.' or '..' component"])


def test_parts_settle_one_by_one():
    upload = StagedUpload("f", "k", 10, MD5, multipart=True, part_size=4)
    assert upload.part_count == 3
    report = TransferReport(
        ok={"1.1": TaskResult(4, MD5, "e1"), "1.2": TaskResult(3, MD5, "e2"), "1.3": TaskResult(2, None, "e3")}
    )
    assert upload.settle_parts("1", report) == ("verify", "part 2: incomplete part report")
    assert upload.parts == {1: ("e1", MD5)}
    assert [n for n, _, _ in upload.missing_parts()] == [2, 3]
    report = TransferReport(ok={"1.2": TaskResult(4, MD5, ""), "1.3": TaskResult(2, MD5, "e3")}, failed={})
    assert upload.settle_parts("1", report) == ("verify", "part 2: incomplete part report")
    assert upload.parts == {1: ("e1", MD5), 3: ("e3", MD5)}
    failed = TransferReport(failed={"1.2": ("curl", "exit 7")})
    assert upload.settle_parts("1", failed) == ("curl", "part 2: exit 7")
    upload.restart()
    assert upload.parts == {} and upload.upload_id is None
    assert StagedUpload("f", "k", 10, MD5, multipart=False).part_count == 1
    assert StagedUpload("f", "k", 10, MD5, multipart=False).expected_etag() == MD5


def test_uploads_go_multipart_above_the_threshold():
    files = [RemoteFile("small", 10, MD5), RemoteFile("edge", 20, MD5), RemoteFile("big", 21, MD5)]
    files += [RemoteFile("nomd5", 1, None), RemoteFile("../x", 1, MD5)]
    uploads, bad = plan_uploads(files, "out/", multipart_threshold=20, part_size=8)
    assert [(u.relpath, u.key, u.multipart, u.part_size) for u in uploads] == [
        ("small", "out/small", False, 0),
        ("edge", "out/edge", False, 0),
        ("big", "out/big", True, 8),
    ]
    assert bad == ["nomd5: no md5", "'../x' has an empty, '.' or '..' component"]


# -------------------------------------------------------------------------------------------- scripts


def test_every_failure_code_is_one_the_transfer_script_prints():
    printed = set(re.findall(r'__x_fail "\$\w+" "(\w+) ', load_script("transfer")))
    assert set(FAIL_CODES) == printed
    assert CHANGED == "changed"
    assert (OP_GET, OP_PUT, OP_PART) == ("G", "S", "P")
    assert (PART_SUFFIX, XFER_BASE, MAX_SCRIPT_LENGTH) == (".airflow-brev-part", ".airflow-brev/xfer", 100 * 1024)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key": "a"}, "Invalid task key"),
        ({"op": "X"}, "Invalid task op"),
        ({"relpath": "/abs"}, "is absolute"),
        ({"file_size": -1}, "file_size must be a non-negative integer"),
        ({"offset": True}, "offset must be a non-negative integer"),
        ({"length": 1.5}, "length must be a non-negative integer"),
        ({"url": "ftp://x"}, "A presigned URL must be an http"),
        ({"url": None}, "A presigned URL must be an http"),
        ({"md5": "xyz"}, "Invalid md5"),
        ({"op": OP_PART, "length": 0, "file_size": 5}, "A part must have a positive length"),
    ],
)
def test_bad_tasks_are_refused(kwargs, message):
    base = {"key": "1", "op": OP_GET, "relpath": "f", "file_size": 1, "url": URL}
    with pytest.raises(ValueError, match=message):
        TransferTask(**{**base, **kwargs})


def test_the_plan_file():
    tasks = [
        TransferTask("1", OP_GET, "a b", 5, URL, md5=MD5),
        TransferTask("2", OP_PUT, "c", 6, URL, md5=MD5),
        TransferTask("3.1", OP_PART, "d", 10, URL, offset=4, length=4, content_md5=True),
        TransferTask("3.2", OP_PART, "d", 10, URL, offset=8, length=2),
        TransferTask("4", OP_GET, "e", 0, URL),
        TransferTask("5", OP_PART, "empty", 0, URL, length=0),  # the one part of an empty file
    ]
    lines = build_plan(tasks).splitlines()
    assert lines[0] == f"T\t1\tG\t5\t0\t5\t{MD5}\t-\ta b"  # no listing signature: a download
    assert lines[1] == "T\t2\tS\t6\t0\t6\tAAAAAAAAAAAAAAAAAAAAAQ==\t-\tc"
    assert lines[2] == "T\t3.1\tP\t10\t4\t4\t+\t-\td"
    assert lines[3] == "T\t3.2\tP\t10\t8\t2\t-\t-\td"
    assert lines[4] == "T\t4\tG\t0\t0\t0\t-\t-\te"
    assert lines[6] == f"U\t1\t{URL}"
    assert lines[-1] == "N\t6"
    with pytest.raises(ValueError, match="Task keys must be unique"):
        build_plan([tasks[0], tasks[0]])


def test_script_headers_and_ids():
    assert plan_path("r-1") == ".airflow-brev-xfer-r-1.plan"
    for bad in ("", "-x", "a b", None, "x" * 81):
        with pytest.raises(ValueError, match="Invalid transfer id"):
            plan_path(bad)  # type: ignore[arg-type]
    script = build_transfer_script(
        xfer_id="r-1", remote_dir="data", concurrency=3, curl_retries=2, parallel_downloads=False
    )
    assert "__X_P=3\n" in script and "__X_BATCH=0\n" in script
    assert "__X_RETRIES=2\n" in script and "__X_CONNECT_TIMEOUT=30\n" in script and "__X_STALL=120\n" in script
    assert (
        '__X_CURL=(curl --globoff --fail --silent --retry "$__X_RETRIES" --connect-timeout "$__X_CONNECT_TIMEOUT"\n'
        '          --speed-limit 1024 --speed-time "$__X_STALL")'
    ) in script
    assert "__X_BATCH=1\n" in build_transfer_script(xfer_id="r-1", remote_dir="data")
    for name, value in (("concurrency", 0), ("curl_retries", -1), ("connect_timeout", 0), ("stall_seconds", 0)):
        with pytest.raises(ValueError, match=f"{name} must be an integer >= "):
            build_transfer_script(xfer_id="r-1", remote_dir="data", **{name: value})
    with pytest.raises(ValueError, match="concurrency must be an integer"):
        build_transfer_script(xfer_id="r-1", remote_dir="data", concurrency=True)


def test_list_script_headers():
    assert md5_cache_path("data") == ".airflow-brev/md5/" + __import__("hashlib").sha256(b"data").hexdigest()[:32]
    plain = build_list_script("data")
    assert "__L_MD5=1\n" in plain and "__L_MAN=0\n" in plain and "__L_C=''\n" in plain and "__L_DROP=0\n" in plain
    assert "__L_SETTLE=2\n" in plain
    cached = build_list_script("data", md5_cache="keep", manifest=True, settle_seconds=5)
    assert f'__L_C="$HOME"/{md5_cache_path("data")}\n' in cached
    assert "__L_MAN=1\n" in cached and "__L_SETTLE=5\n" in cached and "__L_DROP=0\n" in cached
    assert "__L_DROP=1\n" in build_list_script("data", md5_cache="drop")
    assert "__L_C=''\n" in build_list_script("data", checksums=False, md5_cache="keep")
    assert "__L_MD5=0\n" in build_list_script("data", checksums=False)


@pytest.mark.parametrize(
    "value",
    [S3Object("a/b.txt", 3, "abc"), StagingPair("s3://bkt/in/", "bkt", "in/", "work/in")],
    ids=["S3Object", "StagingPair"],
)
def test_listed_objects_and_staging_pairs_are_hashable_values(value):
    """Rounds put objects in sets and compare listings; a pair is the key of its sync report: neither may change."""
    assert value in {value} and value == dataclasses.replace(value)
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, "changed")
