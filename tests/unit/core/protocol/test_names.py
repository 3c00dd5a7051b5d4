from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.protocol.names import (
    DEFAULT_OWNER_PREFIX,
    ManagedName,
    expiry_minute,
    managed_instance_name,
    parse_managed_name,
    validate_instance_name,
    validate_owner_prefix,
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


def test_names_edges():
    assert DEFAULT_OWNER_PREFIX == "afbrev"
    with pytest.raises(BrevInvalidInputError, match="The instance name is empty"):
        validate_instance_name(3)
    with pytest.raises(BrevInvalidInputError, match="Invalid owner prefix None"):
        validate_owner_prefix(None)  # type: ignore[arg-type]
    assert validate_owner_prefix("ab") == "ab"
    expires = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    name = managed_instance_name(dag_id="My--DAG__x", task_id="T", run_id="r", expires_at=expires)
    assert name.startswith("afbrev-my-dag-x-t-") and name.endswith("-x202612011030")
    parsed = parse_managed_name(name)
    assert parsed == ManagedName("afbrev", "my-dag-x-t", name.split("-")[-2], expires)
    long = managed_instance_name(dag_id="d" * 80, task_id="t", run_id="r", expires_at=expires)
    assert len(long) == 63
    bare = managed_instance_name(dag_id="--", task_id="__", run_id="r", expires_at=expires)
    assert parse_managed_name(bare).slug == ""
    assert parse_managed_name(None) is None  # type: ignore[arg-type]
    assert parse_managed_name("afbrev-x-0123abcd-x202613011030") is None  # month 13
    assert parsed.is_expired(expires) and not parsed.is_expired(expires - timedelta(minutes=1))
    assert ManagedName("p", "s", "d", datetime(2000, 1, 1, tzinfo=UTC)).is_expired()


@pytest.mark.parametrize(
    ("expires_at", "minute"),
    [
        (datetime(2026, 3, 1, 12, 30, 0, tzinfo=UTC), datetime(2026, 3, 1, 12, 30, tzinfo=UTC)),
        (datetime(2026, 3, 1, 12, 30, 0, 1, tzinfo=UTC), datetime(2026, 3, 1, 12, 31, tzinfo=UTC)),
        (datetime(2026, 3, 1, 12, 30, 59, tzinfo=UTC), datetime(2026, 3, 1, 12, 31, tzinfo=UTC)),
        (datetime(2026, 3, 1, 23, 59, 30, tzinfo=UTC), datetime(2026, 3, 2, 0, 0, tzinfo=UTC)),
    ],
)
def test_the_expiry_a_name_holds_is_rounded_up_never_down(expires_at, minute):
    assert expiry_minute(expires_at) == minute


@pytest.mark.parametrize("lifetime", [timedelta(seconds=1), timedelta(seconds=30), timedelta(seconds=59)])
def test_a_lifetime_under_a_minute_does_not_expire_at_once(lifetime):
    now = datetime(2026, 3, 1, 12, 30, 40, tzinfo=UTC)
    name = managed_instance_name(dag_id="d", run_id="r", task_id="t", expires_at=now + lifetime)
    parsed = parse_managed_name(name)
    assert parsed is not None
    assert not parsed.is_expired(now + lifetime - timedelta(microseconds=1))
    assert parsed.expires_at >= now + lifetime
