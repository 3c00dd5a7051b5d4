"""Transfer scripts: built by pure functions, executed by a real local bash against a real moto S3 server.

HOME is ``tmp_path`` (the instance's home); ``curl`` is the real one, behind a recording wrapper that proves no
presigned URL is ever on its command line.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time

import pytest

from airflow_provider_brev.core.protocol.remote_scripts import load_script
from airflow_provider_brev.core.staging.checksums import (
    MIB,
    md5_hex_to_base64,
)
from airflow_provider_brev.core.staging.reports import parse_transfer_output
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
    build_cleanup_script,
    build_plan,
    build_transfer_script,
    check_script_length,
    plan_path,
)
from unit.core.staging.reports_helpers import MD5, URL
from unit.core.staging.scripts_helpers import BUCKET, listed_signature, md5, part_tasks

# ------------------------------------------------------------------------------------------- fixtures


def get_url(s3, key: str) -> str:
    return s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=300)


def get_task(s3, key: str, n: int, relpath: str, data: bytes, *, md5_hex: str | None = "auto") -> TransferTask:
    return TransferTask(
        key=str(n),
        op=OP_GET,
        relpath=relpath,
        file_size=len(data),
        md5=md5(data) if md5_hex == "auto" else md5_hex,
        url=get_url(s3, key),
    )


# ---------------------------------------------------------------------------------------------- paths


# ---------------------------------------------------------------------------------------------- plans


def test_plan_rejects_values_that_could_break_the_curl_config_or_the_script():
    ok = {"key": "1", "op": OP_GET, "relpath": "a", "file_size": 1, "url": "https://h/b/k?X-Amz-Signature=abc"}
    TransferTask(**ok)
    for change in (
        {"url": 'https://h/k"\nurl = "http://evil'},
        {"url": "https://h/k with space"},
        {"url": "file:///etc/passwd"},
        {"url": "https://h/k\\"},
        {"relpath": "../escape"},
        {"key": "1;rm"},
        {"op": "X"},
        {"file_size": -1},
        {"md5": "nothex"},
    ):
        with pytest.raises(ValueError):
            TransferTask(**{**ok, **change})
    with pytest.raises(ValueError):
        build_plan([TransferTask(**ok), TransferTask(**ok)])
    plan = build_plan([TransferTask(**ok)])
    assert plan.endswith("N\t1\n")


def test_scripts_fit_on_a_command_line_and_ids_are_checked():
    assert len(build_transfer_script(xfer_id="1-abc", remote_dir="d")) < 16 * 1024
    for bad in ("", "../x", "a b", "x;y"):
        with pytest.raises(ValueError):
            build_transfer_script(xfer_id=bad, remote_dir="d")
    with pytest.raises(ValueError):
        build_transfer_script(xfer_id="ok", remote_dir="d", concurrency=0)
    with pytest.raises(ValueError):
        build_transfer_script(xfer_id="ok", remote_dir="new\nline")


# ------------------------------------------------------------------------------------------ downloads


@pytest.mark.parametrize("parallel", [True, False], ids=["one-curl-parallel", "curl-per-file"])
def test_download_verifies_places_files_and_leaves_no_url_behind(s3, instance, parallel):
    rng = random.Random(1)
    files = {
        "top.txt": b"top\n",
        "empty": b"",
        "a dir/with space.bin": rng.randbytes(70_000),
        "a dir/deep/er/x.json": b'{"x": 1}',
        "big.bin": rng.randbytes(3 * MIB + 17),
    }
    tasks = []
    for n, (rel, data) in enumerate(files.items()):
        s3.put_object(Bucket=BUCKET, Key=f"dl1/{rel}", Body=data)
        tasks.append(get_task(s3, f"dl1/{rel}", n, rel, data, md5_hex=None if rel == "top.txt" else "auto"))
    instance.ship("r1", tasks)
    script = build_transfer_script(xfer_id="r1", remote_dir="~/data/in", concurrency=3, parallel_downloads=parallel)
    done = instance.run(script)
    report = parse_transfer_output(done.stdout.splitlines())
    assert report.complete and not report.failed and report.error is None
    assert {k: (r.size, r.md5) for k, r in report.ok.items()} == {
        str(n): (len(data), md5(data)) for n, data in enumerate(files.values())
    }
    for rel, data in files.items():
        assert (instance.home / "data/in" / rel).read_bytes() == data
    assert instance.leftovers() == []
    argv = instance.curl_log.read_text()
    assert argv.count("-K /dev/fd/") == (1 if parallel else len(files))
    assert argv.count("--parallel-max 3") == (1 if parallel else 0)
    assert "X-Amz" not in argv and "Signature" not in argv and "http://" not in argv


@pytest.mark.parametrize("parallel", [True, False], ids=["one-curl-parallel", "curl-per-file"])
def test_download_failures_are_reported_per_file_and_never_placed(s3, instance, parallel):
    good, other = b"good data\n", b"other data\n"
    s3.put_object(Bucket=BUCKET, Key="dl2/good", Body=good)
    s3.put_object(Bucket=BUCKET, Key="dl2/other", Body=other)
    dest = instance.home / "out"
    dest.mkdir()
    (dest / "wrong-md5").write_bytes(b"previous version")  # must survive a failed download
    tasks = [
        get_task(s3, "dl2/good", 0, "good", good),
        get_task(s3, "dl2/other", 1, "wrong-md5", other, md5_hex=md5(b"something else")),
        TransferTask(key="2", op=OP_GET, relpath="wrong-size", file_size=3, url=get_url(s3, "dl2/other")),
        get_task(s3, "dl2/missing", 3, "missing", b"x"),
    ]
    instance.ship("r2", tasks)
    script = build_transfer_script(xfer_id="r2", remote_dir="out", curl_retries=0, parallel_downloads=parallel)
    report = parse_transfer_output(instance.run(script).stdout.splitlines())
    assert report.complete
    assert list(report.ok) == ["0"]
    assert report.failed["1"] == ("md5", f"got {md5(other)}, expected {md5(b'something else')}")
    assert report.failed["2"] == ("size", f"got {len(other)} bytes, expected 3")
    assert report.failed["3"] == ("curl", "exit 22 (HTTP 404)")
    assert (dest / "wrong-md5").read_bytes() == b"previous version"
    assert sorted(p.name for p in dest.iterdir()) == ["good", "wrong-md5"]
    assert instance.leftovers() == []


@pytest.mark.parametrize("case", ["missing", "truncated", "no-curl"])
def test_setup_errors_are_reported_and_the_plan_is_still_deleted(s3, instance, case, tmp_path):
    task = get_task(s3, "dl2/good", 0, "good", b"good data\n")
    script = build_transfer_script(xfer_id="r3", remote_dir="out")
    if case != "missing":
        instance.ship("r3", [task])
    if case == "truncated":
        plan = instance.home / plan_path("r3")
        plan.write_text(plan.read_text().replace("N\t1\n", ""))
    if case == "no-curl":
        minimal = tmp_path / "minimal-bin"
        minimal.mkdir()
        for tool in ("mkdir", "rm", "chmod", "find"):
            (minimal / tool).symlink_to(f"/usr/bin/{tool}" if os.path.exists(f"/usr/bin/{tool}") else f"/bin/{tool}")
        env = {**instance.env(), "PATH": str(minimal)}
        done = subprocess.run(
            ["/bin/bash", "-c", script], env=env, cwd=instance.home, capture_output=True, text=True, check=False
        )
    else:
        done = instance.run(script)
    assert done.returncode == 0
    report = parse_transfer_output(done.stdout.splitlines())
    assert report.error and not report.complete
    assert report.outcome("0") == ("error", report.error)
    assert not (instance.home / plan_path("r3")).exists()


def test_terminated_round_removes_its_plan_temp_dir_and_partial_files(s3, instance):
    data = random.Random(2).randbytes(2 * MIB)
    s3.put_object(Bucket=BUCKET, Key="dl3/slow", Body=data)
    # curl gets stuck after writing part of the file (a stalled connection); the batch reads its outputs from
    # the config on -K
    instance.set_curl(
        pre='for a; do [ "$prev" = -o ] && out=$a; [ "$prev" = -K ] && cfg=$a; prev=$a; done\n'
        'if [ -n "$cfg" ]; then out=$(sed -n \'s/^output = "\\(.*\\)"$/\\1/p\' "$cfg"); mkdir -p "${out%/*}"; fi\n'
        'if [ -n "$out" ]; then head -c 1000 /dev/zero > "$out"; sleep 30; fi'
    )
    instance.ship("r4", [get_task(s3, "dl3/slow", 0, "slow", data)])
    proc = subprocess.Popen(
        ["bash", "-c", build_transfer_script(xfer_id="r4", remote_dir="out")],
        env=instance.env(),
        cwd=instance.home,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not list((instance.home / "out").glob(f"*{PART_SUFFIX}*")):
        assert time.monotonic() < deadline, "the download never started"
        time.sleep(0.05)
    assert not (instance.home / plan_path("r4")).exists()  # read and deleted before the first download
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0
    assert instance.leftovers() == []


def test_cleanup_script_removes_a_round(instance):
    (instance.home / plan_path("r5")).write_text("secret")
    (instance.home / ".airflow-brev/xfer/r5").mkdir(parents=True)
    done = instance.run(build_cleanup_script("r5"))
    assert done.stdout.strip() == "BREV_XFER_CLEANED"
    assert instance.leftovers() == []


# -------------------------------------------------------------------------------------------- uploads


def test_upload_of_a_changed_file_is_refused(s3, instance):
    (instance.home / "r").mkdir()
    (instance.home / "r/f").write_bytes(b"grew since it was listed")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "up2/f"})
    instance.ship("u2", [TransferTask(key="0", op=OP_PUT, relpath="f", file_size=4, url=url)])
    report = parse_transfer_output(
        instance.run(build_transfer_script(xfer_id="u2", remote_dir="r")).stdout.splitlines()
    )
    assert report.failed["0"][0] == CHANGED
    with pytest.raises(s3.exceptions.ClientError):
        s3.head_object(Bucket=BUCKET, Key="up2/f")


def test_parts_of_one_byte_upload_with_the_smallest_timeouts(s3, instance):
    (instance.home / "r1b").mkdir()
    (instance.home / "r1b/two").write_bytes(b"ab")
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="up9/two")["UploadId"]
    tasks = part_tasks(s3, "up9/two", upload_id, "two", 2, [(1, 0, 1), (2, 1, 1)])
    instance.ship("u9", tasks)
    script = build_transfer_script(xfer_id="u9", remote_dir="r1b", concurrency=1, curl_retries=0, connect_timeout=1)
    report = parse_transfer_output(instance.run(script).stdout.splitlines())
    assert report.complete and not report.failed
    assert {key: (r.size, r.md5) for key, r in report.ok.items()} == {"0.1": (1, md5(b"a")), "0.2": (1, md5(b"b"))}
    s3.abort_multipart_upload(Bucket=BUCKET, Key="up9/two", UploadId=upload_id)
    build_transfer_script(xfer_id="u9", remote_dir="r1b", stall_seconds=1)  # one second is a stall limit too


def test_a_script_may_be_as_long_as_the_limit_in_bytes_not_characters():
    at_limit = "é" * (MAX_SCRIPT_LENGTH // 2)  # two bytes each in UTF-8
    assert check_script_length(at_limit) == at_limit
    with pytest.raises(ValueError, match="longer than"):
        check_script_length(at_limit + "x")


def test_a_put_whose_file_is_rewritten_in_place_while_curl_sends_it_fails_as_changed(s3, instance):
    (instance.home / "r").mkdir()
    (instance.home / "r/ckpt").write_bytes(b"A" * 5000)
    signature = listed_signature(instance, "r", "ckpt")
    instance.set_curl(pre=f"[[ $* == *-T* ]] && printf '%5000s' '' > {instance.home}/r/ckpt")  # same size, in place
    data_md5 = md5(b"A" * 5000)
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "up3/ckpt", "ContentMD5": md5_hex_to_base64(data_md5)}
    )
    task = TransferTask(key="0", op=OP_PUT, relpath="ckpt", file_size=5000, url=url, md5=data_md5, signature=signature)
    instance.ship("u3", [task])
    done = instance.run(build_transfer_script(xfer_id="u3", remote_dir="r"))
    report = parse_transfer_output(done.stdout.splitlines())
    # S3 refuses the body (its Content-MD5 is the listed one; moto does not check it): either way it is no success
    assert report.failed.get("0") == ("changed", "while it was uploaded"), done.stdout


def test_plan_carries_the_listed_signature_and_refuses_a_malformed_one():
    ok = {"key": "0", "op": OP_PUT, "relpath": "a b", "file_size": 1, "url": "https://h/b/k?X-Amz-Signature=abc"}
    plan = build_plan([TransferTask(**ok, signature="1/1733061234.1234567890/1733061234.1234567890/42")])
    assert "\t1/1733061234.1234567890/1733061234.1234567890/42\ta b\n" in plan
    assert "\t-\ta b\n" in build_plan([TransferTask(**ok)])
    for bad in ("1/2/3", "1/2/3/4\tx", "$(id)", ""):
        with pytest.raises(ValueError, match="signature"):
            TransferTask(**ok, signature=bad)


# -------------------------------------------------------------------------------------------- listing


# -------------------------------------------------------------------------------------------- parsing


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
        ({"op": OP_PART, "length": 0, "file_size": 1}, "A part must have a positive length"),
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
    for not_an_int in (True, 2.5):
        with pytest.raises(ValueError, match="concurrency must be an integer"):
            build_transfer_script(xfer_id="r-1", remote_dir="data", concurrency=not_an_int)  # type: ignore[arg-type]
