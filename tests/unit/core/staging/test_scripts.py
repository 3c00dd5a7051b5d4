"""Transfer scripts: built by pure functions, executed by a real local bash against a real moto S3 server.

HOME is ``tmp_path`` (the instance's home); ``curl`` is the real one, behind a recording wrapper that proves no
presigned URL is ever on its command line.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import time

import pytest

from airflow_provider_brev.core.staging.checksums import (
    MIB,
    choose_part_size,
    md5_hex_to_base64,
    multipart_etag,
    split_parts,
)
from airflow_provider_brev.core.staging.listing import build_list_script
from airflow_provider_brev.core.staging.paths import (
    PathFilter,
    find_path_conflicts,
    normalize_prefix,
    remote_path_word,
    validate_relpath,
)
from airflow_provider_brev.core.staging.reports import parse_list_output, parse_transfer_output, redact
from airflow_provider_brev.core.staging.scripts import (
    OP_GET,
    OP_PART,
    OP_PUT,
    PART_SUFFIX,
    TransferTask,
    build_cleanup_script,
    build_plan,
    build_transfer_script,
    plan_path,
)

BUCKET = "brev-unit-transfers"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def s3(moto_s3):
    from airflow_provider_brev.testing.local_s3 import s3_client

    client = s3_client(moto_s3)
    client.create_bucket(Bucket=BUCKET)
    return client


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


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "../x", "a//b", "./a", "a/", "new\nline", "tab\there", "nul\0"])
def test_unsafe_relative_paths_are_rejected(bad):
    with pytest.raises(ValueError):
        validate_relpath(bad)


def test_path_helpers(instance):
    assert validate_relpath("a b/c.d") == "a b/c.d"
    assert find_path_conflicts(["a", "a/b", "c/d", "c"]) == ["a", "c"]
    assert find_path_conflicts(["a/b", "a/c"]) == []
    assert [normalize_prefix(p) for p in (None, "", "/", "x", "x/", "/x//", "a/b")] == [
        "",
        "",
        "",
        "x/",
        "x/",
        "x/",
        "a/b/",
    ]
    words = [remote_path_word(p) for p in ("~", "~/d x", "rel/$(touch pwned)", "/abs/'q'")]
    done = instance.run("printf '%s|' " + " ".join(words))
    home = str(instance.home)
    assert done.stdout == f"{home}|{home}/d x|{home}/rel/$(touch pwned)|/abs/'q'|"
    assert not (instance.home / "pwned").exists()


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
    for number, offset, length in split_parts(len(big), part_size):
        url = s3.generate_presigned_url(
            "upload_part", Params={"Bucket": BUCKET, "Key": "up1/big.bin", "UploadId": upload_id, "PartNumber": number}
        )
        tasks.append(
            TransferTask(
                key=f"1.{number}",
                op=OP_PART,
                relpath="big.bin",
                file_size=len(big),
                offset=offset,
                length=length,
                url=url,
                content_md5=True,
            )
        )
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


def test_upload_of_a_changed_file_is_refused(s3, instance):
    (instance.home / "r").mkdir()
    (instance.home / "r/f").write_bytes(b"grew since it was listed")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "up2/f"})
    instance.ship("u2", [TransferTask(key="0", op=OP_PUT, relpath="f", file_size=4, url=url)])
    report = parse_transfer_output(
        instance.run(build_transfer_script(xfer_id="u2", remote_dir="r")).stdout.splitlines()
    )
    assert report.failed["0"][0] == "changed"
    with pytest.raises(s3.exceptions.ClientError):
        s3.head_object(Bucket=BUCKET, Key="up2/f")


def listed_signature(instance, directory: str, relpath: str) -> str:
    report = parse_list_output(instance.run(build_list_script(directory)).stdout.splitlines())
    (entry,) = [f for f in report.files if f.relpath == relpath]
    assert entry.signature
    return entry.signature


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


def test_a_part_of_a_file_rewritten_after_an_earlier_part_was_read_fails_as_changed(s3, instance):
    (instance.home / "r").mkdir()
    (instance.home / "r/big").write_bytes(b"A" * (6 * MIB))
    signature = listed_signature(instance, "r", "big")
    rewrite = f"echo B >> {instance.home}/r/big; truncate -s {6 * MIB} {instance.home}/r/big"  # same size, in place
    once = instance.home / "rewritten"
    instance.set_curl(pre=f"[[ $* == *-T* && ! -e {once} ]] && touch {once} && {{ {rewrite}; }}")
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="up4/big")["UploadId"]
    tasks = [
        TransferTask(
            key=f"0.{number}",
            op=OP_PART,
            relpath="big",
            file_size=6 * MIB,
            offset=offset,
            length=length,
            url=s3.generate_presigned_url(
                "upload_part", Params={"Bucket": BUCKET, "Key": "up4/big", "UploadId": upload_id, "PartNumber": number}
            ),
            signature=signature,
        )
        for number, offset, length in split_parts(6 * MIB, 5 * MIB)
    ]
    instance.ship("u4", tasks)
    done = instance.run(build_transfer_script(xfer_id="u4", remote_dir="r", concurrency=1))
    report = parse_transfer_output(done.stdout.splitlines())
    assert "0.1" in report.ok  # read and sent before the file changed: its bytes are the listed ones
    assert report.failed["0.2"] == ("changed", "rewritten since it was listed")
    s3.abort_multipart_upload(Bucket=BUCKET, Key="up4/big", UploadId=upload_id)


def test_plan_carries_the_listed_signature_and_refuses_a_malformed_one():
    ok = {"key": "0", "op": OP_PUT, "relpath": "a b", "file_size": 1, "url": "https://h/b/k?X-Amz-Signature=abc"}
    plan = build_plan([TransferTask(**ok, signature="1/1733061234.1234567890/1733061234.1234567890/42")])
    assert "\t1/1733061234.1234567890/1733061234.1234567890/42\ta b\n" in plan
    assert "\t-\ta b\n" in build_plan([TransferTask(**ok)])
    for bad in ("1/2/3", "1/2/3/4\tx", "$(id)", ""):
        with pytest.raises(ValueError, match="signature"):
            TransferTask(**ok, signature=bad)


# -------------------------------------------------------------------------------------------- listing


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


# -------------------------------------------------------------------------------------------- parsing


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


@pytest.mark.parametrize("exclude", [None, ["bad*"]])
def test_list_script_skips_names_that_are_not_utf8_deliberately(instance, exclude):
    """A file named with byte \\xff once failed the whole upload under a UTF-8 locale: bash's ``=~`` and the
    S3 key. Matching is bytewise (LC_ALL=C); such names are skipped and counted (S3 keys are UTF-8)."""
    root = instance.home / "odd"
    root.mkdir()
    (root / "good.txt").write_bytes(b"ok")
    (root / "bad-but-valid.txt").write_bytes(b"ok")
    with open(os.path.join(os.fsencode(root), b"bad\xff.bin"), "wb") as handle:
        handle.write(b"x")
    script = build_list_script("odd", PathFilter.create(exclude=exclude) if exclude else None)
    done = subprocess.run(
        ["bash", "-c", script], env=instance.env(), cwd=instance.home, capture_output=True, check=False
    )
    assert done.returncode == 0 and done.stderr == b""
    lines = done.stdout.decode("utf-8", "replace").splitlines()  # as the hook decodes the CLI's output
    listed = parse_list_output(lines)
    assert listed.complete
    if exclude:
        assert [f.relpath for f in listed.files] == ["good.txt"]
    else:
        assert [f.relpath for f in listed.files] == ["bad-but-valid.txt", "good.txt"]
        assert listed.skipped_names == 1
