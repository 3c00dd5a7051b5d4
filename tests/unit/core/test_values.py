"""Unit tests of ``airflow_provider_brev/core/values.py``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_provider_brev.core import validation, values
from airflow_provider_brev.core import validation as v
from airflow_provider_brev.exceptions import BrevInvalidInputError, retry_policy

GOOD = [
    (values.positive_number, ("p", 2), {}, 2.0),
    (values.positive_number, ("p", "2.5"), {}, 2.5),
    (values.positive_number, ("p", " 1e3 "), {}, 1000.0),
    (values.positive_number, ("p", 10), {"maximum": 10}, 10.0),
    (values.non_negative, ("p", 0), {}, 0.0),
    (values.non_negative, ("p", "0.0"), {}, 0.0),
    (values.integer, ("p", "0"), {"minimum": 0}, 0),
    (values.integer, ("p", 3.0), {"minimum": 1}, 3),
    (values.integer, ("p", 7), {"minimum": 1, "maximum": 7}, 7),
    (values.positive_int, ("p", "12"), {}, 12),
    (values.duration_seconds, ("d", 600), {}, 600.0),
    (values.duration_seconds, ("d", "90"), {}, 90.0),
    (values.duration_seconds, ("d", timedelta(minutes=2)), {}, 120.0),
    (values.duration_seconds, ("d", timedelta(0)), {"allow_zero": True}, 0.0),
    (values.duration_seconds, ("d", "0"), {"allow_zero": True}, 0.0),
    (values.bool_value, ("b", True), {}, True),
    (values.bool_value, ("b", "False"), {}, False),
    (values.bool_value, ("b", " Yes "), {}, True),
    (values.bool_value, ("b", "off"), {}, False),
    (values.bool_value, ("b", 1), {}, True),
    (values.bool_value, ("b", 0), {}, False),
    (values.bool_value, ("b", ""), {"default": True}, True),
    (values.bool_value, ("b", None), {"default": False}, False),
    (values.bool_value, ("b", "None"), {"default": True}, True),
    (values.choice, ("c", " kill "), {"allowed": ("kill", "keep")}, "kill"),
    (values.safe_text, ("t", "~/data/in"), {}, "~/data/in"),
    (values.safe_text, ("t", 20260101), {}, "20260101"),  # native rendering of {{ ds_nodash }}
    (values.safe_text, ("t", ""), {"allow_empty": True}, ""),
    (values.conn_id, ("c", "brev_default"), {}, "brev_default"),
    (values.conn_id, ("c", "aws-prod.eu:1"), {}, "aws-prod.eu:1"),
    (v.placement_id, ("p", "cc-3f9a"), {}, "cc-3f9a"),
    (values.env_name, ("e", "_MY_VAR2"), {}, "_MY_VAR2"),
    (v.instance_name, ("n", "my-box.1"), {}, "my-box.1"),
    (v.instance_name, ("n", 42), {}, "42"),
    (v.owner_prefix, ("n", "team7"), {}, "team7"),
    (v.s3_bucket, ("s3_bucket", " my-bucket "), {}, "my-bucket"),
]


@pytest.mark.parametrize(("check", "args", "kwargs", "expected"), GOOD)
def test_good_values_are_parsed(check, args, kwargs, expected):
    result = check(*args, **kwargs)
    assert result == expected
    assert type(result) is type(expected)


BAD = [
    (values.positive_number, ("poll_interval", -1), {}, "positive number"),
    (values.positive_number, ("poll_interval", 0), {}, "positive number"),
    (values.positive_number, ("poll_interval", "nan"), {}, "positive number"),
    (values.positive_number, ("poll_interval", float("nan")), {}, "positive number"),
    (values.positive_number, ("poll_interval", float("inf")), {}, "positive number"),
    (values.positive_number, ("poll_interval", "-inf"), {}, "positive number"),
    (values.positive_number, ("poll_interval", "soon"), {}, "positive number"),
    (values.positive_number, ("poll_interval", ""), {}, "positive number"),
    (values.positive_number, ("poll_interval", None), {}, "positive number"),
    (values.positive_number, ("poll_interval", True), {}, "positive number"),  # a boolean is not a number
    (values.positive_number, ("poll_interval", [1]), {}, "positive number"),
    (values.positive_number, ("poll_interval", 10**400), {}, "positive number"),
    (values.positive_number, ("min_vram", 11), {"maximum": 10}, "no greater than 10"),
    (values.non_negative, ("cli_retry_delay", -0.5), {}, ">= 0"),
    (values.integer, ("max_attempts", 0), {"minimum": 1}, ">= 1"),
    (values.integer, ("max_attempts", 2.5), {"minimum": 1}, "whole number"),
    (values.integer, ("max_attempts", "2.5"), {"minimum": 1}, "whole number"),
    (values.integer, ("max_attempts", False), {"minimum": 0}, "whole number"),
    (values.integer, ("part_size", 11), {"minimum": 1, "maximum": 10}, "<= 10"),
    (values.positive_int, ("cli_retry_limit", -3), {}, ">= 1"),
    (values.duration_seconds, ("ready_timeout", 0), {}, "positive number of seconds"),
    (values.duration_seconds, ("ready_timeout", "-5"), {}, "positive number of seconds"),
    (values.duration_seconds, ("ready_timeout", "1 hour"), {}, "positive number of seconds"),
    (values.duration_seconds, ("ready_timeout", 1e300), {}, "no greater than 315360000"),
    (values.duration_seconds, ("max_lifetime", timedelta(hours=-1)), {}, "positive timedelta"),
    (values.duration_seconds, ("grace_period", timedelta(seconds=-1)), {"allow_zero": True}, "non-negative timedelta"),
    (values.bool_value, ("overwrite", "maybe"), {}, "boolean"),
    (values.bool_value, ("overwrite", ""), {}, "boolean"),  # empty without a default
    (values.bool_value, ("overwrite", 2), {}, "boolean"),
    (values.bool_value, ("overwrite", None), {}, "boolean"),
    (values.choice, ("on_kill_action", "stop"), {"allowed": ("kill", "keep")}, "'keep', 'kill'"),
    (values.safe_text, ("remote_dir", "a\nb"), {}, "newlines"),
    (values.safe_text, ("remote_dir", "a\x00b"), {}, "NUL"),
    (values.safe_text, ("remote_dir", "a\rb"), {}, "newlines"),
    (values.safe_text, ("remote_dir", "  "), {}, "non-empty"),
    (values.safe_text, ("remote_dir", ["x"]), {}, "non-empty"),
    (values.conn_id, ("aws_conn_id", "my conn"), {}, "connection id"),
    (values.conn_id, ("aws_conn_id", "x" * 251), {}, "connection id"),
    (v.placement_id, ("cloud_cred_id", "--org=evil"), {}, "starting with a letter or digit"),
    (v.placement_id, ("cloud_cred_id", "a b"), {}, "starting with a letter or digit"),
    (values.env_name, ("env", "1ABC"), {}, "environment variable name"),
    (values.env_name, ("env", "A-B"), {}, "environment variable name"),
    (v.instance_name, ("instance_name", "bad name!"), {}, "Invalid instance name"),
    (v.instance_name, ("instance_name", "x" * 64), {}, "at most 63"),
    (v.instance_name, ("instance_name", ""), {}, "empty"),
    (v.owner_prefix, ("name_prefix", "Bad-Prefix"), {}, "Invalid owner prefix"),
    (v.s3_bucket, ("s3_bucket", "UPPER_case"), {}, "Invalid bucket name"),
    (v.s3_bucket, ("s3_bucket", "bucket/prefix"), {}, "bucket name alone"),
    (v.s3_bucket, ("s3_bucket", " "), {}, "non-empty"),
]


@pytest.mark.parametrize(("check", "args", "kwargs", "fragment"), BAD)
def test_bad_values_name_the_parameter_and_are_not_retried(check, args, kwargs, fragment):
    with pytest.raises(BrevInvalidInputError) as raised:
        check(*args, **kwargs)
    message = str(raised.value)
    assert args[0] in message, message
    assert fragment in message
    assert retry_policy(raised.value) == "never"


@pytest.mark.parametrize("empty", [None, "", "  ", "None", "none"])
def test_optional_turns_empty_into_none(empty):
    assert values.is_empty(empty)
    assert values.optional(values.positive_number, "min_vram", empty) is None


@pytest.mark.parametrize("value", [0, "0", False, [], "x"])
def test_optional_checks_everything_that_is_not_empty(value):
    assert not values.is_empty(value)
    with pytest.raises(BrevInvalidInputError, match="min_vram"):
        values.optional(values.positive_number, "min_vram", value)


def test_optional_passes_limits_through():
    assert values.optional(values.integer, "n", "0", minimum=0) == 0
    with pytest.raises(BrevInvalidInputError, match=">= 2"):
        values.optional(values.integer, "n", "1", minimum=2)


def test_named_keeps_a_message_that_already_names_the_parameter_and_prefixes_others():
    def complains(value):
        raise BrevInvalidInputError(f"value {value} is wrong")

    def raises_plain_value_error(value):
        raise ValueError("not like that")

    def names_it(value):
        raise BrevInvalidInputError("the gpu is wrong")

    with pytest.raises(BrevInvalidInputError, match=r"^gpu: value 3 is wrong$"):
        values.named("gpu", complains, 3)
    with pytest.raises(BrevInvalidInputError, match=r"^gpu: not like that$"):
        values.named("gpu", raises_plain_value_error, 3)
    with pytest.raises(BrevInvalidInputError, match=r"^the gpu is wrong$"):
        values.named("gpu", names_it, 3)
    assert values.named("gpu", str.upper, "a") == "A"


@pytest.mark.parametrize(
    ("check", "args", "kwargs", "expected"),
    [
        (values.env_mapping, ("env", {"A_1": 5}), {}, {"A_1": "5"}),
        (values.env_mapping, ("env", {}), {}, None),
        (values.env_mapping, ("env", "None"), {}, None),
        (values.exit_codes, ("codes", 3), {}, [3]),
        (values.exit_codes, ("codes", ["255", 0, 0]), {}, [0, 255]),
        (values.exit_codes, ("codes", None), {}, []),
        (values.regex, ("r", r"Epoch (\d+)/(\d+)"), {}, r"Epoch (\d+)/(\d+)"),
        (v.s3_uri, ("u", " s3://bucket/in/ "), {}, "s3://bucket/in/"),
        (v.s3_uri, ("u", "s3://bucket/specs/a.yaml"), {"object_key": True}, "s3://bucket/specs/a.yaml"),
        (v.directory, ("d", "~/tao-results/"), {}, "~/tao-results/"),
        (v.directory, ("d", "/data/out"), {}, "/data/out"),
    ],
)
def test_collection_and_text_checks_parse_good_values(check, args, kwargs, expected):
    assert check(*args, **kwargs) == expected


@pytest.mark.parametrize(
    ("check", "args", "kwargs", "fragment"),
    [
        (values.env_mapping, ("secret_env", {"A;rm -rf ~": "x"}), {}, "secret_env key must be an environment variable"),
        (values.env_mapping, ("env", ["A=b"]), {}, "env must be a dict of environment variables"),
        (values.env_mapping, ("secret_env", {"TOKEN": "t0k\x00en"}), {}, r"secret_env\['TOKEN'\] must not contain NUL"),
        (values.exit_codes, ("skip_on_exit_code", 256), {}, "skip_on_exit_code must be a whole number >= 0 and <= 255"),
        (values.exit_codes, ("skip_on_exit_code", [1, "x"]), {}, "skip_on_exit_code must be a whole number"),
        (values.regex, ("progress_regex", "(\\d+"), {}, "progress_regex must be a valid regular expression"),
        (v.s3_uri, ("s3_inputs", "http://b/k"), {}, "s3_inputs: Expected an s3://bucket/prefix URI"),
        (v.s3_uri, ("spec_s3_uri", "s3://Bad_Bucket/k"), {}, "spec_s3_uri: Invalid bucket name"),
        (v.s3_uri, ("spec_s3_uri", "s3://bucket/specs/"), {"object_key": True}, "the URI of an S3 object"),
        (v.directory, ("results_dir", "a/../b"), {}, "results_dir: "),
        (v.directory, ("results_dir", ""), {}, "results_dir must be a non-empty string"),
    ],
)
def test_collection_and_text_checks_name_the_parameter(check, args, kwargs, fragment):
    with pytest.raises(BrevInvalidInputError, match=fragment) as raised:
        check(*args, **kwargs)
    assert "t0k" not in str(raised.value)  # an environment value (maybe a secret) is never shown


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("true", True),
        ("Yes", True),
        (" on ", True),
        ("0", False),
        ("FALSE", False),
        ("no", False),
        ("off", False),
        (1, True),
        (0, False),
        (True, True),
    ],
)
def test_every_boolean_word(value, expected):
    assert values.bool_value("flag", value) is expected


@pytest.mark.parametrize("value", [2, "T", "y", "none", 1.0, [], "  "])
def test_other_words_are_not_booleans(value):
    with pytest.raises(BrevInvalidInputError, match="flag must be a boolean"):
        values.bool_value("flag", value)


def test_empty_booleans_take_the_default():
    assert values.bool_value("flag", None, default=True) is True
    assert values.bool_value("flag", "None", default=False) is False
    assert values.bool_value("flag", False, default=True) is False


def test_ints_from_native_rendering_become_text_but_booleans_do_not():
    assert values.safe_text("tag", 20261201) == "20261201"
    assert validation.instance_name("name", 12345) == "12345"
    with pytest.raises(BrevInvalidInputError, match="tag must be a non-empty string"):
        values.safe_text("tag", True)
    with pytest.raises(BrevInvalidInputError, match="name"):
        validation.instance_name("name", True)
    assert values.safe_text("tag", "", allow_empty=True) == ""
    with pytest.raises(BrevInvalidInputError, match="tag must be a string"):
        values.safe_text("tag", None, allow_empty=True)


def test_numbers_and_messages():
    assert values.integer("n", 0, minimum=0) == 0
    assert values.non_negative("n", "0") == 0.0
    with pytest.raises(BrevInvalidInputError, match=r"n must be a number >= 0 of GB, got -1"):
        values.non_negative("n", -1, unit="GB")
    with pytest.raises(BrevInvalidInputError, match=r"no greater than 5"):
        values.positive_number("n", 6, maximum=5)
    assert values.positive_number("n", 5, maximum=5) == 5.0
    with pytest.raises(BrevInvalidInputError, match="a connection id"):
        values.conn_id("brev_conn_id", "bad id")
    with pytest.raises(BrevInvalidInputError, match="an id as `brev` lists it"):
        validation.placement_id("cloud_cred_id", "-flag")
    with pytest.raises(BrevInvalidInputError, match="the URI of an S3 object"):
        validation.s3_uri("spec_uri", "s3://bucket/", object_key=True)
    with pytest.raises(BrevInvalidInputError, match="the URI of an S3 object"):
        validation.s3_uri("spec_uri", "s3://bucket", object_key=True)
    assert validation.s3_uri("spec_uri", " s3://bucket/a.yaml ", object_key=True) == "s3://bucket/a.yaml"
