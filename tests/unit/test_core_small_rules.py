"""Small rules of the pure core, pinned one by one: connection config and capabilities (``core/protocol/config.py``), the
line splitter and collector (``core/protocol/lines.py``), step staging shapes and the input manifest (``core/staging/manifest.py``),
and S3 checksum and part arithmetic (``core/staging/checksums.py``)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from airflow_provider_brev.core.protocol import lines as lines_module
from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig, login_args
from airflow_provider_brev.core.protocol.lines import (
    MAX_CAPTURE,
    MAX_LINE,
    READ_CHUNK,
    TAIL_LINES,
    Collector,
    LineSplitter,
    ProcessResult,
    squash_carriage_returns,
    utf8_boundary,
)
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
from airflow_provider_brev.core.staging.manifest import (
    MANIFEST_NAME,
    ManifestEntry,
    manifest_remote_path,
    normalize_directory,
    parse_manifest,
    parse_s3_uri,
    plan_input_sync,
    render_manifest,
    validate_inputs,
    validate_outputs,
)
from airflow_provider_brev.core.staging.rounds import StagedDownload
from airflow_provider_brev.exceptions import BrevConfigurationError, BrevInvalidInputError

# ------------------------------------------------------------------------------------------------- config


def test_every_extra_reaches_the_config_and_blanks_are_absent():
    extras = {
        "token": "t",
        "api_key": "bak-1",
        "org_id": "o-1",
        "org": "acme",
        "cli_path": "/bin/brev",
        "cloud_cred_id": "cc",
        "extra__brev__workspace_group_id": "wg",
        "brev_home": "/h",
        "name_prefix": "team",
    }
    config = BrevConnectionConfig.from_extras("brev_x", None, extras)
    assert config == BrevConnectionConfig("brev_x", "t", "bak-1", "o-1", "acme", "/bin/brev", "cc", "wg", "/h", "team")
    blank = BrevConnectionConfig.from_extras(None, "  ", {"token": "", "api_key": None, "org": " x "})
    assert blank == BrevConnectionConfig(None, None, None, None, "x")
    assert blank.name_prefix == "afbrev"
    assert BrevConnectionConfig.from_extras("c", " pw ", {"token": "ignored"}).token == "pw"
    with pytest.raises(AttributeError):
        config.token = "other"  # type: ignore[misc]


def test_the_secret_fingerprint_tells_sessions_apart_without_the_secret():
    def expect(secret):
        return hashlib.sha256(secret.encode()).hexdigest()[:16]

    assert BrevConnectionConfig("c", token="tok").secret_fingerprint == expect("tok")
    assert BrevConnectionConfig("c", token="tok", api_key="bak-k").secret_fingerprint == expect("bak-k")
    assert BrevConnectionConfig("c").secret_fingerprint == ""


def test_api_key_settings_are_validated():
    assert BrevConnectionConfig("c", api_key="bak-1", org_id="o").validate().api_key == "bak-1"
    with pytest.raises(BrevConfigurationError, match="must start with 'bak-'"):
        BrevConnectionConfig("c", api_key="key", org_id="o").validate()
    with pytest.raises(BrevConfigurationError, match="needs the org id"):
        BrevConnectionConfig("c", api_key="bak-1").validate()
    assert BrevConnectionConfig("c", token="t").validate().token == "t"
    assert login_args(BrevConnectionConfig("c")) is None


@pytest.mark.parametrize(
    ("version", "listing"),
    [(None, True), ((0, 6, 317), True), ((0, 6, 316), False), ((0, 7, 0), True), ((0, 6, 318), True)],
)
def test_json_listing_needs_0_6_317(version, listing):
    assert BrevCapabilities(version, "v").has_json_listing is listing


def test_create_flags_decide_the_capabilities():
    caps = BrevCapabilities((0, 6, 327), "v0.6.327", frozenset({"gpu", "cloud-cred-id", "workspace-group-id"}))
    assert (caps.accepts_gpu_spec, caps.accepts_cloud_cred_id, caps.accepts_workspace_group_id) == (True, True, True)
    none = BrevCapabilities((0, 6, 327), "v0.6.327")
    assert (none.accepts_gpu_spec, none.accepts_cloud_cred_id, none.accepts_workspace_group_id) == (False, False, False)
    assert none.create_flags == frozenset()


# -------------------------------------------------------------------------------------------------- lines


def test_line_limits():
    assert (READ_CHUNK, MAX_LINE, MAX_CAPTURE, TAIL_LINES) == (65536, 262144, 67108864, 200)


@pytest.mark.parametrize(
    ("line", "shown"),
    [("plain", "plain"), ("10%\r50%\r100%", "100%"), ("done\r", "done"), ("\r\r", ""), ("", "")],
)
def test_carriage_returns_keep_what_a_terminal_shows(line, shown):
    assert squash_carriage_returns(line) == shown


def test_utf8_boundary_never_splits_a_character():
    data = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    assert utf8_boundary(data, 1) == 1
    assert utf8_boundary(data, 2) == 1  # inside é
    assert utf8_boundary(data, 4) == 3  # inside €
    assert utf8_boundary(data, 5) == 3
    assert utf8_boundary(data, 7) == 6  # inside 😀
    assert utf8_boundary(data, 9) == 6
    assert utf8_boundary(b"\x80\x80\x80\x80\x80\x80", 5) == 5  # no start byte within 3 back: cut where asked
    assert utf8_boundary(b"\x80\x80\x80", 2) == 2


def test_the_splitter_emits_complete_lines_and_flushes_long_ones(monkeypatch):
    got: list[str] = []
    splitter = LineSplitter(got.append)
    splitter.feed(b"one\ntw")
    assert got == ["one"]
    splitter.feed(b"o\n\nthree")
    assert got == ["one", "two", ""]
    splitter.close()
    assert got[-1] == "three"
    splitter.close()
    assert got[-1] == "three"  # nothing left
    monkeypatch.setattr(lines_module, "MAX_LINE", 4)
    pieces: list[str] = []
    long = LineSplitter(pieces.append)
    long.feed(b"abcd")
    assert pieces == []  # exactly MAX_LINE: still waiting for its newline
    long.feed("e€".encode())
    assert pieces == ["abcd"]
    long.feed(b"\n")
    assert pieces == ["abcd", "e€"]


def test_results_join_their_lines():
    result = ProcessResult(1, ["a", "b"], ["e"])
    assert (result.stdout, result.stderr, result.timed_out, result.duration, result.started_at) == (
        "a\nb",
        "e",
        False,
        0.0,
        0.0,
    )


def test_the_collector_caps_captured_output_and_keeps_a_tail_otherwise(monkeypatch):
    seen: list[str] = []
    tail = Collector(False, seen.append)
    for i in range(TAIL_LINES + 5):
        tail(str(i))
    assert len(tail.lines) == TAIL_LINES and tail.lines[0] == "5"
    assert seen[0] == "0" and tail.size == 0
    monkeypatch.setattr(lines_module, "MAX_CAPTURE", 6)
    capture = Collector(True, None)
    capture("abcde")  # 5 + 1 newline = 6: at the cap
    assert capture.size == 6
    with pytest.raises(OverflowError, match="more output than expected"):
        capture("")


# ----------------------------------------------------------------------------------------------- manifest


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (3, "Expected an s3://bucket/prefix URI"),
        ("gs://b/x", "Expected an s3://bucket/prefix URI"),
        ("s3://bucket/a\nb", "contains a tab, newline or NUL"),
        ("s3://bucket/a\rb", "contains a tab, newline or NUL"),
        ("s3://bucket/a\tb", "contains a tab, newline or NUL"),
        ("s3://bucket/a\x00b", "contains a tab, newline or NUL"),
        ("s3://Bucket/x", "Invalid bucket name"),
        ("s3://bucket/a/../b", "has a '..' component"),
        ("s3://bucket/..", "has a '..' component"),
    ],
)
def test_s3_uris_are_refused_for_their_reason(uri, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        parse_s3_uri(uri)


def test_s3_uris_keep_dots_that_are_not_a_component():
    assert parse_s3_uri("s3://bucket/a..b/") == ("bucket", "a..b/")
    assert parse_s3_uri("s3://my.bucket") == ("my.bucket", "")


@pytest.mark.parametrize(
    ("directory", "message"),
    [
        (None, "must be a non-empty path"),
        ("  ", "must be a non-empty path"),
        ("a\tb", "contains a tab, newline or NUL"),
        ("a\rb", "contains a tab, newline or NUL"),
        ("a\nb", "contains a tab, newline or NUL"),
        ("a\x00b", "contains a tab, newline or NUL"),
        ("/", "is the root directory"),
        ("~/", "is the remote home itself"),
        ("a//b", "must name a directory"),
        ("a/./b", "must name a directory"),
        ("a/../b", "must name a directory"),
    ],
)
def test_remote_directories_are_refused_for_their_reason(directory, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        normalize_directory(directory)


def test_directories_are_normalised():
    assert normalize_directory("/data/in/") == "/data/in"
    assert normalize_directory("~/data/") == "~/data"
    assert normalize_directory("data") == "data"
    assert normalize_directory("a.b/c") == "a.b/c"
    assert manifest_remote_path("~/data") == f"data/{MANIFEST_NAME}"
    assert MANIFEST_NAME == ".brev-manifest.jsonl"


@pytest.mark.parametrize(
    ("a", "b", "named"),
    [
        ("data", "~/data", "'~/data' and '~/data'"),  # relative paths are named as below the home
        ("data", "data/sub", "'~/data' and '~/data/sub'"),
        ("~/data/sub", "data", "'~/data/sub' and '~/data'"),
        ("/x", "/x/y", "'/x' and '/x/y'"),  # absolute paths as they are
        ("/x/y", "/x", "'/x/y' and '/x'"),
    ],
)
def test_overlapping_directories_are_refused_by_name(a, b, named):
    with pytest.raises(BrevInvalidInputError, match=f"^inputs: the directories {re.escape(named)} overlap.$"):
        validate_inputs({"s3://bucket/a/": a, "s3://bucket/b/": b})


def test_staging_pairs_are_validated_both_ways():
    (pair,) = validate_inputs({"s3://bucket/in": "data/"})
    assert (pair.uri, pair.bucket, pair.prefix, pair.directory) == ("s3://bucket/in/", "bucket", "in/", "data")
    (out,) = validate_outputs({"~/results": "s3://bucket/out"})
    assert (out.uri, out.directory) == ("s3://bucket/out/", "~/results")
    assert validate_inputs(None) == [] and validate_outputs(None) == []
    assert len(validate_inputs({"s3://bucket/a/": "data", "s3://bucket/b/": "data2"})) == 2
    assert len(validate_inputs({"s3://bucket/a/": "/x", "s3://bucket/b/": "x"})) == 2  # /x is not ~/x
    with pytest.raises(BrevInvalidInputError, match="outputs must be a mapping, got list"):
        validate_outputs(["s3://bucket/x"])  # type: ignore[arg-type]
    with pytest.raises(BrevInvalidInputError, match="outputs: the directories"):
        validate_outputs({"d": "s3://bucket/a/", "d/e": "s3://bucket/b/"})


def test_a_manifest_round_trips_and_other_sources_count_as_unknown():
    entries = [ManifestEntry("b.txt", "in/b.txt", 2, "e2"), ManifestEntry("a.txt", "in/a.txt", 1, "e1")]
    text = render_manifest("s3://bucket/in/", entries)
    assert text.splitlines()[0] == '{"source": "s3://bucket/in/"}'
    assert text.splitlines()[1] == '{"path": "a.txt", "key": "in/a.txt", "size": 1, "etag": "e1"}'
    assert text.endswith("\n")
    parsed = parse_manifest(text.splitlines(), "s3://bucket/in/")
    assert parsed == {e.relpath: e for e in entries}
    assert parse_manifest(text.splitlines(), "s3://bucket/other/") == {}
    lines = [
        "not json",
        "[1]",
        '{"source": "s3://b/"}',
        '{"path": "x"}',
        '{"path": "n", "key": "k", "size": null, "etag": "e"}',
    ]
    lines += [
        '{"path": "neg", "key": "k", "size": -1, "etag": "e"}',
        '{"path": "z", "key": "k", "size": 0, "etag": "e"}',
    ]
    assert parse_manifest(lines, "s3://b/") == {"z": ManifestEntry("z", "k", 0, "e")}
    assert "é" in render_manifest("s", [ManifestEntry("é", "k", 1, "e")])


def test_an_input_sync_downloads_only_what_changed():
    a, b, c = (StagedDownload(f"in/{n}", n, 1, f"e-{n}") for n in "abc")
    manifest = {"a": ManifestEntry("a", "in/a", 1, "e-a"), "b": ManifestEntry("b", "in/b", 1, "old")}
    plan = plan_input_sync([a, b, c], manifest, {"a": 1, "b": 1, "c": 1})
    assert ([i.relpath for i in plan.fetch], [i.relpath for i in plan.unchanged]) == (["b", "c"], ["a"])
    assert [i.relpath for i in plan_input_sync([a], manifest, {"a": 2}).fetch] == ["a"]  # edited locally
    assert [i.relpath for i in plan_input_sync([a], manifest, {}).fetch] == ["a"]  # deleted locally


# -------------------------------------------------------------------------------------------- checksums


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
