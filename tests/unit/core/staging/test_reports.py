"""Transfer decisions in detail: what a round's report lines mean (``core/staging/reports.py``), when a file is
settled (``core/staging/rounds.py``: a size check even when the md5 is unknown), the parameter limits, and the
plan and task rules of ``core/staging/scripts.py``."""

from __future__ import annotations

from airflow_provider_brev.core.staging.listing import build_list_script
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
    StagedDownload,
    StagedUpload,
    plan_uploads,
)
from unit.core.staging.reports_helpers import MD5, URL
from unit.core.staging.rounds_helpers import MD5_A, MD5_B
from unit.core.staging.scripts_helpers import md5

#: What the listing prints of a file's identity: size/mtime/ctime/inode (checked again before an upload reads it).
SIG = "5/1700000000.5/1700000000.5/42"


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


def test_list_script_lists_nested_files_with_sizes_md5_and_patterns(instance):
    root = instance.home / "out dir"
    files = {
        "model.pth": b"weights",
        "logs/train.log": b"log\n",
        "logs/keep.txt": b"keep\n",
        "a b/c d.json": b"{}",
        "empty": b"",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "link.pth").symlink_to(root / "model.pth")  # symlinks are not followed
    (root / "bad\nname").write_bytes(b"x")
    everything = parse_list_output(instance.run(build_list_script("out dir")).stdout.splitlines())
    assert everything.complete and not everything.missing_dir and everything.skipped_names == 1
    assert [(f.relpath, f.size, f.md5) for f in everything.files] == sorted(
        (rel, len(data), md5(data)) for rel, data in files.items()
    )
    selected = PathFilter.create(include=["*.pth", "logs/*", "a b/*"], exclude="*.log")
    some = parse_list_output(instance.run(build_list_script("~/out dir", selected)).stdout.splitlines())
    assert [f.relpath for f in some.files] == ["a b/c d.json", "logs/keep.txt", "model.pth"]
    assert [f.relpath for f in some.files] == sorted(rel for rel in files if selected.matches(rel))
    fast = parse_list_output(instance.run(build_list_script("out dir", checksums=False)).stdout.splitlines())
    assert {f.md5 for f in fast.files} == {None}
    missing = parse_list_output(instance.run(build_list_script("nope")).stdout.splitlines())
    assert missing.missing_dir and not missing.files


def test_parse_transfer_output_is_robust():
    report = parse_transfer_output(
        [
            "noise",
            "BREV_XFER_FAIL 1 curl exit 7 (HTTP 000)",
            "BREV_XFER_OK 1 5 " + md5(b"hello") + " -",  # a later success wins (a re-run after a drop)
            "BREV_XFER_OK 2 5 - abc-3",
            "BREV_XFER_OK bad 5 - -",
            "BREV_XFER_OK 3 notanumber - -",
            "BREV_XFER_FAIL 4 md5 got https://x/y?X-Amz-Signature=s3cr3t",
            "BREV_XFER_DONE 4",
        ]
    )
    assert report.complete
    assert report.ok["1"].md5 == md5(b"hello") and report.ok["2"].etag == "abc-3"
    assert set(report.ok) == {"1", "2"}
    assert report.failed == {"4": ("md5", "got <url>")}
    assert report.outcome("1") is None
    assert report.outcome("9") == ("unreported", "no report from the instance (connection lost or script interrupted)")


def test_redact_removes_urls_and_signature_parameters():
    text = "failed https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA/x&X-Amz-Signature=abc and X-Amz-Signature=def"
    assert redact(text) == "failed <url> and X-Amz-Signature=***"
    assert redact("AWSAccessKeyId=AKIAX&Signature=zz") == "AWSAccessKeyId=***&Signature=***"


def test_a_download_settles_only_with_the_expected_size_and_md5():
    item = StagedDownload("k", "a.bin", 1, MD5_A, md5=MD5_A, md5_from_etag=True)
    assert item.settle("0", parse_transfer_output([f"BREV_XFER_OK 0 1 {MD5_A} -"])) is None
    assert item.settle("0", parse_transfer_output([f"BREV_XFER_OK 0 1 {MD5_B} -"]))[0] == "verify"
    failed = item.settle("0", parse_transfer_output([f"BREV_XFER_FAIL 0 md5 got {MD5_B}"]))
    assert failed == ("md5", f"got {MD5_B}") and item.suspects_etag(failed)
    assert item.settle("0", parse_transfer_output(["BREV_XFER_DONE 0"]))[0] == "unreported"
    size_only = StagedDownload("k", "a.bin", 1, "abc-2")
    assert size_only.settle("0", parse_transfer_output([f"BREV_XFER_OK 0 1 {MD5_B} -"])) is None
