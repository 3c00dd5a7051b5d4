"""The pure decisions of transfer rounds: parameters, what is transferred where, when a file is settled."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.staging.paths import PathFilter
from airflow_provider_brev.core.staging.rounds import (
    DEFAULT_URL_EXPIRES_IN,
    MAX_NAMED_FAILURES,
    MAX_URL_EXPIRES_IN,
    StagedDownload,
    describe_failures,
    name_some,
    parse_keys,
    select_downloads,
    task_order,
    transfer_settings,
)
from airflow_provider_brev.core.staging.types import S3Object
from airflow_provider_brev.exceptions import BrevInvalidInputError
from unit.core.staging.reports_helpers import MD5
from unit.core.staging.rounds_helpers import MD5_A, MD5_B

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
