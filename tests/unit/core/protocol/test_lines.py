"""Unit tests of ``airflow_provider_brev/core/protocol/lines.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.protocol import lines as lines_module
from airflow_provider_brev.core.protocol.lines import (
    MAX_CAPTURE,
    MAX_LINE,
    READ_CHUNK,
    TAIL_LINES,
    Collector,
    LineSplitter,
    ProcessResult,
    squash_carriage_returns,
    utf8_boundary,
)
from airflow_provider_brev.hooks.process import run_process


def test_line_limits():
    assert (READ_CHUNK, MAX_LINE, MAX_CAPTURE, TAIL_LINES) == (65536, 262144, 67108864, 200)


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("plain", "plain"),
        ("10%\r50%\r100%", "100%"),
        ("done\r", "done"),
        ("\r\r", ""),
        ("", ""),
        ("\rDownloading 3/3\r\r", "Downloading 3/3"),  # a bar redrawn, then cleared: the last text stays
        ("a\r\rb", "b"),
        ("exporting 10%\rexported to ONNX", "exported to ONNX"),  # only carriage returns are dropped
    ],
)
def test_carriage_returns_keep_what_a_terminal_shows(line, shown):
    assert squash_carriage_returns(line) == shown


def test_utf8_boundary_never_splits_a_character():
    data = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    assert utf8_boundary(data, 1) == 1
    assert utf8_boundary(data, 2) == 1  # inside é
    assert utf8_boundary(data, 4) == 3  # inside €
    assert utf8_boundary(data, 5) == 3
    assert utf8_boundary(data, 7) == 6  # inside 😀
    assert utf8_boundary(data, 9) == 6
    assert utf8_boundary(b"\x80\x80\x80\x80\x80\x80", 5) == 5  # no start byte within 3 back: cut where asked
    assert utf8_boundary(b"\x80\x80\x80", 2) == 2
    # five continuation bytes (no valid character is that long): the start byte 4 back does not own the cut
    assert utf8_boundary(b"ab" + b"\x80" * 5, 5) == 5
    # a character at the very start: cutting before it would leave an empty piece, so cut where asked
    assert utf8_boundary("€x".encode(), 2) == 2
    assert utf8_boundary("éx".encode(), 1) == 1


def test_the_splitter_emits_complete_lines_and_flushes_long_ones(monkeypatch):
    got: list[str] = []
    splitter = LineSplitter(got.append)
    splitter.feed(b"one\ntw")
    assert got == ["one"]
    splitter.feed(b"o\n\nthree")
    assert got == ["one", "two", ""]
    splitter.close()
    assert got[-1] == "three"
    splitter.close()
    assert got[-1] == "three"  # nothing left
    monkeypatch.setattr(lines_module, "MAX_LINE", 4)
    pieces: list[str] = []
    long = LineSplitter(pieces.append)
    long.feed(b"abcd")
    assert pieces == []  # exactly MAX_LINE: still waiting for its newline
    long.feed("e€".encode())
    assert pieces == ["abcd"]
    long.feed(b"\n")
    assert pieces == ["abcd", "e€"]


def test_results_join_their_lines():
    result = ProcessResult(1, ["a", "b"], ["e"])
    assert (result.stdout, result.stderr, result.timed_out, result.duration, result.started_at) == (
        "a\nb",
        "e",
        False,
        0.0,
        0.0,
    )


def test_the_collector_caps_captured_output_and_keeps_a_tail_otherwise(monkeypatch):
    seen: list[str] = []
    tail = Collector(False, seen.append)
    for i in range(TAIL_LINES + 5):
        tail(str(i))
    assert len(tail.lines) == TAIL_LINES and tail.lines[0] == "5"
    assert seen[0] == "0" and tail.size == 0
    monkeypatch.setattr(lines_module, "MAX_CAPTURE", 6)
    capture = Collector(True, None)
    capture("abcde")  # 5 + 1 newline = 6: at the cap
    assert capture.size == 6
    with pytest.raises(OverflowError, match="more output than expected"):
        capture("")


def test_carriage_returns_are_squashed():
    assert squash_carriage_returns("10%\r50%\r100%") == "100%"
    assert squash_carriage_returns("done\r") == "done"
    result = run_process(["bash", "-c", "printf '1%%\\r2%%\\r3%%\\n'"], env=None, timeout=10)
    assert result.stdout_lines == ["3%"]


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_over_long_lines_split_on_character_boundaries(char):
    from airflow_provider_brev.core.protocol.lines import MAX_LINE, LineSplitter

    lines: list[str] = []
    splitter = LineSplitter(lines.append)
    text = ("a" + char * (MAX_LINE // len(char.encode()))) * 2  # every cut point lands inside a character
    splitter.feed(text.encode())
    splitter.close()
    assert "\ufffd" not in "".join(lines)
    assert "".join(lines) == text
    assert all(len(line.encode()) <= MAX_LINE for line in lines)


def test_captured_output_may_reach_64_mib_and_no_more():
    """``brev ls --json`` of a big organisation is captured whole up to 64 MiB (each line counts its newline)."""
    capture = Collector(True, None)
    capture("x" * (64 * 1024 * 1024 - 1))
    with pytest.raises(OverflowError, match="more output than expected"):
        capture("")
