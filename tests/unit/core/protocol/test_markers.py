"""The remote scripts as package data (core/protocol/remote_scripts.py) and their one marker grammar
(core/protocol/markers.py): one row per marker kind, near misses, the renderer's quoting, shellcheck."""

from __future__ import annotations

import subprocess

import pytest

from airflow_provider_brev.core.protocol import markers as m
from airflow_provider_brev.core.protocol.markers import KINDS, Marker, format_marker, iter_markers, parse_marker
from airflow_provider_brev.core.protocol.remote_scripts import (
    render_script,
)
from unit.core.protocol.markers_helpers import ROWS


def test_every_kind_has_a_row():
    assert sorted(kind for _, kind, _, _ in ROWS) == sorted(KINDS)


@pytest.mark.parametrize(("line", "kind", "fields", "text"), ROWS, ids=[r[1] for r in ROWS])
def test_one_row_per_kind(line, kind, fields, text):
    assert parse_marker(line) == Marker(kind, fields, text)
    assert parse_marker(line + "\r\n") == Marker(kind, fields, text)  # the line terminator is not part of it
    assert parse_marker(line + "\n") == Marker(kind, fields, text)
    assert format_marker(kind, *fields, text=text) == line  # the inverse, as __brev_mark prints it


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
