from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.protocol.names import (
    managed_instance_name,
    parse_managed_name,
    validate_instance_name,
)
from airflow_provider_brev.exceptions import BrevInvalidInputError

EXPIRY = datetime(2026, 11, 30, 18, 5, tzinfo=UTC)


@pytest.mark.parametrize("name", ["a", "train-1", "A.b_c-9", "x" * 63])
def test_valid_names(name):
    assert validate_instance_name(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("x" * 64, "at most 63"),
        ("-lead", "start with a letter"),
        ("has space", "start with"),
        ("a/b", "start"),
    ],
)
def test_invalid_names(name, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        validate_instance_name(name)


def test_managed_name_is_deterministic_valid_and_parseable():
    kwargs = {
        "dag_id": "tao_visual_changenet_retrain" * 3,
        "run_id": "scheduled__2026-11-29T00:00:00+00:00",
        "task_id": "create_instance",
    }
    name = managed_instance_name(**kwargs, expires_at=EXPIRY)
    assert name == managed_instance_name(**kwargs, expires_at=EXPIRY)
    assert len(name) <= 63
    validate_instance_name(name)
    parsed = parse_managed_name(name)
    assert parsed is not None
    assert parsed.prefix == "afbrev"
    assert parsed.expires_at == EXPIRY.replace(second=0)
    assert not parsed.is_expired(EXPIRY - timedelta(minutes=1))
    assert parsed.is_expired(EXPIRY)


def test_managed_name_differs_per_run_task_and_map_index():
    base = {"dag_id": "d", "run_id": "r1", "task_id": "t", "expires_at": EXPIRY}
    names = {
        managed_instance_name(**base),
        managed_instance_name(**{**base, "run_id": "r2"}),
        managed_instance_name(**{**base, "task_id": "u"}),
        managed_instance_name(**base, map_index=3),
    }
    assert len(names) == 4


def test_custom_prefix_and_foreign_names():
    name = managed_instance_name(dag_id="d", run_id="r", task_id="t", expires_at=EXPIRY, prefix="teamx")
    assert parse_managed_name(name).prefix == "teamx"
    assert parse_managed_name("my-notebook") is None
    assert parse_managed_name("afbrev-hand-made") is None
    with pytest.raises(BrevInvalidInputError, match="prefix"):
        managed_instance_name(dag_id="d", run_id="r", task_id="t", expires_at=EXPIRY, prefix="Bad-Prefix")
