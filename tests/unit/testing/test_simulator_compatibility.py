"""docs/simulator.md's compatibility tables list exactly what the simulator's command tables hold: every ``brev``
command and flag (both profiles) and every ``docker`` command and flag, with a status that matches what the
simulator does with it (a command it refuses is *absent*, one it runs is not)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_provider_brev.testing.fake_brev.commands import COMMANDS, _unsimulated
from airflow_provider_brev.testing.fake_brev.flags import GLOBAL_FLAGS
from airflow_provider_brev.testing.fake_docker.commands import FLAGS, HANDLERS, MANAGEMENT, UNSIMULATED

DOC = Path(__file__).resolve().parents[3] / "docs" / "simulator.md"
STATUSES = {"implemented", "different", "absent"}


def table(first_header: str) -> dict[tuple[str, str], tuple[str, str]]:
    """The rows of the table whose first header cell is ``first_header``: (command, flag) -> (status, note)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows: dict[tuple[str, str], tuple[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        command, flag, status, note = (cell.strip() for cell in line.strip("|").split("|", 3))
        key = (command.strip("`"), flag.strip("`").removeprefix("--"))
        assert key not in rows, f"{key} listed twice"
        rows[key] = (status, note)
    assert rows, f"no rows under {first_header!r}"
    return rows


def brev_rows() -> set[tuple[str, str]]:
    """What the fake brev knows: each command, each flag of it in either profile, the global flags."""
    rows = {("(global)", flag.name) for flag in GLOBAL_FLAGS}
    for name, spec in COMMANDS.items():
        rows.add((name, ""))
        for profile in (SimpleNamespace(documented=False), SimpleNamespace(documented=True)):
            rows |= {(name, flag.name) for flag in spec["flags"](profile)}
    return rows


def docker_rows() -> set[tuple[str, str]]:
    rows = {(name, "") for name in [*HANDLERS, *MANAGEMENT, *UNSIMULATED]}
    return rows | {(name, flag.name) for name, flags in FLAGS.items() for flag in flags}


@pytest.mark.parametrize(("header", "known"), [("`brev` command", brev_rows), ("`docker` command", docker_rows)])
def test_the_table_lists_every_command_and_flag_and_nothing_the_simulator_runs_is_missing(header, known) -> None:
    rows = table(header)
    assert {status for status, _ in rows.values()} <= STATUSES
    assert known() - set(rows) == set(), "in the simulator, missing from docs/simulator.md"
    extra = {key for key, (status, _) in rows.items() if key not in known()}
    assert {key for key in extra if rows[key][0] != "absent"} == set(), "documented as working, unknown to it"


def test_brev_commands_the_simulator_refuses_are_absent_and_the_others_are_not() -> None:
    rows = table("`brev` command")
    for name, spec in COMMANDS.items():
        refused = spec["handler"] is _unsimulated
        assert (rows[(name, "")][0] == "absent") == refused, name
        if spec.get("documented_only"):
            assert "`documented` profile only" in rows[(name, "")][1], name


def test_brev_flags_only_the_documented_profile_has_say_so() -> None:
    rows = table("`brev` command")
    for name, spec in COMMANDS.items():
        released = {flag.name for flag in spec["flags"](SimpleNamespace(documented=False))}
        for flag in spec["flags"](SimpleNamespace(documented=True)):
            if flag.name not in released:
                assert "`documented` profile only" in rows[(name, flag.name)][1], (name, flag.name)


def test_docker_commands_the_simulator_refuses_are_absent_and_the_others_are_not() -> None:
    rows = table("`docker` command")
    for name in UNSIMULATED:
        assert rows[(name, "")][0] == "absent", name
    for name in [*HANDLERS, *MANAGEMENT]:
        assert rows[(name, "")][0] != "absent", name
    for name, subcommands in MANAGEMENT.items():  # each alias the note names is one the simulator runs
        listed = set(re.findall(rf"`{name} ([a-z]+)`", rows[(name, "")][1]))
        assert listed == set(subcommands), name


def test_every_different_row_says_how() -> None:
    for header in ("`brev` command", "`docker` command"):
        for key, (status, note) in table(header).items():
            assert status != "different" or note, key
