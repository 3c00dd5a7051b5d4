"""Unit tests of ``airflow_provider_brev/core/staging/types.py``."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.staging.types import S3Object, StagingPair


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
