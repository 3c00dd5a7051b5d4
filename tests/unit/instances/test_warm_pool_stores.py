"""Where the warm pool's records are stored (airflow_provider_brev/instances/warm_pool_stores.py): a write that meets
a locked SQLite metadata database is retried, never lost; any other error is raised at once."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy.exc import OperationalError

from airflow_provider_brev.instances import warm_pool_stores
from airflow_provider_brev.instances.warm_pool_stores import retry_while_locked


def failing(times: int, error: BaseException):
    calls = []

    def write() -> None:
        calls.append(1)
        if len(calls) <= times:
            raise error

    return write, calls


def locked() -> OperationalError:
    return OperationalError("DELETE FROM variable", {}, sqlite3.OperationalError("database is locked"))


def test_a_write_to_a_locked_database_is_tried_again_until_it_lands():
    write, calls = failing(3, locked())
    retry_while_locked(write)
    assert len(calls) == 4


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("INSERT", {}, sqlite3.OperationalError("no such table: variable")),
        ValueError("not a database error"),
    ],
    ids=["other-operational-error", "other-error"],
)
def test_any_other_error_is_raised_at_once(error):
    write, calls = failing(1, error)
    with pytest.raises(type(error)):
        retry_while_locked(write)
    assert len(calls) == 1


def test_a_lock_that_outlasts_the_limit_is_raised(monkeypatch):
    monkeypatch.setattr(warm_pool_stores, "SQLITE_LOCKED_RETRY_SECONDS", 0.0)
    write, calls = failing(1000, locked())
    with pytest.raises(OperationalError, match="database is locked"):
        retry_while_locked(write)
    assert len(calls) == 1
