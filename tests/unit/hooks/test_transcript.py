"""Recording ``brev`` calls into a transcript (``hooks/transcript.py``): off without the variable, one scrubbed JSON
line per call, and a file only its owner can read, whoever created it."""

from __future__ import annotations

import json
import os

from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.transcript import TRANSCRIPT_VARIABLE
from airflow_provider_brev.hooks.transcript import record_call

RESULT = ProcessResult(0, ["ok s3cr3t"], [])


def record(secret: str = "s3cr3t") -> None:
    record_call(["login", "--token", secret], RESULT, secrets=[secret, None], cli_version=lambda: "v0.6.327")


def test_nothing_is_recorded_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(TRANSCRIPT_VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    record()
    assert list(tmp_path.iterdir()) == []


def test_each_call_is_one_scrubbed_line_in_a_file_only_its_owner_reads(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "t.jsonl"
    monkeypatch.setenv(TRANSCRIPT_VARIABLE, str(path))
    record()
    record()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["argv"] for line in lines] == [["login", "--token", "***"]] * 2
    assert "s3cr3t" not in path.read_text(encoding="utf-8")
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_file_that_exists_readable_by_others_is_made_private_before_a_record_is_written(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_text("", encoding="utf-8")
    path.chmod(0o644)  # made by `touch` or an editor under a 022 umask
    monkeypatch.setenv(TRANSCRIPT_VARIABLE, str(path))
    record()
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert len(path.read_text(encoding="utf-8").splitlines()) == 1
