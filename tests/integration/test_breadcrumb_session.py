"""A session whose every ``brev`` call prints ``no oauth found for token`` on stdout before its answer (the released
CLI does so when the stored token is a JWT from an issuer it has no authenticator for): the hook's parsers skip the
line, through the hook, in both profiles -- the listing, a search, a create, the readiness wait, a command, a delete.
The simulator's ``token --issuer`` makes such a token by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook

BREADCRUMB = "no oauth found for token"
ISSUER = "https://sso.example.com"


@pytest.fixture
def crumb_hook(brev_sim_both, monkeypatch):
    token = brev_sim_both.make_token(issuer=ISSUER)
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim_both.connection_json(token=token))
    _reset_process_caches()
    yield BrevHook(log_cli_output=False)
    _reset_process_caches()


def test_every_json_answer_is_read_past_the_breadcrumb_line(brev_sim_both, crumb_hook):
    sim, hook = brev_sim_both, crumb_hook
    assert hook.list_instances() == []  # logs in with the connection's token first
    listing = subprocess.run(
        [str(sim.brev_path), "ls", "--json"], env=hook._env(), stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    first, rest = listing.stdout.split("\n", 1)
    assert first == BREADCRUMB and isinstance(json.loads(rest), dict | list)  # the line really precedes the JSON
    assert any(offer.type for offer in hook.search_instance_types())
    hook.create_instance("crumb-2", gpu="L40S:1")
    instance = hook.wait_until_ready("crumb-2", timeout=60, poll_interval=0.1)
    assert (instance.name, instance.status) == ("crumb-2", "RUNNING")
    assert [i.name for i in hook.list_instances()] == ["crumb-2"]
    assert hook.run_command("crumb-2", "echo work").output == "work"
    assert hook.delete_instance("crumb-2", wait=True) is True
    assert hook.get_instance("crumb-2") is None
    assert len([c for c in sim.calls("login") if "--help" not in c["argv"]]) == 1  # never taken for "logged out"


def test_the_simulators_token_command_makes_a_breadcrumb_session_by_hand(brev_sim):
    token = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_provider_brev.testing.simulator",
            "token",
            "--root",
            str(brev_sim.root),
            "--issuer",
            ISSUER,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    brev_sim.login(token=token)
    listing = subprocess.run(["brev", "ls", "--json"], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert listing.stdout.startswith(BREADCRUMB + "\n") and listing.returncode == 0
