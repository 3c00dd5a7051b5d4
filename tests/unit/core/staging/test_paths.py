"""Path and key safety of transfers (``core/staging/paths.py``), each refusal by its own reason: control characters
in patterns, relative paths, S3 prefixes and remote directories; ``**/`` inside a pattern; bracket rules."""

from __future__ import annotations

import re

import pytest

from airflow_provider_brev.core.staging.paths import (
    PathFilter,
    glob_to_regex,
    normalize_patterns,
    normalize_prefix,
    remote_path_word,
    validate_relpath,
)


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
