"""S3StagingHook against a real moto S3 server: listing, presigned URLs used over real HTTP, multipart uploads
completed, verified, aborted, and what a download then expects.

The instance side is played by plain HTTP requests to the presigned URLs; the reports the instance would print
are parsed by the real parser, so the hook sees exactly what a transfer round gives it.
"""

from __future__ import annotations

import base64
import hashlib
import random
import subprocess
import sys
import urllib.request

import pytest

from airflow_provider_brev.core.staging.checksums import MD5_METADATA_KEY, MIB
from airflow_provider_brev.core.staging.paths import PathFilter
from airflow_provider_brev.core.staging.reports import parse_transfer_output
from airflow_provider_brev.core.staging.rounds import StagedUpload
from airflow_provider_brev.core.staging.scripts import OP_GET, OP_PART, OP_PUT
from airflow_provider_brev.core.staging.types import S3Object
from airflow_provider_brev.exceptions import BrevInvalidInputError, BrevTransferError
from airflow_provider_brev.hooks import s3_staging
from airflow_provider_brev.hooks.s3_staging import S3StagingHook


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def http(url: str, data: bytes | None = None, content_md5: str | None = None) -> tuple[bytes, str]:
    """GET (no data) or PUT ``data`` to a presigned URL; returns the body and the bare ETag."""
    headers = {"Content-Type": "application/octet-stream"}
    if content_md5:
        headers["Content-MD5"] = base64.b64encode(bytes.fromhex(content_md5)).decode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "PUT", headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read(), str(response.headers.get("ETag", "")).strip('"')


@pytest.fixture
def hook(aws_connection) -> S3StagingHook:
    return S3StagingHook(bucket=aws_connection.bucket, url_expires_in=300)


def multipart(key: str, data: bytes) -> StagedUpload:
    return StagedUpload(
        relpath=key.rsplit("/", 1)[-1], key=key, size=len(data), md5=md5(data), multipart=True, part_size=5 * MIB
    )


def send_parts(tasks, data: bytes, *, lie_about: int | None = None) -> list[str]:
    """Upload each part task; returns the report lines the instance would print (``lie_about``: a part whose
    reported md5 is wrong, as if the file changed between listing and reading)."""
    lines = []
    for task in tasks:
        chunk = data[task.offset : task.offset + task.length]
        _, etag = http(task.url, chunk, md5(chunk) if task.content_md5 else None)
        reported = md5(b"other") if task.key.endswith(f".{lie_about}") else md5(chunk)
        lines.append(f"BREV_XFER_OK {task.key} {len(chunk)} {reported} {etag}")
    return lines


def test_listing_applies_filters_and_maps_keys_to_paths(aws_connection, hook):
    aws = aws_connection
    for key, data in {
        "in/a.txt": b"a",
        "in/sub/b.bin": b"bb",
        "in/sub/c.tmp": b"c",
        "in/dir/": b"",
        "x/a.txt": b"x",
    }.items():
        aws.put(key, data)
    items = hook.list_downloads(prefix="in/", keys=None, path_filter=PathFilter.create(exclude="*.tmp"))
    assert [(i.key, i.relpath, i.size, i.md5, i.md5_from_etag) for i in items] == [
        ("in/a.txt", "a.txt", 1, md5(b"a"), True),
        ("in/sub/b.bin", "sub/b.bin", 2, md5(b"bb"), True),
    ]
    by_key = hook.list_downloads(prefix="", keys=["in/sub/b.bin", "x/a.txt"], path_filter=PathFilter())
    assert [(i.relpath, i.size) for i in by_key] == [("a.txt", 1), ("b.bin", 2)]
    with pytest.raises(BrevTransferError, match=r"nope/x \(404\)"):
        hook.list_downloads(prefix="", keys=["in/a.txt", "nope/x"], path_filter=PathFilter())
    with pytest.raises(BrevInvalidInputError, match="same file: a.txt"):
        hook.list_downloads(prefix="", keys=["in/a.txt", "x/a.txt"], path_filter=PathFilter())

    (task,) = hook.download_tasks({"0": items[1]})
    assert (task.op, task.relpath, task.md5) == (OP_GET, "sub/b.bin", md5(b"bb"))
    assert http(task.url)[0] == b"bb"


def test_the_fast_page_reader_lists_what_botocores_own_parser_lists(aws_connection, hook, monkeypatch):
    """``list_prefix`` reads pages with the C XML parser (the staging client's ``before-parse`` hook): over several
    pages, with non-ASCII and URL-escaped keys and a directory marker, it finds what a plain client finds."""
    aws = aws_connection
    keys = [f"ds/k{n:04d}" for n in range(1005)] + ["ds/\u00e9t\u00e9 1.txt", "ds/a%20b", "ds/<x>&y", "ds/", "other/k"]
    for key in keys:
        aws.client.put_object(Bucket=aws.bucket, Key=key, Body=key.encode())
    plain = [
        S3Object(o["Key"], o["Size"], o["ETag"].strip('"'))
        for page in aws.client.get_paginator("list_objects_v2").paginate(Bucket=aws.bucket, Prefix="ds/")
        for o in page.get("Contents", [])
        if not o["Key"].endswith("/")
    ]
    assert len(plain) == 1008
    pages: list[int] = []  # the hook's pages went through the fast reader (two pages of the prefix)
    read = s3_staging.split_contents
    monkeypatch.setattr(s3_staging, "split_contents", lambda body: pages.append(len(body)) or read(body))
    assert hook.list_prefix("ds/") == plain
    assert len(pages) == 2
    listed = {obj.key: obj for obj in hook.list_prefix("ds/")}
    assert [listed[k] for k in keys[-5:-2]] == [S3Object(k, len(k.encode()), md5(k.encode())) for k in keys[-5:-2]]


def test_single_put_is_verified_and_compared_with_what_exists(aws_connection, hook):
    data = b"payload\n"
    upload = StagedUpload(relpath="p.txt", key="out/p.txt", size=len(data), md5=md5(data), multipart=False)
    (task,) = hook.upload_tasks({"0": upload})
    assert (task.op, task.md5, task.file_size) == (OP_PUT, md5(data), len(data))
    report = parse_transfer_output(
        [f"BREV_XFER_OK 0 {len(data)} - {http(task.url, data, md5(data))[1]}", "BREV_XFER_DONE 1"]
    )
    assert report.outcome("0") is None
    assert hook.finish_upload(upload) is None
    assert aws_connection.get("out/p.txt") == data

    changed = StagedUpload(relpath="p.txt", key="out/p.txt", size=len(data), md5=md5(b"payload!"), multipart=False)
    other = StagedUpload(relpath="q.txt", key="out/q.txt", size=1, md5=md5(b"q"), multipart=False)
    same = StagedUpload(relpath="p.txt", key="out/p.txt", size=len(data), md5=md5(data), multipart=False)
    assert hook.compare_existing([same, other], "out/") == ([same], [])
    assert hook.compare_existing([changed], "out/") == ([], [changed])

    assert (
        hook.finish_upload(changed) == f"ETag {md5(data)} does not match the md5 of what was sent ({md5(b'payload!')})"
    )
    assert aws_connection.keys("out/") == []  # a wrong object is not left behind


def test_multipart_keeps_finished_parts_completes_and_is_verifiable_by_downloads(aws_connection, hook):
    aws = aws_connection
    data = random.Random(3).randbytes(11 * MIB)
    upload = multipart("ckpt/model.bin", data)
    tasks = hook.upload_tasks({"0": upload})
    assert [(t.key, t.op, t.offset, t.length) for t in tasks] == [
        ("0.1", OP_PART, 0, 5 * MIB),
        ("0.2", OP_PART, 5 * MIB, 5 * MIB),
        ("0.3", OP_PART, 10 * MIB, MIB),
    ]
    assert hook.open_uploads == {"ckpt/model.bin": upload.upload_id}
    lines = send_parts(tasks, data)
    assert upload.settle_parts("0", parse_transfer_output([lines[0], lines[2]])) == (
        "unreported",
        "part 2: no report from the instance (connection lost or script interrupted)",
    )
    assert sorted(upload.parts) == [1, 3]
    first_id = upload.upload_id
    retry = hook.upload_tasks({"0": upload})
    assert [t.key for t in retry] == ["0.2"] and upload.upload_id == first_id  # same upload, the missing part
    assert upload.settle_parts("0", parse_transfer_output(send_parts(retry, data))) is None
    assert hook.finish_upload(upload) is None
    assert hook.open_uploads == {} and upload.upload_id is None

    head = aws.client.head_object(Bucket=aws.bucket, Key="ckpt/model.bin")
    assert head["ETag"].strip('"').endswith("-3") and head["Metadata"][MD5_METADATA_KEY] == md5(data)
    assert aws.get("ckpt/model.bin") == data
    (item,) = hook.list_downloads(prefix="ckpt/", keys=None, path_filter=PathFilter())
    assert (item.md5, item.md5_from_etag) == (md5(data), False)  # from the metadata, not the ETag
    existing = S3Object("ckpt/model.bin", len(data), head["ETag"].strip('"'))
    assert hook.is_identical(multipart("ckpt/model.bin", data), existing)
    assert not hook.is_identical(multipart("ckpt/model.bin", data[::-1]), existing)


def test_a_multipart_upload_that_fails_verification_is_deleted_and_aborted(aws_connection, hook):
    aws = aws_connection
    data = random.Random(4).randbytes(6 * MIB)
    upload = multipart("bad/model.bin", data)
    lines = send_parts(hook.upload_tasks({"0": upload}), data, lie_about=2)
    assert upload.settle_parts("0", parse_transfer_output(lines)) is None
    problem = hook.finish_upload(upload)
    assert problem is not None and problem.startswith("ETag ") and "does not match" in problem
    assert aws.keys("bad/") == []
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")
    assert (upload.upload_id, upload.parts, hook.open_uploads) == (None, {}, {})  # the next round starts over


def test_abort_open_uploads_stops_every_unfinished_upload(aws_connection, hook):
    aws = aws_connection
    data = random.Random(5).randbytes(6 * MIB)
    uploads = {"0": multipart("k/a.bin", data), "1": multipart("k/b.bin", data)}
    send_parts(hook.upload_tasks(uploads)[:1], data)  # one part of one file arrived
    assert len(aws.client.list_multipart_uploads(Bucket=aws.bucket)["Uploads"]) == 2
    hook.abort_open_uploads()
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")
    assert hook.open_uploads == {}


def test_kms_objects_are_verified_by_size(aws_connection, hook):
    aws = aws_connection
    aws.client.put_object(Bucket=aws.bucket, Key="kms/a.bin", Body=b"secret", ServerSideEncryption="aws:kms")
    aws.put("plain/a.bin", b"plain")
    (kms,) = hook.list_downloads(prefix="kms/", keys=None, path_filter=PathFilter())
    (plain,) = hook.list_downloads(prefix="plain/", keys=None, path_filter=PathFilter())
    assert not hook.recheck_md5_source(plain) and plain.md5 == md5(b"plain")
    assert hook.recheck_md5_source(kms) and (kms.md5, kms.md5_from_etag) == (None, False)
    wrong = StagedUpload(relpath="a.bin", key="kms/a.bin", size=6, md5=md5(b"SECRET"), multipart=False)
    assert hook.verify_upload(wrong) is None  # a KMS ETag says nothing about the content: size only
    assert hook.verify_upload(StagedUpload("a.bin", "kms/a.bin", 7, md5(b"secret"), False)) == (
        "S3 holds 6 bytes, expected 7"
    )


def test_importing_the_hook_module_does_not_import_boto3():
    code = (
        "import sys, airflow_provider_brev.hooks.s3_staging; "
        "bad = [m for m in ('boto3', 'botocore', 'airflow.providers.amazon.aws.hooks.s3') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
