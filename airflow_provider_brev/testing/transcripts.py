"""Replaying a transcript of real ``brev`` calls on the simulator, and what differs.

A transcript (:mod:`airflow_provider_brev.core.protocol.transcript`) is one session: its calls are replayed in
order on a fresh simulator of the transcript's CLI version, with the same argv (a scrubbed ``--token`` becomes a
token the simulator accepts, or one it rejects where the record says ``"replay": {"token": "rejected"}``), stdin
``/dev/null`` and no ``ssh-agent`` (as the provider runs ``brev``). For each call, :func:`differences` compares
what the provider makes of the recorded and of the simulated answer: the exit code, the classified outcome, the
JSON answer's shape (keys and value types), and whether the provider's own parser reads the recorded answer
(:func:`provider_reading`). Values (ids, prices, timings) are never compared: they are state, not format.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.output import (
    parse_created_names,
    parse_instances,
    parse_search,
    parse_version,
)
from airflow_provider_brev.core.protocol.transcript import answer_shape, call_outcome, subcommand
from airflow_provider_brev.exceptions import BrevError

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_provider_brev.testing.simulator import BrevSimulator

__all__ = ["Difference", "differences", "load_transcript", "profile_of", "provider_reading", "replay"]

#: A token the simulator rejects (``"replay": {"token": "rejected"}``): not a JWT.
REJECTED_TOKEN = "not-a-valid-token"


@dataclass(frozen=True)
class Difference:
    """One way the simulator's answer to a call differs from the transcript's.

    :param index: the call's position in the transcript (0-based).
    :param command: the call's sub-command.
    :param aspect: ``exit_code``, ``outcome``, ``answer_shape`` or ``provider`` (the provider cannot read the
        recorded answer).
    :param recorded: what the transcript says.
    :param simulated: what the simulator said (``provider``: why the provider could not read it).
    """

    index: int
    command: str
    aspect: str
    recorded: Any
    simulated: Any


def load_transcript(path: Path) -> list[dict[str, Any]]:
    """The records of a transcript file, in call order (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def profile_of(records: list[dict[str, Any]]) -> str:
    """The simulator profile that plays the transcript's CLI: ``released`` (v0.6.x) unless it is newer."""
    versions = [parse_version(record.get("cli_version", "")) for record in records]
    newest = max((version for version in versions if version), default=None)
    return "documented" if newest is not None and newest >= (0, 7, 0) else "released"


def _replay_argv(record: dict[str, Any], sim: BrevSimulator) -> list[str]:
    argv = list(record["argv"])
    rejected = (record.get("replay") or {}).get("token") == "rejected"
    for index in range(1, len(argv)):
        if argv[index - 1] == "--token" and "***" in argv[index]:
            argv[index] = REJECTED_TOKEN if rejected else sim.valid_token
    return argv


def replay(records: list[dict[str, Any]], sim: BrevSimulator, *, timeout: float = 120.0) -> list[dict[str, Any]]:
    """Run every call of the transcript on ``sim`` in order; the simulated records, one per call.

    :param records: the transcript.
    :param sim: an installed simulator nobody else uses (its own HOME).
    :param timeout: each call's budget in seconds.
    """
    env = {
        **os.environ,
        **sim.env(),
        "HOME": str(sim.home),
        "SSH_AUTH_SOCK": "/dev/null",  # as the provider runs brev: no ssh-agent per call
    }
    simulated = []
    previous: tuple[float, float] | None = None  # the previous record's start: recorded, replayed (epoch seconds)
    for record in records:
        argv = _replay_argv(record, sim)
        recorded_at = float(record.get("started_at") or 0.0)
        if previous is not None and recorded_at and previous[0]:
            # the calls run back to back here: move the simulated clock on by what the recording waited more
            # (a readiness probe recorded after the boot must not be replayed during it)
            sim.advance(max(0.0, (recorded_at - previous[0]) - (time.time() - previous[1])))
        previous = (recorded_at, time.time())
        ran = subprocess.run(
            [str(sim.brev_path), *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        simulated.append(
            {"argv": record["argv"], "exit_code": ran.returncode, "stdout": ran.stdout, "stderr": ran.stderr}
        )
    return simulated


def provider_reading(record: dict[str, Any]) -> str:
    """Why the provider's parser cannot read a successful call's answer (``""``: it can, or it reads none).

    :param record: a transcript record.
    """
    argv, stdout = record["argv"], record["stdout"]
    if record["exit_code"] != 0:
        return ""
    command = subcommand(argv)
    try:
        if command == "ls" and "--json" in argv and len([a for a in argv if not a.startswith("-")]) == 1:
            parse_instances(stdout)
        elif command == "search" and "--json" in argv:
            parse_search(stdout)
        elif command == "--version" and parse_version(stdout) is None:
            return "no version in the --version output"
        elif command == "create" and "--dry-run" not in argv:
            names = [a for a in argv[1:] if not a.startswith("-")]
            if names and names[0] not in parse_created_names(stdout):
                return f"the created name {names[0]!r} is not on stdout"
    except BrevError as err:
        return str(err)
    return ""


def differences(index: int, recorded: dict[str, Any], simulated: dict[str, Any]) -> list[Difference]:
    """How the simulator's answer to call ``index`` differs from the recorded one, as the provider reads both.

    :param index: the call's position in the transcript.
    :param recorded: the transcript's record.
    :param simulated: the simulator's record of the same call (:func:`replay`).
    """
    command = subcommand(recorded["argv"])
    found = []
    pairs = [
        ("exit_code", recorded["exit_code"], simulated["exit_code"]),
        ("outcome", call_outcome(recorded), call_outcome(simulated)),
        ("answer_shape", answer_shape(recorded["stdout"]), answer_shape(simulated["stdout"])),
    ]
    for aspect, was, now in pairs:
        if aspect == "answer_shape" and _shapes_agree(was, now):
            continue
        if was != now:
            found.append(Difference(index, command, aspect, was, now))
    unread = provider_reading(recorded)
    if unread:
        found.append(Difference(index, command, "provider", recorded["stdout"][:300], unread))
    return found


def _shapes_agree(recorded: Any, simulated: Any) -> bool:
    """Shapes agree when equal, with one allowance: how many elements a list has is state, not format, so two
    lists agree when either is empty or every simulated element's shape agrees with a recorded one's."""
    if isinstance(recorded, list) and isinstance(simulated, list):
        if recorded[:1] == simulated[:1] == ["list"]:
            was, now = recorded[1:], simulated[1:]
            return not was or not now or all(any(_shapes_agree(w, n) for w in was) for n in now)
        if recorded and simulated and recorded[0] != "list" and simulated[0] != "list":  # objects: [[key, shape]...]
            return len(recorded) == len(simulated) and all(
                w[0] == n[0] and _shapes_agree(w[1], n[1]) for w, n in zip(recorded, simulated, strict=True)
            )
    return bool(recorded == simulated)
