"""LeptonHook against the fake Lepton workspace through the real leptonai SDK: typed errors for the API's answers,
transient ones retried, the token in no message."""

from __future__ import annotations

import json

import pytest

from airflow_provider_brev.exceptions import (
    LeptonAuthError,
    LeptonConfigurationError,
    LeptonJobExistsError,
    LeptonRejectedError,
    LeptonResourcesUnavailableError,
    LeptonTransientError,
)

pytest.importorskip("leptonai.api.v2.client", reason="the lepton extra (leptonai) is not installed")

BODY = {
    "metadata": {"id": "af-hook-t1", "name": "af-hook-t1"},
    "spec": {
        "resource_shape": "cpu.small",
        "container": {"image": "docker.io/library/ubuntu:22.04", "command": ["true"]},
    },
}


@pytest.fixture
def hook(lepton_fake):
    from airflow_provider_brev.hooks.lepton import LeptonHook

    return LeptonHook(retry_delay=0.01)


def test_jobs_are_created_found_stopped_and_deleted(hook, lepton_fake):
    created = hook.create_job(BODY)
    assert created["metadata"]["id"] == "af-hook-t1"
    with pytest.raises(LeptonJobExistsError):
        hook.create_job(BODY)
    assert hook.get_job("af-hook-t1")["status"]["state"] in {"Queueing", "Starting", "Running", "Completed"}
    assert hook.stop_job("af-hook-t1") is True
    assert hook.delete_job("af-hook-t1") is True
    assert hook.get_job("af-hook-t1") is None and hook.delete_job("af-hook-t1") is False
    assert hook.poll_job("af-hook-t1", 1).job is None


@pytest.mark.parametrize(
    ("status", "message", "error"),
    [
        (401, "", LeptonAuthError),
        (403, "forbidden", LeptonAuthError),
        (403, "quota exceeded", LeptonResourcesUnavailableError),
        (400, "unknown resource shape", LeptonRejectedError),
    ],
)
def test_refusals_are_typed_and_never_carry_the_token(hook, lepton_fake, status, message, error):
    lepton_fake.fail(status, path="/jobs", method="POST", message=message)
    with pytest.raises(error) as raised:
        hook.create_job(BODY)
    assert lepton_fake.token not in str(raised.value) and lepton_fake.token[-6:] not in str(raised.value)
    assert len([r for r in lepton_fake.requests if r["method"] == "POST"]) == 1  # not retried


def test_5xx_is_retried_then_succeeds_or_gives_up(hook, lepton_fake):
    lepton_fake.fail(503, path="/jobs/.*", method="GET", times=2)
    assert hook.get_job("af-none") is None  # two 503s, then the real 404
    lepton_fake.fail(502, path="/jobs/.*", method="GET", times=10)
    with pytest.raises(LeptonTransientError):
        hook.get_job("af-none")


def test_a_wrong_token_and_a_missing_connection(lepton_fake, monkeypatch):
    from airflow_provider_brev.hooks.lepton import LeptonHook

    conn = json.loads(lepton_fake.connection_json())
    monkeypatch.setenv("AIRFLOW_CONN_LEPTON_BAD", json.dumps({**conn, "password": "lep-wrong-token"}))
    ok, message = LeptonHook("lepton_bad").test_connection()
    assert not ok and "401" in message and "lep-wrong-token" not in message
    assert LeptonHook().test_connection()[0]
    monkeypatch.setenv("AIRFLOW_CONN_LEPTON_EMPTY", json.dumps({"conn_type": "lepton", "login": "ws"}))
    with pytest.raises(LeptonConfigurationError, match="token"):
        LeptonHook("lepton_empty").get_job("x")


def test_a_secret_the_sdk_refuses_is_not_quoted(hook, lepton_fake):
    """The SDK's own check (pydantic) quotes the value it refuses: for a secret, the message leaves it out."""
    value = {"url": "https://bucket.s3.amazonaws.com/key?X-Amz-Signature=" + "5e" * 16}
    with pytest.raises(LeptonRejectedError) as refused:
        hook.create_secret("af-hook-secret", value)  # type: ignore[arg-type]  # not a str: refused by SecretItem
    assert "X-Amz-Signature" not in str(refused.value) and "5e5e" not in str(refused.value)
    assert "create secret af-hook-secret" in str(refused.value)
