"""Issue: S3ToBrevOperator / BrevToS3Operator, proven inside real dag.test() runs (simulator + moto S3).

The instance side is real: the simulator's ``brev exec`` runs the transfer scripts in a per-instance sandbox
whose ``curl`` talks to the moto server. The AWS connection carries dummy keys that must never show up in a
``brev`` command line (argv or the ssh command), in the task logs, or in any file left in a sandbox.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import textwrap
import time
from typing import TYPE_CHECKING

import pytest
from helpers import run_state, task_states

from airflow_provider_brev.core.staging.checksums import MD5_METADATA_KEY
from airflow_provider_brev.core.staging.scripts import PART_SUFFIX
from airflow_provider_brev.exceptions import BrevInvalidInputError, BrevS3LocationError
from airflow_provider_brev.transfers import (
    BrevToS3Operator,
    BrevTransferConflictError,
    BrevTransferError,
    S3ToBrevOperator,
)

if TYPE_CHECKING:
    from pathlib import Path

MIB = 1024 * 1024
URL_MARKERS = ("X-Amz-Signature", "X-Amz-Credential", "AWSAccessKeyId", "Signature=")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def seed(aws) -> dict[str, bytes]:
    """Objects under ``incoming/`` (and one outside it); returns relpath -> content."""
    rng = __import__("random").Random(7)
    files = {
        "readme.txt": b"hello from s3\n",
        "empty.dat": b"",
        "sub/b.bin": rng.randbytes(200 * 1024),
        "sub/with space.txt": b"spaces are fine\n",
        "sub/deep/big.bin": rng.randbytes(11 * MIB),  # above the 5 MiB multipart threshold of the upload
        "sub/skip.tmp": b"excluded\n",
    }
    for rel, data in files.items():
        aws.put(f"incoming/{rel}", data)
    aws.put("elsewhere/outside.txt", b"not under the prefix\n")
    return files


def ti_of(dag_run, task_id):
    return next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)


def xcom(dag_run, task_id):
    return ti_of(dag_run, task_id).xcom_pull(task_ids=task_id)


def wait_for_no_instances(sim, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while sim.instances():
        if time.monotonic() > deadline:
            raise AssertionError(f"instances left: {sim.instances()}")
        time.sleep(0.05)


def assert_no_secret_anywhere(sim, aws, task_logs) -> None:
    """No AWS key, secret or presigned URL in brev argv/ssh commands, task logs or any file on an instance."""
    needles = (*aws.secrets, *URL_MARKERS)
    calls = sim.calls()
    assert any("BREV_XFER_DONE" in str(call.get("ssh_argv")) for call in calls)  # the scripts went through ssh
    assert any(".airflow-brev-xfer-" in " ".join(call["argv"]) for call in sim.calls("copy"))  # URLs: a file
    for call in calls:
        recorded = json.dumps([call.get("argv"), call.get("ssh_argv"), call.get("ssh_invocations")])
        for needle in needles:
            assert needle not in recorded, f"{needle!r} in brev call {call.get('argv', [])[:2]}"
    runs = json.dumps(sim.runs())
    assert sim.runs() and "s3://" in task_logs.text  # commands ran on the instance; the transfers logged
    for needle in needles:
        assert needle not in runs
        assert needle not in task_logs.text, f"{needle!r} in the task logs"
    instances = list((sim.root / "instances").iterdir())
    assert instances
    for instance_dir in instances:
        for path in instance_dir.rglob("*"):
            assert not path.name.startswith(".airflow-brev-xfer-"), f"plan file left: {path}"
            assert PART_SUFFIX not in path.name, f"partial download left: {path}"
            if path.is_file() and not path.is_symlink():
                content = path.read_bytes()
                for needle in needles:
                    assert needle.encode() not in content, f"{needle!r} in {path}"


ROUND_TRIP_DEFAULTS = {
    "in_prefix": "incoming/",
    "out_prefix": "results/",
    "remote_dir": "data/in",
    "include": None,
    "exclude": ["*.tmp"],
    "upload_exclude": ["*.log"],
    "overwrite": False,
    "expected": {},
}


def conf(aws, **overrides):
    """Every param explicitly: params given to one dag.test() run must not leak into the next."""
    return {"bucket": aws.bucket, **ROUND_TRIP_DEFAULTS, **overrides}


def test_round_trip_nested_dir_with_multipart_file(run_dag, brev_sim_both, aws_connection, task_logs):
    brev_sim = brev_sim_both
    aws = aws_connection
    files = seed(aws)
    expected = {rel: md5(data) for rel, data in files.items() if not rel.endswith(".tmp")}
    dag_run = run_dag("brev_transfer_round_trip", conf=conf(aws, expected=expected))
    assert run_state(dag_run) == "success", task_states(dag_run)

    down = xcom(dag_run, "download")
    assert down == {
        "instance_name": down["instance_name"],
        "s3_bucket": aws.bucket,
        "s3_prefix": "incoming/",
        "s3_uri": f"s3://{aws.bucket}/incoming/",
        "remote_dir": "data/in",
        "files": len(expected),
        "bytes": sum(len(files[rel]) for rel in expected),
        "md5_verified": len(expected),
        "attempts": 1,
    }
    up = xcom(dag_run, "upload")
    assert up["files"] == up["uploaded"] == len(expected) + 1  # + generated/result.txt; debug.log excluded
    assert up["multipart_files"] == 1
    assert up["skipped_existing"] == 0
    assert up["s3_uri"] == f"s3://{aws.bucket}/results/"

    assert aws.keys("results/") == sorted([f"results/{rel}" for rel in expected] + ["results/generated/result.txt"])
    for rel in expected:
        assert md5(aws.get(f"results/{rel}")) == expected[rel], rel
    assert aws.get("results/generated/result.txt").decode().strip() == dag_run.run_id
    big = aws.client.head_object(Bucket=aws.bucket, Key="results/sub/deep/big.bin")
    assert big["ETag"].strip('"').endswith("-3")  # 11 MiB in 5 MiB parts
    assert big["Metadata"][MD5_METADATA_KEY] == expected["sub/deep/big.bin"]
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")

    text = task_logs.text
    assert "Downloaded s3://" in text and "sub/deep/big.bin (11534336 bytes, md5 verified)" in text
    assert "Uploaded sub/deep/big.bin" in text and "3 parts" in text
    assert_no_secret_anywhere(brev_sim, aws, task_logs)
    wait_for_no_instances(brev_sim)


def test_names_with_glob_characters_round_trip(run_dag, brev_sim, aws_connection, task_logs):
    """curl globs ``[...]`` and ``{...}`` in what it uploads (``-T``) and in URLs unless told not to."""
    aws = aws_connection
    files = {
        "br[0].png": b"bracketed\n",
        "cur{ep}.ckpt": b"braced\n",
        "sub[1]/a{b,c}.txt": b"both\n",
        "h#1 [x].txt": b"hash and space\n",
        "big[2].bin": __import__("random").Random(3).randbytes(6 * MIB),  # multipart on the way up
    }
    for rel, data in files.items():
        aws.put(f"globs/{rel}", data)
    expected = {rel: md5(data) for rel, data in files.items()}
    dag_run = run_dag("brev_transfer_round_trip", conf=conf(aws, in_prefix="globs/", expected=expected))
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert xcom(dag_run, "download")["files"] == len(files)
    assert xcom(dag_run, "upload")["uploaded"] == len(files) + 1  # + generated/result.txt
    for rel, data in files.items():
        assert aws.get(f"results/{rel}") == data, rel
    assert "curl exit" not in task_logs.text
    wait_for_no_instances(brev_sim)


def test_a_checkpoint_saved_again_during_a_multipart_upload_never_reaches_s3_with_a_stale_md5(
    run_dag, brev_sim, aws_connection, task_logs
):
    """Same size, rewritten in place after the listing hashed it and before its parts are read (a simulator
    gate right before the upload round, not timing): before, S3 got the new bytes under the old md5 and every
    later download of it failed its md5 check."""
    aws = aws_connection
    size = 6 * MIB
    resave = f"head -c {size} /dev/zero | tr '\\0' B > ckpt/model.pth"
    brev_sim.set_fault("before_exec", match="airflow-provider-brev transfer round", run=resave, times=1)
    dag_run = run_dag("brev_transfer_resaved_checkpoint", conf={"bucket": aws.bucket})
    states = task_states(dag_run)
    assert (states["save"], states["upload"], states["delete"]) == ("success", "failed", "success"), states
    assert brev_sim.faults() == []  # the gate fired
    assert "model.pth (changed: part 1: rewritten since it was listed)" in task_logs.text
    assert aws.keys("ckpts/") == []  # the upload was refused, not completed with the old file's md5
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")  # and aborted
    wait_for_no_instances(brev_sim)


def test_control_characters_in_file_names_reach_no_log_line_raw(run_dag, brev_sim, aws_connection, task_logs):
    aws = aws_connection
    files = {"clear\x1b[2Jscreen.txt": b"esc\n", "bell\x07.txt": b"bel\n", "rtl\u202etxt.exe": b"bidi\n"}
    for rel, data in files.items():
        aws.put(f"odd/{rel}", data)
    expected = {rel: md5(data) for rel, data in files.items()}
    dag_run = run_dag("brev_transfer_round_trip", conf=conf(aws, in_prefix="odd/", expected=expected))
    assert run_state(dag_run) == "success", task_states(dag_run)
    for rel, data in files.items():
        assert aws.get(f"results/{rel}") == data  # the names themselves are kept, byte for byte
    text = task_logs.text
    for shown in ("clear\\x1b[2Jscreen.txt", "bell\\x07.txt", "rtl\\u202etxt.exe"):
        assert f"-> {shown} (" in text and f"Uploaded {shown} -> " in text  # download and upload lines
    for raw in ("\x1b[2J", "\x07", "\u202e"):
        assert raw not in text
    wait_for_no_instances(brev_sim)


def test_existing_keys_are_not_overwritten_unless_asked(run_dag, brev_sim, aws_connection, task_logs):
    aws = aws_connection
    files = seed(aws)
    expected = {rel: md5(data) for rel, data in files.items() if not rel.endswith(".tmp")}
    first = run_dag("brev_transfer_round_trip", conf=conf(aws, expected=expected, out_prefix="immutable/"))
    assert run_state(first) == "success", task_states(first)
    before = {key: aws.get(key) for key in aws.keys("immutable/")}

    # A second run writes a different generated/result.txt to the same prefix: refused, nothing changes.
    second = run_dag("brev_transfer_round_trip", conf=conf(aws, expected=expected, out_prefix="immutable/"))
    states = task_states(second)
    assert states["upload"] == "failed" and states["delete"] == "success"
    assert "immutable/generated/result.txt" in task_logs.text and "overwrite is off" in task_logs.text
    assert {key: aws.get(key) for key in aws.keys("immutable/")} == before

    third = run_dag(
        "brev_transfer_round_trip", conf=conf(aws, expected=expected, out_prefix="immutable/", overwrite=True)
    )
    assert run_state(third) == "success", task_states(third)
    up = xcom(third, "upload")
    assert (up["uploaded"], up["skipped_existing"]) == (1, len(expected))  # identical files are not re-sent
    assert aws.get("immutable/generated/result.txt").decode().strip() == third.run_id
    wait_for_no_instances(brev_sim)


FLAKY_CURL = textwrap.dedent(
    """\
    #!/bin/bash
    # Test curl: the first call for each file is "interrupted" (downloads: half the file arrives and curl
    # still exits 0; uploads: exit 56 before sending); files matching $always always fail (downloads: the
    # connection is refused; uploads: exit 22). Then real curl. A download batch (`--parallel`, url/output pairs
    # in the config on -K) gets the same per-file rules.
    state={state}
    always={always}
    once={once}
    first_time() {{  # mode name: true (and remembered) the first time, for the files $once selects
      if [ -n "$once" ] && [[ $2 != $once ]]; then return 1; fi
      local mark="$state/$1-$(printf '%s' "$2" | md5sum | cut -c1-32)"
      [ -e "$mark" ] && return 1
      : > "$mark"
    }}
    if [[ " $* " == *" --parallel "* ]]; then
      args=(); prev=
      for a in "$@"; do
        if [ "$prev" = -K ]; then cfg=$(cat "$a"); elif [ "$a" != -K ]; then args+=("$a"); fi
        prev=$a
      done
      new=; outs=()
      while IFS= read -r line; do
        case $line in
          'url = '*) url=$line ;;
          'output = '*)
            out=${{line#output = \\"}}; out=${{out%\\"}}; name="${{out%/{suffix}*}}/${{out##*/}}"
            echo "get $name" >> "$state/calls"
            if [ -n "$always" ] && [[ $name == $always ]]; then url='url = "http://127.0.0.1:9/refused"'; fi
            new+="$url"$'\\n'"$line"$'\\n'; outs+=("$out") ;;
        esac
      done <<< "$cfg"
      /usr/bin/curl "${{args[@]}}" --retry 0 -K <(printf '%s' "$new")
      for out in "${{outs[@]}}"; do
        name="${{out%/{suffix}*}}/${{out##*/}}"
        if [ -e "$out" ] && first_time get "$name"; then size=$(wc -c < "$out"); truncate -s $((size / 2)) "$out"; fi
      done
      exit 0
    fi
    target=; mode=; prev=
    for a in "$@"; do
      case $prev in
        -o) if [ "$a" != /dev/null ]; then target=$a; mode=get; fi ;;
        -T) target=$a; mode=put ;;
      esac
      prev=$a
    done
    [ -n "$target" ] || exec /usr/bin/curl "$@"
    case $target in */.airflow-brev/xfer/*) name=${{target##*/}} ;; *) name=${{target%%{suffix}*}} ;; esac
    echo "$mode $name" >> "$state/calls"
    if [ -n "$always" ] && [[ $name == $always ]]; then exit 22; fi
    first_time "$mode" "$name" || exec /usr/bin/curl "$@"
    [ "$mode" = put ] && exit 56
    /usr/bin/curl "$@" || exit $?
    size=$(wc -c < "$target"); truncate -s $((size / 2)) "$target"
    exit 0
    """
)


def install_flaky_curl(sim, tmp_path: Path, always: str = "", once: str = "") -> Path:
    """A ``curl`` on every sandbox's PATH that fails the first call per file (only files matching ``once``,
    if given) and every call for files matching ``always``; returns the directory with its call log."""
    state = tmp_path / "curl-state"
    state.mkdir(exist_ok=True)
    sim.add_tool(
        "curl",
        FLAKY_CURL.format(state=repr(str(state)), always=repr(always), once=repr(once), suffix=PART_SUFFIX),
    )
    return state


def test_interrupted_transfers_are_retried_per_file(run_dag, brev_sim, aws_connection, task_logs, tmp_path):
    aws = aws_connection
    files = seed(aws)
    state = install_flaky_curl(brev_sim, tmp_path)
    selected = {"sub/b.bin", "sub/deep/big.bin"}  # include sub/**, exclude *.tmp and *space*
    expected = {rel: md5(files[rel]) for rel in selected}
    dag_run = run_dag(
        "brev_transfer_round_trip",
        conf=conf(aws, expected=expected, include=["sub/**"], exclude=["*.tmp", "*space*"]),
    )
    assert run_state(dag_run) == "success", task_states(dag_run)
    assert xcom(dag_run, "download")["attempts"] == 2
    assert xcom(dag_run, "upload")["attempts"] == 2
    calls = (state / "calls").read_text().splitlines()
    downloads = [c for c in calls if c.startswith("get ")]
    assert sum(1 for c in downloads if c.endswith("/data/in/sub/b.bin")) == 2  # once cut short, once whole
    assert len(downloads) == 4
    parts = [c for c in calls if re.fullmatch(r"put p\.\d+\.\d+", c)]
    assert len(parts) == 6 and len(set(parts)) == 3  # each of the 3 parts failed once, then went up
    assert "sub/b.bin (size: got 102400 bytes, expected 204800)" in task_logs.text
    assert "(curl: part 1: exit 56 (HTTP 000))" in task_logs.text
    assert sorted(aws.keys("results/")) == [
        "results/generated/result.txt",
        "results/sub/b.bin",
        "results/sub/deep/big.bin",
    ]
    for rel in selected:
        assert md5(aws.get(f"results/{rel}")) == expected[rel]
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")
    assert_no_secret_anywhere(brev_sim, aws, task_logs)
    wait_for_no_instances(brev_sim)


def test_a_file_that_keeps_failing_fails_the_task_and_is_named(run_dag, brev_sim, aws_connection, task_logs, tmp_path):
    aws = aws_connection
    seed(aws)
    install_flaky_curl(brev_sim, tmp_path, always="*/sub/b.bin")
    dag_run = run_dag(
        "brev_transfer_download_only",
        conf={"bucket": aws.bucket, "in_prefix": "incoming/", "remote_dir": "data/in", "include": None},
    )
    states = task_states(dag_run)
    assert states["download"] == "failed", states
    assert states["delete"] == "success"
    assert run_state(dag_run) == "failed"
    assert xcom(dag_run, "download") is None  # never reported as success
    assert "1 of 6 file(s) from s3://" in task_logs.text
    assert "sub/b.bin (curl: exit 7 (HTTP 000))" in task_logs.text  # connection refused, every round
    assert_no_secret_anywhere(brev_sim, aws, task_logs)
    wait_for_no_instances(brev_sim)


def test_module_import_does_not_import_boto3():
    code = (
        "import sys; import airflow_provider_brev.transfers, airflow_provider_brev.transfers.s3; "
        "bad = [m for m in ('boto3', 'botocore', 'airflow.providers.amazon.aws.hooks.s3') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --- operators run directly (no DAG) against an instance seeded in the simulator: the edge cases -----------

INSTANCE = "xfer-direct"


@pytest.fixture
def instance(brev_sim, aws_connection, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json())
    brev_sim.create_instance_directly(INSTANCE)
    return brev_sim.sandbox(INSTANCE)


def test_explicit_keys_land_by_basename_and_missing_keys_are_named(instance, aws_connection):
    aws = aws_connection
    files = seed(aws)
    keys = ["incoming/readme.txt", "incoming/sub/b.bin"]
    op = S3ToBrevOperator(task_id="keys", instance_name=INSTANCE, s3_bucket=aws.bucket, s3_keys=keys, remote_dir="~/k")
    summary = op.execute({})
    assert (summary["files"], summary["s3_prefix"], summary["md5_verified"]) == (2, None, 2)
    assert (instance / "k/readme.txt").read_bytes() == files["readme.txt"]
    assert (instance / "k/b.bin").read_bytes() == files["sub/b.bin"]
    missing = S3ToBrevOperator(
        task_id="missing", instance_name=INSTANCE, s3_bucket=aws.bucket, s3_keys=[*keys, "nope/x"], remote_dir="k2"
    )
    with pytest.raises(BrevTransferError, match="nope/x"):
        missing.execute({})
    assert not (instance / "k2").exists()


def test_multipart_upload_retries_only_the_failed_part(instance, brev_sim, aws_connection, tmp_path):
    aws = aws_connection
    data = __import__("random").Random(5).randbytes(11 * MIB)
    (instance / "ckpt").mkdir()
    (instance / "ckpt/model.bin").write_bytes(data)
    (instance / "ckpt/notes.txt").write_text("not included")
    state = install_flaky_curl(brev_sim, tmp_path, once="p.0.2")
    op = BrevToS3Operator(
        task_id="up",
        instance_name=INSTANCE,
        remote_dir="ckpt",
        s3_bucket=aws.bucket,
        s3_prefix="ckpts/run-1",
        include="*.bin",
        multipart_threshold=5 * MIB,
        part_size=5 * MIB,
        curl_retries=0,
    )
    summary = op.execute({})
    assert (summary["uploaded"], summary["multipart_files"], summary["attempts"]) == (1, 1, 2)
    assert sorted(c for c in (state / "calls").read_text().splitlines()) == [
        "put p.0.1",
        "put p.0.2",
        "put p.0.2",
        "put p.0.3",
    ]
    assert aws.keys("ckpts/") == ["ckpts/run-1/model.bin"]
    assert md5(aws.get("ckpts/run-1/model.bin")) == md5(data)
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")


def test_upload_that_keeps_failing_aborts_and_names_the_file(instance, brev_sim, aws_connection, tmp_path):
    aws = aws_connection
    (instance / "out").mkdir()
    (instance / "out/ok.txt").write_text("fine")
    (instance / "out/big.bin").write_bytes(b"\0" * (6 * MIB))
    install_flaky_curl(brev_sim, tmp_path, always="p.0.2", once="no-such-file")
    op = BrevToS3Operator(
        task_id="up",
        instance_name=INSTANCE,
        remote_dir="out",
        s3_bucket=aws.bucket,
        s3_prefix="fail/",
        multipart_threshold=5 * MIB,
        part_size=5 * MIB,
        max_attempts=2,
        curl_retries=0,
    )
    with pytest.raises(BrevTransferError, match=r"1 of 2 file\(s\).*big\.bin \(curl: part 2: exit 22"):
        op.execute({})
    assert aws.keys("fail/") == ["fail/ok.txt"]  # what was verified stays; the failed file is not there
    assert not aws.client.list_multipart_uploads(Bucket=aws.bucket).get("Uploads")  # aborted, parts not billed


@pytest.mark.parametrize(
    ("operator", "kwargs"),
    [
        (S3ToBrevOperator, {"s3_prefix": "in/", "remote_dir": "data"}),
        (S3ToBrevOperator, {"s3_keys": ["in/a.txt"], "remote_dir": "data"}),
        (BrevToS3Operator, {"s3_prefix": "out/", "remote_dir": "data"}),
    ],
    ids=["download-prefix", "download-keys", "upload"],
)
def test_a_missing_bucket_fails_a_transfer_before_any_brev_call(brev_sim, aws_connection, operator, kwargs):
    absent = "no-such-bucket-" + aws_connection.bucket.removeprefix("brev-test-")
    op = operator(task_id="t", instance_name=INSTANCE, s3_bucket=absent, **kwargs)
    with pytest.raises(BrevS3LocationError, match=rf"Cannot reach s3://{absent}/\S* \(s3_bucket.*'aws_default'") as err:
        op.execute({})
    assert "the bucket does not exist" in str(err.value) and "(NoSuchBucket)" in str(err.value)
    assert brev_sim.calls() == []


def test_an_unreachable_s3_endpoint_is_a_transient_error_not_a_permanent_one(brev_sim, aws_connection, monkeypatch):
    from airflow_provider_brev.exceptions import BrevTransientError, retry_policy
    from airflow_provider_brev.testing.local_s3 import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, REGION
    from airflow_provider_brev.testing.local_s3 import free_port as _free_port

    closed = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    extra = {"endpoint_url": closed, "region_name": REGION, "config_kwargs": {"retries": {"max_attempts": 1}}}
    monkeypatch.setenv(
        "AIRFLOW_CONN_AWS_DOWN",
        json.dumps(
            {"conn_type": "aws", "login": DUMMY_ACCESS_KEY_ID, "password": DUMMY_SECRET_ACCESS_KEY, "extra": extra}
        ),
    )
    op = BrevToS3Operator(
        task_id="t",
        instance_name=INSTANCE,
        s3_bucket="b-1",
        s3_prefix="out/",
        remote_dir="data",
        aws_conn_id="aws_down",
    )
    with pytest.raises(BrevTransientError, match=r"S3 did not answer for s3://b-1/out/ .*'aws_down'") as err:
        op.execute({})
    assert retry_policy(err.value) == "hook" and "EndpointConnectionError" in str(err.value)
    assert brev_sim.calls() == []


def test_upload_edge_cases(instance, aws_connection):
    aws = aws_connection
    (instance / "some").mkdir()
    (instance / "some/a.txt").write_text("a")

    def upload(**kwargs):
        args = {"task_id": "up", "instance_name": INSTANCE, "remote_dir": "some", "s3_bucket": aws.bucket}
        return BrevToS3Operator(**{**args, "s3_prefix": "edge/", **kwargs}).execute({})

    with pytest.raises(BrevTransferError, match="does not exist"):
        upload(remote_dir="missing-dir")
    with pytest.raises(BrevTransferError, match="No files to upload"):
        upload(include="*.nothing")
    assert upload(include="*.nothing", fail_on_empty=False)["files"] == 0
    assert upload(s3_prefix="20260101")["s3_uri"] == f"s3://{aws.bucket}/20260101/"
    # same content again: skipped; different content: refused, even for a retried task
    assert upload(s3_prefix="20260101")["skipped_existing"] == 1
    (instance / "some/a.txt").write_text("changed")
    with pytest.raises(BrevTransferConflictError, match="20260101/a.txt"):
        upload(s3_prefix="20260101")
    assert aws.get("20260101/a.txt") == b"a"


@pytest.mark.parametrize(
    ("operator", "kwargs", "message"),
    [
        (S3ToBrevOperator, {"s3_prefix": "p/", "s3_keys": ["p/a"]}, "Pass either s3_prefix"),
        (S3ToBrevOperator, {}, "Pass either s3_prefix"),
        (S3ToBrevOperator, {"s3_prefix": "p/", "include": "[a\\b]"}, "bracket expression"),
        (S3ToBrevOperator, {"s3_prefix": "p/", "max_attempts": 0}, "max_attempts"),
        (S3ToBrevOperator, {"s3_prefix": "p/", "remote_dir": "a\nb"}, "newlines"),
        (BrevToS3Operator, {"s3_prefix": "p/", "part_size": MIB}, "part_size"),
        (BrevToS3Operator, {"s3_prefix": "p/", "overwrite": "maybe"}, "boolean"),
        (BrevToS3Operator, {"s3_prefix": "p/", "s3_bucket": " "}, "s3_bucket"),
        (BrevToS3Operator, {"s3_prefix": "p/", "instance_name": "bad name"}, "Invalid instance name"),
        (BrevToS3Operator, {"s3_prefix": "p/", "url_expires_in": 10**7}, "7 days"),
    ],
)
def test_bad_input_fails_before_touching_anything(brev_sim, operator, kwargs, message):
    args = {"task_id": "t", "instance_name": INSTANCE, "s3_bucket": "bucket", "remote_dir": "d", **kwargs}
    with pytest.raises(BrevInvalidInputError, match=message):
        operator(**args).execute({})
    assert brev_sim.calls() == []


def test_operator_templating():
    assert {"instance_name", "s3_bucket", "s3_prefix", "s3_keys", "remote_dir", "include", "exclude"} <= set(
        S3ToBrevOperator.template_fields
    )
    assert {"instance_name", "s3_bucket", "s3_prefix", "remote_dir", "include", "exclude", "overwrite"} <= set(
        BrevToS3Operator.template_fields
    )
