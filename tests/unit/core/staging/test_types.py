"""Unit tests of ``airflow_provider_brev/core/staging/types.py``."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.staging.paths import PathFilter
from airflow_provider_brev.core.staging.rounds import select_downloads
from airflow_provider_brev.core.staging.types import S3Object, StagingPair
from airflow_provider_brev.exceptions import BrevInvalidInputError
from unit.core.staging.rounds_helpers import MD5_A, MD5_B


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
