"""Transfer path patterns (core/staging/paths.py): a glob means the same to the remote bash script, to Python's
regex and to fnmatch; unsafe or ambiguous patterns are refused before anything runs."""

from __future__ import annotations

import fnmatch
import subprocess
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.core.staging.paths import (
    PathFilter,
    glob_to_regex,
    normalize_patterns,
)

if TYPE_CHECKING:
    from pathlib import Path


# ------------------------------------------------------------------------------------------- patterns

NAMES = [
    "a.txt",
    "b.TXT",
    "dir/a.txt",
    "dir/sub/model.pth",
    "model.pth",
    "checkpoints/epoch_1.pth",
    "checkpoints/epoch_10.pth",
    "with space.json",
    "x.json",
    "deep/x.json",
    "weird(1)+[2]{3}$^.bin",
    "dot.in.name",
    "-dash",
    "ünïcode.txt",
]
PATTERNS = [
    "*.txt",
    "*.pth",
    "dir/*",
    "checkpoints/epoch_?.pth",
    "checkpoints/epoch_[0-9][0-9].pth",
    "[!a-c]*",
    "[]x]*",
    "*space*",
    "weird(1)+?2?{3}$^.bin",
    "weird(1)+*",
    "dot.in.name",
    "dot?in?name",
    "-*",
    "ü*",
    "*[.]json",
    "[",
    "a[",
]


def bash_matches(patterns_and_names: list[tuple[str, str]], tmp_path: Path) -> list[bool]:
    """Evaluate ``[[ name =~ ^(regex)$ ]]`` in one real bash for every pair."""
    data = tmp_path / "pairs"
    data.write_text("".join(f"{PathFilter.create(p).bash_include}\t{n}\n" for p, n in patterns_and_names))
    script = "while IFS=$'\\t' read -r re name; do if [[ $name =~ $re ]]; then echo 1; else echo 0; fi; done < \"$1\""
    done = subprocess.run(
        ["bash", "-c", script, "bash", str(data)],
        env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return [line == "1" for line in done.stdout.splitlines()]


def test_glob_regex_means_the_same_in_bash_python_and_fnmatch(tmp_path):
    pairs = [(p, n) for p in PATTERNS for n in NAMES]
    in_bash = bash_matches(pairs, tmp_path)
    assert len(in_bash) == len(pairs)
    for (pattern, name), bash_says in zip(pairs, in_bash, strict=True):
        python_says = PathFilter.create(pattern).matches(name)
        assert python_says == fnmatch.fnmatchcase(name, pattern), (pattern, name)
        assert bash_says == python_says, (pattern, name)


def test_double_star_slash_also_matches_zero_directories(tmp_path):
    pairs = [("**/x.json", n) for n in ("x.json", "deep/x.json", "a/b/x.json", "ax.json")]
    pairs += [("logs/**/*.txt", n) for n in ("logs/a.txt", "logs/d/a.txt", "a.txt")]
    expected = [True, True, True, False, True, True, False]
    assert [PathFilter.create(p).matches(n) for p, n in pairs] == expected
    assert bash_matches(pairs, tmp_path) == expected


def test_include_and_exclude_combine():
    selected = PathFilter.create(include=["*.pth", "*.json"], exclude="tmp/*")
    assert [n for n in ["a.pth", "tmp/b.pth", "c.json", "d.txt"] if selected.matches(n)] == ["a.pth", "c.json"]
    assert PathFilter.create().matches("anything/at/all")
    assert normalize_patterns(None) == normalize_patterns("") == ()
    assert normalize_patterns("*.x") == ("*.x",)


@pytest.mark.parametrize("pattern", ["", "a\tb", "[a\\b]", "[a[b]", "[^a]", "[a--b]"])
def test_unsafe_or_ambiguous_patterns_are_rejected(pattern):
    with pytest.raises(ValueError):
        glob_to_regex(pattern)
