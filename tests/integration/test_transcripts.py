"""Transcripts of ``brev`` calls (tests/system/transcripts/*.jsonl) keep the simulator honest: every checked-in transcript
(recorded from real Brev by ``make system-test``, or built from the reference's quoted outputs) is replayed on a
fresh simulator, call by call, and the provider must make the same of both answers -- exit code, classified
outcome, JSON keys and types -- and must read every recorded answer with its own parsers. A difference fails the
test unless ``KNOWN_DIFFERENCES`` explains it. The hook's recording (what ``make system-test`` turns on) is tested
here too: a session recorded through the hook replays without a difference."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_provider_brev.core.protocol.transcript import SOURCES, TRANSCRIPT_VARIABLE, scrub
from airflow_provider_brev.hooks.base import _reset_process_caches
from airflow_provider_brev.hooks.brev import BrevHook
from airflow_provider_brev.testing.simulator import BrevSimulator
from airflow_provider_brev.testing.transcripts import Difference, differences, load_transcript, profile_of, replay

if TYPE_CHECKING:
    from collections.abc import Callable

TRANSCRIPTS = sorted((Path(__file__).resolve().parents[1] / "system" / "transcripts").glob("*.jsonl"))


@dataclass(frozen=True)
class KnownDifference:
    """A difference the simulator may show, and why.

    :param command: the sub-command it concerns.
    :param aspect: ``exit_code``, ``outcome``, ``answer_shape`` or ``provider``.
    :param matches: whether a difference of that command and aspect is this one.
    :param why: the reason, for whoever reads a failure.
    """

    command: str
    aspect: str
    matches: Callable[[Any, Any], bool]
    why: str

    def explains(self, difference: Difference) -> bool:
        return (self.command, self.aspect) == (difference.command, difference.aspect) and self.matches(
            difference.recorded, difference.simulated
        )


def _listed(shape: Any) -> bool:
    """An ``ls --json`` answer that lists at least one instance."""
    if not (isinstance(shape, list) and len(shape) == 1 and shape[0][0] == "workspaces"):
        return False
    listing = shape[0][1]
    return isinstance(listing, list) and listing[:1] == ["list"] and len(listing) > 1


EMPTY_LISTING = [["workspaces", "null"]]

#: Differences between a transcript and the simulator's replay that are understood. Each says why; add one only
#: with its reason (a timing the replay cannot reproduce, a value of the real account), never to silence a format
#: the simulator gets wrong -- fix the simulator instead.
KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    # The replay runs the calls back to back, at the simulator's speed: a listing recorded after an instance was
    # gone (a wait for a deletion) may be replayed while it is still DELETING, and a listing recorded while Brev was
    # still deleting (minutes) is replayed after the simulator's 0.3 s. Empty, the CLI prints `null` (a nil Go
    # slice); listed, an array of the same objects: both are the format, the count is state. A listing that turns
    # into `[]` (or anything else) is still a difference.
    KnownDifference(
        "ls",
        "answer_shape",
        lambda recorded, simulated: (
            {recorded == EMPTY_LISTING, simulated == EMPTY_LISTING} == {True, False}
            and (_listed(recorded) or _listed(simulated))
        ),
        "an instance listed in one answer is gone in the other: empty is null, listed is an array",
    ),
)


def unexplained(found: list[Difference]) -> list[Difference]:
    return [d for d in found if not any(known.explains(d) for known in KNOWN_DIFFERENCES)]


def replay_differences(records: list[dict[str, Any]], root: Path) -> list[Difference]:
    sim = BrevSimulator(root, profile=profile_of(records)).install()
    try:
        simulated = replay(records, sim)
    finally:
        sim.kill_all()
    return [d for index, pair in enumerate(zip(records, simulated, strict=True)) for d in differences(index, *pair)]


def test_the_transcripts_folder_is_seeded_and_every_record_says_where_it_came_from():
    assert any(path.name.startswith("reference-") for path in TRANSCRIPTS)
    for path in TRANSCRIPTS:
        for record in load_transcript(path):
            assert record["source"] in SOURCES, (path.name, record["argv"])
            assert record["source"] != "reference" or record.get("ref"), "a reference record names its section"
            assert {"argv", "exit_code", "stdout", "stderr", "cli_version"} <= set(record)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[path.stem for path in TRANSCRIPTS])
def test_a_checked_in_transcript_holds_nothing_shaped_or_named_like_a_credential(path):
    """What the recorder scrubs whatever the connection holds is already gone from every transcript in the folder
    (one contributed by hand, or recorded before a shape was scrubbed, must be scrubbed again)."""
    for record in load_transcript(path):
        for text in [*record["argv"], record["stdout"], record["stderr"]]:
            assert scrub(text, []) == text, (path.name, record["argv"])


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[path.stem for path in TRANSCRIPTS])
def test_the_simulator_answers_every_transcribed_call_as_the_provider_reads_it(path, tmp_path):
    records = load_transcript(path)
    assert unexplained(replay_differences(records, tmp_path / "sim")) == []


def test_a_changed_format_is_noticed(tmp_path):
    """The replay is no rubber stamp: a transcript whose CLI answered otherwise differs, in each aspect."""
    (reference,) = [path for path in TRANSCRIPTS if path.name == "reference-v0.6.327.jsonl"]
    records = load_transcript(reference)[:7]  # --version ... delete of a missing instance
    listing = next(i for i, r in enumerate(records) if r["argv"] == ["search", "--json"])
    rows = json.loads(records[listing]["stdout"])
    rows[0]["gpu"] = rows[0].pop("gpu_name")  # a renamed key (the TAO SDK's expectation)
    records[listing] = {**records[listing], "stdout": json.dumps(rows)}
    flag = next(i for i, r in enumerate(records) if r["argv"][:2] == ["delete", "--yes"])
    records[flag] = {**records[flag], "exit_code": 0, "stderr": ""}  # a CLI that accepts --yes
    found = {(d.index, d.aspect) for d in replay_differences(records, tmp_path / "sim")}
    assert found == {(listing, "answer_shape"), (flag, "exit_code"), (flag, "outcome")}
    assert unexplained([Difference(flag, "delete", "exit_code", 0, 1)])  # nothing explains it away
    listed = [["workspaces", ["list", [["name", "string"]]]]]
    assert not unexplained([Difference(0, "ls", "answer_shape", EMPTY_LISTING, listed)])  # empty vs listed: state
    assert not unexplained([Difference(0, "ls", "answer_shape", listed, EMPTY_LISTING)])
    assert unexplained([Difference(0, "ls", "answer_shape", [["workspaces", ["list"]]], EMPTY_LISTING)])  # [] is format
    assert unexplained([Difference(0, "ls", "answer_shape", EMPTY_LISTING, [["instances", "null"]])])


def test_the_hooks_recording_is_a_transcript_that_replays_without_a_difference(brev_sim, tmp_path, monkeypatch):
    """What `make system-test` does against real Brev, with the simulator standing in: every `brev` call the hook
    makes lands in the transcript, the token nowhere; replayed on a fresh simulator, nothing differs."""
    transcript = tmp_path / "recorded.jsonl"
    monkeypatch.setenv(TRANSCRIPT_VARIABLE, str(transcript))
    token = brev_sim.valid_token
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", brev_sim.connection_json(token=token))
    _reset_process_caches()
    hook = BrevHook(log_cli_output=False)
    try:
        hook.create_instance("rec-1", gpu="L40S:1")
        hook.wait_until_ready("rec-1", timeout=60, poll_interval=0.1)
        assert hook.run_command("rec-1", "echo recorded").output == "recorded"
        assert hook.delete_instance("rec-1", wait=True) is True
        assert hook.delete_instance("never-created-1") is False
    finally:
        _reset_process_caches()
    text = transcript.read_text(encoding="utf-8")
    assert token not in text and "***" in text
    assert oct(os.stat(transcript).st_mode & 0o777) == "0o600"
    records = load_transcript(transcript)
    commands = [r["argv"][0] for r in records]
    assert {"--version", "create", "login", "search", "ls", "exec", "delete"} <= set(commands)
    assert len(records) == len([c for c in brev_sim.calls()])  # every call, nothing else
    assert {r["source"] for r in records} == {"recorded"}
    assert records[0]["cli_version"] == "Current Version: v0.6.327"
    assert unexplained(replay_differences(records, tmp_path / "replay")) == []


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_system_test_records_a_transcript_in_the_transcripts_folder(tmp_path):
    """`make system-test` runs the system tests with the recording on, into tests/system/transcripts/ (its pytest stood in
    for by a script that prints what it was given: nothing real runs)."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "pytest").write_text(
        '#!/bin/sh\necho "$BREV_SYSTEM_TEST|$AIRFLOW_PROVIDER_BREV_TRANSCRIPT|$*"\n', encoding="utf-8"
    )
    (tmp_path / "pytest").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != TRANSCRIPT_VARIABLE and not k.startswith("MAKE")}
    ran = subprocess.run(
        ["make", "-s", "-o", "sync", "system-test", f"BIN={tmp_path}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    mode, transcript, args = ran.stdout.strip().split("|")
    assert (mode, args) == ("real", "tests/system -v")
    assert re.fullmatch(re.escape(f"{root}/tests/system/transcripts/real-") + r"\d{8}T\d{6}Z\.jsonl", transcript)
