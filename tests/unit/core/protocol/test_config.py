"""Unit tests of ``airflow_provider_brev/core/protocol/config.py``."""

from __future__ import annotations

import hashlib

import pytest

from airflow_provider_brev.core.protocol.config import BrevCapabilities, BrevConnectionConfig, login_args
from airflow_provider_brev.exceptions import BrevConfigurationError


def test_every_extra_reaches_the_config_and_blanks_are_absent():
    extras = {
        "token": "t",
        "api_key": "bak-1",
        "org_id": "o-1",
        "org": "acme",
        "cli_path": "/bin/brev",
        "cloud_cred_id": "cc",
        "extra__brev__workspace_group_id": "wg",
        "brev_home": "/h",
        "name_prefix": "team",
    }
    config = BrevConnectionConfig.from_extras("brev_x", None, extras)
    assert config == BrevConnectionConfig("brev_x", "t", "bak-1", "o-1", "acme", "/bin/brev", "cc", "wg", "/h", "team")
    blank = BrevConnectionConfig.from_extras(None, "  ", {"token": "", "api_key": None, "org": " x "})
    assert blank == BrevConnectionConfig(None, None, None, None, "x")
    assert blank.name_prefix == "afbrev"
    assert BrevConnectionConfig.from_extras("c", " pw ", {"token": "ignored"}).token == "pw"
    with pytest.raises(AttributeError):
        config.token = "other"  # type: ignore[misc]


def test_the_secret_fingerprint_tells_sessions_apart_without_the_secret():
    def expect(secret):
        return hashlib.sha256(secret.encode()).hexdigest()[:16]

    assert BrevConnectionConfig("c", token="tok").secret_fingerprint == expect("tok")
    assert BrevConnectionConfig("c", token="tok", api_key="bak-k").secret_fingerprint == expect("bak-k")
    assert BrevConnectionConfig("c").secret_fingerprint == ""


def test_api_key_settings_are_validated():
    assert BrevConnectionConfig("c", api_key="bak-1", org_id="o").validate().api_key == "bak-1"
    with pytest.raises(BrevConfigurationError, match="must start with 'bak-'"):
        BrevConnectionConfig("c", api_key="key", org_id="o").validate()
    with pytest.raises(BrevConfigurationError, match="needs the org id"):
        BrevConnectionConfig("c", api_key="bak-1").validate()
    assert BrevConnectionConfig("c", token="t").validate().token == "t"
    assert login_args(BrevConnectionConfig("c")) is None


@pytest.mark.parametrize(
    ("version", "listing"),
    [(None, True), ((0, 6, 317), True), ((0, 6, 316), False), ((0, 7, 0), True), ((0, 6, 318), True)],
)
def test_json_listing_needs_0_6_317(version, listing):
    assert BrevCapabilities(version, "v").has_json_listing is listing


def test_create_flags_decide_the_capabilities():
    caps = BrevCapabilities((0, 6, 327), "v0.6.327", frozenset({"gpu", "cloud-cred-id", "workspace-group-id"}))
    assert (caps.accepts_gpu_spec, caps.accepts_cloud_cred_id, caps.accepts_workspace_group_id) == (True, True, True)
    none = BrevCapabilities((0, 6, 327), "v0.6.327")
    assert (none.accepts_gpu_spec, none.accepts_cloud_cred_id, none.accepts_workspace_group_id) == (False, False, False)
    assert none.create_flags == frozenset()


def test_login_args_and_config_validation():
    assert login_args(BrevConnectionConfig(conn_id="c")) is None
    assert login_args(BrevConnectionConfig(conn_id="c", token="t")) == ["login", "--token", "t"]
    key = BrevConnectionConfig(conn_id="c", token="t", api_key="bak-1", org_id="o")
    assert login_args(key) == ["login", "--api-key", "bak-1", "--org-id", "o"]  # the API key wins
    with pytest.raises(BrevConfigurationError, match="bak-"):
        BrevConnectionConfig(conn_id="c", api_key="nope", org_id="o").validate()
    with pytest.raises(BrevConfigurationError, match="org id"):
        BrevConnectionConfig(conn_id="c", api_key="bak-1").validate()
