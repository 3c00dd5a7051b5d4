"""Unit tests of ``airflow_provider_brev/core/staging/lineage.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.staging import lineage as lineage_rules
from airflow_provider_brev.core.staging.lineage import (
    bucket_uris,
    mapping_keys,
    mapping_values,
    s3_dataset,
    s3_datasets,
)


@pytest.mark.parametrize(
    ("uri", "dataset"),
    [
        ("s3://data/train/", ("s3://data", "train")),
        ("s3://data/train", ("s3://data", "train")),  # the same dataset as with the slash
        ("s3://data/runs/r1/out//", ("s3://data", "runs/r1/out")),
        ("s3://data/", ("s3://data", "/")),  # the whole bucket
        ("s3://data", ("s3://data", "/")),
        ("s3://data/specs/train.yaml", ("s3://data", "specs/train.yaml")),
        ("s3://data/runs/X/", ("s3://data", "runs/X")),  # only the slash is dropped, not the letters before it
        ("s3://data/BOX", ("s3://data", "BOX")),
        ("s3://Bad_Bucket/x", None),
        ("gs://data/x", None),
        ("s3://data/a/../b", None),
        ("s3://data/a\nb", None),
        (42, None),
        ("{{ params.bucket }}", None),
        (None, None),
    ],
)
def test_s3_dataset_names(uri, dataset):
    assert s3_dataset(uri) == dataset


def test_datasets_are_listed_once_in_order():
    assert s3_datasets(["s3://bkt/a/", "s3://bkt/a", "s3://cat/x", "nope", "s3://bkt/a/"]) == [
        ("s3://bkt", "a"),
        ("s3://cat", "x"),
    ]
    assert bucket_uris("b", "in/") == ["s3://b/in/"]
    assert bucket_uris("b", None, ["k1", "k2"]) == ["s3://b/k1", "s3://b/k2"]
    assert bucket_uris("b", "", None) == ["s3://b/"]
    assert bucket_uris(None, "x") == []


@pytest.mark.parametrize(
    ("bucket", "prefix", "keys", "uris"),
    [
        ("b", "in/", None, ["s3://b/in/"]),
        ("b", None, None, ["s3://b/"]),
        ("b", 7, None, ["s3://b/"]),  # a prefix that is no string: the whole bucket
        ("b", "in/", ["k1", 2, "k2"], ["s3://b/k1", "s3://b/k2"]),  # keys win over the prefix
        ("b", "in/", "k1", ["s3://b/k1"]),
        ("b", "in/", [], ["s3://b/in/"]),
        ("", "in/", None, []),
        (None, "in/", None, []),
        (["b"], "in/", None, []),
    ],
)
def test_the_uris_a_transfer_names(bucket, prefix, keys, uris):
    assert bucket_uris(bucket, prefix, keys) == uris


@pytest.mark.parametrize(
    ("value", "uris"),
    [
        (None, []),
        ("s3://b/x", ["s3://b/x"]),
        (["s3://b/x", "s3://b/y"], ["s3://b/x", "s3://b/y"]),
        (("s3://b/x",), ["s3://b/x"]),
        ({"s3://b/x": "d"}, []),  # neither one URI nor a list
        (3, []),
    ],
)
def test_a_parameter_of_one_or_several_uris(value, uris):
    assert lineage_rules.listed(value) == uris


@pytest.mark.parametrize(
    ("value", "keys", "values"),
    [
        ({"s3://b/in/": "data", "s3://b/x": "more"}, ["s3://b/in/", "s3://b/x"], ["data", "more"]),
        ({}, [], []),
        (None, [], []),
        (["s3://b/in/"], [], []),  # not a mapping
        ("s3://b/in/", [], []),
    ],
)
def test_the_uris_of_a_steps_inputs_and_outputs(value, keys, values):
    assert (mapping_keys(value), mapping_values(value)) == (keys, values)
