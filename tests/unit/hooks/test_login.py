"""The scratch HOME a ``brev login`` runs in (``hooks/login.py``): what it holds, and what a successful login moves
into ``~/.brev`` (the failed case and the DAG-level behaviour: tests/integration/test_hook.py, test_proof_misc.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from airflow_provider_brev.hooks.login import MAX_STATE_FILE_BYTES, adopt_login, scratch_home

if TYPE_CHECKING:
    from pathlib import Path


def test_the_login_sees_the_clis_state_and_only_what_it_wrote_is_moved(tmp_path: Path) -> None:
    brev_dir = tmp_path / ".brev"
    brev_dir.mkdir()
    state = {
        "credentials.json": '{"access_token": "old", "refresh_token": "auto-login"}',
        "active_org.json": '{"id": "org-2", "name": "chosen"}',
        "personal_settings.json": '{"analytics_enabled": false}',  # the user's opt-out, read by every command
        "brev.pem": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    }
    for name, text in state.items():
        (brev_dir / name).write_text(text)
    (brev_dir / "cloudflared").write_bytes(b"\0" * (MAX_STATE_FILE_BYTES + 1))
    (brev_dir / ".airflow-provider-brev-login.lock").write_text("")
    with scratch_home(brev_dir) as scratch:
        copied = scratch / ".brev"
        assert {path.name: path.read_text() for path in copied.iterdir()} == state
        assert oct(scratch.stat().st_mode & 0o777) == "0o700"
        (copied / "credentials.json").write_text('{"access_token": "new", "refresh_token": "auto-login"}')
        (copied / "user_cache.json").write_text("{}")
        moved = adopt_login(scratch, brev_dir)
    assert moved == ["user_cache.json", "credentials.json"]  # what it wrote, the session last; the rest untouched
    assert json.loads((brev_dir / "credentials.json").read_text())["access_token"] == "new"
    assert (brev_dir / "active_org.json").read_text() == state["active_org.json"]
    assert sorted(path.name for path in brev_dir.iterdir() if path.is_dir()) == []  # the scratch HOME is gone
