"""The pure decisions of step staging (``airflow_provider_brev.core.staging.manifest``): what an incremental input sync
downloads, and how the manifest on the instance is written and read back."""

from __future__ import annotations

import json
import re

import pytest

from airflow_provider_brev.core.staging.manifest import (
    MANIFEST_NAME,
    ManifestEntry,
    entry_of,
    handoff_manifest,
    manifest_remote_path,
    manifest_source,
    normalize_directory,
    parse_manifest,
    parse_s3_uri,
    plan_input_sync,
    render_manifest,
    validate_inputs,
    validate_outputs,
)
from airflow_provider_brev.core.staging.rounds import StagedDownload
from airflow_provider_brev.core.staging.types import S3Object
from airflow_provider_brev.exceptions import BrevInvalidInputError

SOURCE = "s3://bucket/ds/"


def obj(rel: str, size: int = 10, etag: str = "e1", key: str | None = None) -> StagedDownload:
    return StagedDownload(key=key or f"ds/{rel}", relpath=rel, size=size, etag=etag)


# (case, S3 object, manifest entry or None, local size or None, downloaded?)
CASES = [
    ("unchanged", obj("a"), entry_of(obj("a")), 10, False),
    ("new object, nothing local", obj("a"), None, None, True),
    ("file there but no manifest entry", obj("a"), None, 10, True),
    ("ETag changed in S3", obj("a", etag="e2"), entry_of(obj("a")), 10, True),
    ("size changed in S3", obj("a", size=11), entry_of(obj("a")), 10, True),
    ("same size and ETag, other key", obj("a", key="other/a"), entry_of(obj("a")), 10, True),
    ("deleted locally", obj("a"), entry_of(obj("a")), None, True),
    ("edited locally to another size", obj("a"), entry_of(obj("a")), 7, True),
    ("empty object, unchanged", obj("e", size=0), entry_of(obj("e", size=0)), 0, False),
    ("empty object, deleted locally", obj("e", size=0), entry_of(obj("e", size=0)), None, True),
]


@pytest.mark.parametrize(("case", "item", "known", "local", "fetch"), CASES, ids=[c[0] for c in CASES])
def test_what_an_input_sync_downloads(case, item, known, local, fetch):
    manifest = {} if known is None else {known.relpath: known}
    sizes = {} if local is None else {item.relpath: local}
    plan = plan_input_sync([item], manifest, sizes)
    assert (plan.fetch, plan.unchanged) == (([item], []) if fetch else ([], [item])), case


def test_a_mixed_listing_keeps_its_order_and_splits():
    listing = [obj("a"), obj("b", etag="new"), obj("c")]
    manifest = {e.relpath: e for e in map(entry_of, [obj("a"), obj("b"), obj("c")])}
    plan = plan_input_sync(listing, manifest, {"a": 10, "b": 10})
    assert [i.relpath for i in plan.fetch] == ["b", "c"]
    assert [i.relpath for i in plan.unchanged] == ["a"]


def test_manifest_round_trip_and_source_check():
    entries = [entry_of(obj("z/ü name.bin", 3)), entry_of(obj("a"))]
    text = render_manifest(SOURCE, entries)
    lines = text.splitlines()
    assert json.loads(lines[0]) == {"source": SOURCE}
    assert [json.loads(line)["path"] for line in lines[1:]] == ["a", "z/ü name.bin"]
    assert parse_manifest(lines, SOURCE) == {e.relpath: e for e in entries}
    assert parse_manifest(lines, "s3://bucket/other/") == {}  # another prefix's manifest: nothing is known


@pytest.mark.parametrize(
    "lines",
    [
        [],
        ["not json", json.dumps({"source": SOURCE})],
        [json.dumps({"source": SOURCE}), '{"path": "a", "key": "k", "size": -1, "etag": "e"}'],
        [json.dumps({"source": SOURCE}), '{"path": "a", "key": "k", "size": "x", "etag": "e"}'],
        [json.dumps({"source": SOURCE}), '{"path": "a", "size": 1, "etag": "e"}', "[1, 2]", '{"trunc'],
    ],
)
def test_unreadable_manifest_lines_are_simply_unknown(lines):
    assert parse_manifest(lines, SOURCE) == {}


def test_a_truncated_manifest_keeps_the_lines_that_arrived():
    text = render_manifest(SOURCE, [entry_of(obj("a")), entry_of(obj("b"))])
    assert parse_manifest(text[:-8].splitlines(), SOURCE) == {"a": ManifestEntry("a", "ds/a", 10, "e1")}


def test_manifest_path_for_brev_copy():
    assert manifest_remote_path("data/ds") == "data/ds/.brev-manifest.jsonl"
    assert manifest_remote_path("~/data") == "data/.brev-manifest.jsonl"
    assert manifest_remote_path("/mnt/ds") == "/mnt/ds/.brev-manifest.jsonl"


# --- step directories: below the home, never the home, the root, a variable or the provider's own state -------

HOME_ITSELF = "is the remote home itself"
STATE = "is the provider's own working state"


@pytest.mark.parametrize(
    ("directory", "why"),
    [
        ("~", HOME_ITSELF),
        ("~/", HOME_ITSELF),
        ("~//", HOME_ITSELF),
        ("~/.", HOME_ITSELF),
        (".", HOME_ITSELF),
        ("./", HOME_ITSELF),
        ("/", "is the root directory"),
        ("$HOME", "starts with a variable, which is never expanded"),
        ("${HOME}/ckpt", "starts with a variable, which is never expanded"),
        ("~ubuntu/out", "names another user's home"),
        ("/home", "is, or holds, a home directory"),
        ("/home/ubuntu/", "is, or holds, a home directory"),
        ("/root", "is, or holds, a home directory"),
        (".airflow-brev", STATE),
        ("~/.airflow-brev/jobs", STATE),
        (".airflow-brev-secret-x.env", STATE),
        ("work/.airflow-brev-part-1", STATE),
        ("/home/ubuntu/.airflow-brev", STATE),
        ("", "must be a non-empty path"),
        ("a/../b", "without empty, '.' or '..' components"),
        ("./out", "without empty, '.' or '..' components"),
    ],
)
def test_directories_that_are_not_a_steps_own_are_refused(directory, why):
    with pytest.raises(BrevInvalidInputError, match=re.escape(why)) as err:
        validate_outputs({directory: "s3://bucket/out/"})
    assert str(err.value).startswith("outputs: ")  # names the parameter...
    assert "e.g. 'work/out'" in str(err.value) or "non-empty" in str(err.value)  # ...and what to write instead
    with pytest.raises(BrevInvalidInputError, match="^inputs: "):
        validate_inputs({"s3://bucket/in/": directory})


@pytest.mark.parametrize(
    ("directory", "normalised"),
    [("data", "data"), ("~/data/", "~/data"), ("/mnt/data/", "/mnt/data"), ("/home/ubuntu/out", "/home/ubuntu/out")],
)
def test_directories_below_the_home_or_elsewhere_are_accepted(directory, normalised):
    assert [p.directory for p in validate_outputs({directory: "s3://bucket/out/"})] == [normalised]


def test_the_home_and_a_directory_in_it_are_refused_not_taken_for_two_places():
    with pytest.raises(BrevInvalidInputError, match="remote home itself"):
        validate_outputs({"~": "s3://bucket/a/", "~/ckpt": "s3://bucket/b/"})
    with pytest.raises(BrevInvalidInputError, match="overlap"):
        validate_outputs({"ckpt": "s3://bucket/a/", "~/ckpt/best": "s3://bucket/b/"})


# --- the handoff: a final output sync records what it verified in S3 ---------------------------------------------
def stored(key: str, size: int = 10, etag: str = "e9") -> S3Object:
    return S3Object(key, size, etag)


def test_the_handoff_records_each_verified_file_with_the_etag_s3_lists():
    text = handoff_manifest(
        SOURCE, [], [("a", "ds/a", 10), ("sub/b", "ds/sub/b", 4)], [stored("ds/a"), stored("ds/sub/b", 4, "m-2")]
    )
    assert text is not None
    assert parse_manifest(text.splitlines(), SOURCE) == {
        "a": ManifestEntry("a", "ds/a", 10, "e9"),
        "sub/b": ManifestEntry("sub/b", "ds/sub/b", 4, "m-2"),
    }
    # what a later input sync of that prefix then plans: nothing to download
    listing = [obj("a", etag="e9"), StagedDownload(key="ds/sub/b", relpath="sub/b", size=4, etag="m-2")]
    plan = plan_input_sync(listing, parse_manifest(text.splitlines(), SOURCE), {"a": 10, "sub/b": 4})
    assert (plan.fetch, len(plan.unchanged)) == ([], 2)


@pytest.mark.parametrize(
    ("case", "verified", "objects"),
    [
        ("not in S3 after all", [("a", "ds/a", 10)], []),
        ("S3 holds another size", [("a", "ds/a", 10)], [stored("ds/a", 11)]),
        ("nothing verified", [], [stored("ds/a")]),
    ],
)
def test_the_handoff_records_nothing_it_did_not_verify(case, verified, objects):
    assert handoff_manifest(SOURCE, [], verified, objects) is None, case


def test_the_handoff_keeps_an_input_manifest_of_the_same_source_and_leaves_another_sources_alone():
    current = render_manifest(SOURCE, [entry_of(obj("old"))]).splitlines()
    text = handoff_manifest(SOURCE, current, [("a", "ds/a", 10)], [stored("ds/a")])
    assert text is not None and set(parse_manifest(text.splitlines(), SOURCE)) == {"old", "a"}
    assert handoff_manifest(SOURCE, text.splitlines(), [("a", "ds/a", 10)], [stored("ds/a")]) is None  # unchanged
    other = render_manifest("s3://bucket/elsewhere/", [entry_of(obj("x"))]).splitlines()
    assert handoff_manifest(SOURCE, other, [("a", "ds/a", 10)], [stored("ds/a")]) is None
    assert manifest_source(other) == "s3://bucket/elsewhere/"
    assert manifest_source(["not json", "[1]"]) is None and manifest_source([]) is None


HEADER = json.dumps({"source": SOURCE})

#: (case, a manifest's lines, the source it was written for): the header is the first JSON object, for both readers.
SOURCES = [
    ("a manifest", [HEADER, '{"path": "a", "key": "ds/a", "size": 1, "etag": "e"}'], SOURCE),
    ("after lines that are not JSON objects", ["not json", "[1]", '"x"', HEADER], SOURCE),
    ("the first header counts", [HEADER, json.dumps({"source": "s3://bucket/other/"})], SOURCE),
    ("no lines", [], None),
    ("nothing readable", ["not json", "[1]"], None),
    ("a source that is not a string", ['{"source": 5}', HEADER], None),
    ("an object without a source", ['{"path": "a"}', HEADER], None),
]


@pytest.mark.parametrize(("case", "lines", "source"), SOURCES, ids=[r[0] for r in SOURCES])
def test_the_source_a_manifest_was_written_for(case, lines, source):
    assert manifest_source(lines) == source, case
    # an input sync of SOURCE trusts the same manifests: a header of anything else leaves nothing known
    entries = parse_manifest([*lines, '{"path": "b", "key": "ds/b", "size": 2, "etag": "e"}'], SOURCE)
    assert ("b" in entries) is (source == SOURCE), case


def test_the_handoff_replaces_a_manifest_whose_header_cannot_be_read():
    unreadable = ['{"source": 5}', '{"path": "old", "key": "ds/old", "size": 1, "etag": "e"}']
    text = handoff_manifest(SOURCE, unreadable, [("a", "ds/a", 10)], [stored("ds/a")])
    assert text is not None and parse_manifest(text.splitlines(), SOURCE) == {"a": ManifestEntry("a", "ds/a", 10, "e9")}
    assert handoff_manifest(SOURCE, unreadable, [], []) is None  # nothing verified: left as it is


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
