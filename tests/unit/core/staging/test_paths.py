"""Path and key safety of transfers (``core/staging/paths.py``), each refusal by its own reason: control characters
in patterns, relative paths, S3 prefixes and remote directories; ``**/`` inside a pattern; bracket rules."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from typing import TYPE_CHECKING

import pytest

from airflow_provider_brev.core.staging.paths import (
    PathFilter,
    find_path_conflicts,
    glob_to_regex,
    normalize_patterns,
    normalize_prefix,
    printable,
    remote_path_word,
    validate_relpath,
)
from airflow_provider_brev.core.staging.rounds import describe_failures, name_some

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        ("*.pth", ".*\\.pth"),
        ("**/x.json", "(.*/)?x\\.json"),
        ("a/**/b.json", "a/(.*/)?b\\.json"),  # **/ after a slash: zero or more directories
        ("a**/b", "a.*/b"),  # **/ not after a slash: a plain star
        ("a***b", "a.*b"),
        ("x?y", "x.y"),
        ("[ab]c", "[ab]c"),
        ("[!ab]c", "[^ab]c"),
        ("[]a]", "[]a]"),
        ("[]]", "[]]"),  # a set holding only ']'
        ("[!]]", "[^]]"),
        ("[!]a]", "[^]a]"),
        ("[a", "\\[a"),  # no closing bracket: a literal '['
        ("a+b(c)|d{1}^$", "a\\+b\\(c\\)\\|d\\{1\\}\\^\\$"),
    ],
)
def test_globs_translate_to_one_regex(pattern, regex):
    assert glob_to_regex(pattern) == regex


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("a/**/b.json", "a/b.json", True),
        ("a/**/b.json", "a/x/y/b.json", True),
        ("a/**/b.json", "ab.json", False),
        ("a**/b", "a/b", True),
        ("a**/b", "ax/y/b", True),
        ("x/**/", "x/", True),
    ],
)
def test_double_star_inside_a_pattern(pattern, name, matches):
    assert PathFilter.create(pattern).matches(name) is matches


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "must be a non-empty string"),
        (None, "must be a non-empty string"),
        ("a\tb", "must not contain tabs, newlines or NUL"),
        ("a\nb", "must not contain tabs, newlines or NUL"),
        ("a\rb", "must not contain tabs, newlines or NUL"),
        ("a\x00b", "must not contain tabs, newlines or NUL"),
        ("[a\\b]", "may only contain letters"),
        ("[a--b]", "no doubled"),
        ("[a~~b]", "no doubled"),
        ("[a&&b]", "no doubled"),
        ("[a||b]", "no doubled"),
        ("[^a]", "may only contain letters"),  # '^' is not allowed in a bracket: '[!...]' negates
    ],
)
def test_bad_patterns_are_refused_for_their_reason(pattern, message):
    with pytest.raises(ValueError, match=message):
        glob_to_regex(pattern)


def test_filters_and_their_bash_forms():
    empty = PathFilter.create()
    assert (empty.include, empty.exclude, empty.include_regex, empty.exclude_regex) == ((), (), "", "")
    assert (empty.bash_include, empty.bash_exclude) == ("", "")
    both = PathFilter.create(include=["*.pth", "a?"], exclude="tmp/*")
    assert both.include_regex == "(.*\\.pth)|(a.)"
    assert both.bash_include == "^((.*\\.pth)|(a.))$"
    assert both.bash_exclude == "^((tmp/.*))$"
    assert both.matches("x.pth") and both.matches("ab")
    assert not both.matches("tmp/x.pth") and not both.matches("x.txt")
    assert PathFilter(include=["*.a"]).include == ("*.a",)  # any iterable becomes a tuple
    only_exclude = PathFilter.create(exclude=["*.tmp"])
    assert only_exclude.matches("keep.txt") and not only_exclude.matches("x.tmp")
    assert PathFilter.create(include=["a", "b"]).matches("b")
    assert re.fullmatch(both.include_regex, "line1\nline2.pth", re.DOTALL)
    assert both.matches("new\nline.pth")  # '*' crosses newlines (DOTALL), as bash's [[ =~ ]] does


@pytest.mark.parametrize(
    ("value", "message"),
    [([""], "Every include pattern must be a non-empty string, got ''"), ([3], "got 3")],
)
def test_every_pattern_in_a_list_is_checked(value, message):
    with pytest.raises(ValueError, match=message):
        normalize_patterns(value, "include")
    assert normalize_patterns(("a", "b")) == ("a", "b")
    assert normalize_patterns([]) == ()


@pytest.mark.parametrize(
    ("relpath", "message"),
    [
        ("", "empty relative path"),
        (None, "empty relative path"),
        ("a\tb", "contains a tab, newline or NUL"),
        ("a\nb", "contains a tab, newline or NUL"),
        ("a\rb", "contains a tab, newline or NUL"),
        ("a\x00b", "contains a tab, newline or NUL"),
        ("caf\ufffd", "is not valid UTF-8"),
        ("/etc/passwd", "is absolute"),
        ("a//b", "has an empty, '.' or '..' component"),
        ("a/./b", "has an empty, '.' or '..' component"),
        ("a/../b", "has an empty, '.' or '..' component"),
        ("a/", "has an empty, '.' or '..' component"),
    ],
)
def test_unsafe_relative_paths_are_refused_for_their_reason(relpath, message):
    with pytest.raises(ValueError, match=message):
        validate_relpath(relpath)


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\x00b", "/x/\n"])
def test_s3_prefixes_with_control_characters_are_refused(bad):
    with pytest.raises(ValueError, match="Invalid S3 prefix"):
        normalize_prefix(bad)


def test_s3_prefixes_are_normalised():
    assert normalize_prefix("a\tb") == "a\tb/"  # a tab is a legal key character
    assert normalize_prefix("//a//") == "a/"
    with pytest.raises(ValueError, match="must be a string, got 3"):
        normalize_prefix(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "must be a non-empty path"),
        ("  ", "must be a non-empty path"),
        (None, "must be a non-empty path"),
        ("a\nb", "must not contain newlines or NUL"),
        ("a\rb", "must not contain newlines or NUL"),
        ("a\x00b", "must not contain newlines or NUL"),
    ],
)
def test_remote_directories_are_refused_for_their_reason(path, message):
    with pytest.raises(ValueError, match=message):
        remote_path_word(path)


def test_remote_directory_words():
    assert remote_path_word("~") == '"$HOME"'
    assert remote_path_word("~/") == '"$HOME"'
    assert remote_path_word("~//x") == '"$HOME"/x'
    assert remote_path_word("/a b") == "'/a b'"
    assert remote_path_word("rel") == '"$HOME"/rel'


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "../x", "a//b", "./a", "a/", "new\nline", "tab\there", "nul\0"])
def test_unsafe_relative_paths_are_rejected(bad):
    with pytest.raises(ValueError):
        validate_relpath(bad)


def test_path_helpers(instance):
    assert validate_relpath("a b/c.d") == "a b/c.d"
    assert find_path_conflicts(["a", "a/b", "c/d", "c"]) == ["a", "c"]
    assert find_path_conflicts(["a/b", "a/c"]) == []
    assert [normalize_prefix(p) for p in (None, "", "/", "x", "x/", "/x//", "a/b")] == [
        "",
        "",
        "",
        "x/",
        "x/",
        "x/",
        "a/b/",
    ]
    words = [remote_path_word(p) for p in ("~", "~/d x", "rel/$(touch pwned)", "/abs/'q'")]
    done = instance.run("printf '%s|' " + " ".join(words))
    home = str(instance.home)
    assert done.stdout == f"{home}|{home}/d x|{home}/rel/$(touch pwned)|/abs/'q'|"
    assert not (instance.home / "pwned").exists()


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


def test_names_in_messages_never_carry_control_characters():
    assert printable("ok/name é.txt") == "ok/name é.txt"
    assert printable("evil\x1b[2Jname\x07\x7f\x9b") == "evil\\x1b[2Jname\\x07\\x7f\\x9b"
    assert printable("invoice\u202efdp.exe") == "invoice\\u202efdp.exe"  # a bidi override: reads as "exe.pdf"
    assert name_some(["a\x1b[31m", "b"]) == "a\\x1b[31m, b"
    assert describe_failures({"x\x1b]0;t\x07": ("curl", "exit 22")}) == "x\\x1b]0;t\\x07 (curl: exit 22)"
