"""The listing script's md5 cache, run in a real bash: a running step's periodic output syncs read a file again only
when its size, times or inode changed (multi-GB checkpoints are read once), and the last sync removes the cache.

A ``md5sum`` on the fake instance's PATH records every file it reads, so "not read again" is observed, not assumed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from airflow_provider_brev.core.staging.listing import build_list_script, md5_cache_path
from airflow_provider_brev.core.staging.paths import PathFilter
from airflow_provider_brev.core.staging.reports import parse_list_output

COUNTING_MD5SUM = """#!/bin/bash
printf 'read %s\\n' "$(readlink /proc/$$/fd/0)" >> {log}
exec /usr/bin/md5sum "$@"
"""
FILES = {
    "model.pth": b"weights" * 1000,
    "logs/train.log": b"epoch 1\n",
    "a b/$(touch pwned) ]*[.json": b"{}",  # the relative path is an associative-array key: no expansion, no glob
    "empty": b"",
}


@pytest.fixture
def outputs(instance, tmp_path):
    """``~/results`` on the fake instance, with FILES, and ``reads()``: the files ``md5sum`` read since last asked."""
    root = instance.home / "results"
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    log = tmp_path / "md5sum.log"
    log.touch()
    (instance.bindir / "md5sum").write_text(COUNTING_MD5SUM.format(log=log))
    (instance.bindir / "md5sum").chmod(0o755)

    def reads() -> list[str]:
        lines = log.read_text().splitlines()
        log.write_text("")
        return sorted(str(instance.home.joinpath(line.removeprefix("read ")).relative_to(root)) for line in lines)

    instance.reads = reads
    return root


def listing(instance, md5_cache: str, settle_seconds: int = 0) -> dict[str, str | None]:
    script = build_list_script("results", md5_cache=md5_cache, settle_seconds=settle_seconds)  # type: ignore[arg-type]
    report = parse_list_output(instance.run(script).stdout.splitlines())
    assert report.complete and not report.unreadable
    return {f.relpath: f.md5 for f in report.files}


def truth(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_periodic_listings_read_only_new_and_changed_files(instance, outputs):
    assert listing(instance, "keep") == truth(outputs)
    assert instance.reads() == sorted(FILES)  # the first sync reads everything
    assert listing(instance, "keep") == truth(outputs)
    assert instance.reads() == []  # nothing changed: nothing read
    with (outputs / "logs/train.log").open("ab") as log:
        log.write(b"epoch 2\n")
    (outputs / "ckpt_002.pth").write_bytes(b"new checkpoint")
    (outputs / "model.pth").unlink()
    (outputs / "model.pth").write_bytes(b"W" * len(FILES["model.pth"]))  # same size, new inode and ctime
    assert listing(instance, "keep") == truth(outputs)
    assert instance.reads() == ["ckpt_002.pth", "logs/train.log", "model.pth"]
    assert not (instance.home / "pwned").exists()


def test_files_changed_just_before_a_listing_are_read_again(instance, outputs):
    """A write within the listing's timestamp tick could leave size and times unchanged: such files are not cached."""
    listing(instance, "keep", settle_seconds=3600)
    listing(instance, "keep", settle_seconds=3600)
    assert instance.reads() == sorted([*FILES, *FILES])


def test_the_last_sync_uses_the_cache_then_removes_it_and_no_temp_file_is_left(instance, outputs):
    cache = instance.home / md5_cache_path("results")
    listing(instance, "keep")
    assert cache.is_file()
    (cache.parent / f"{cache.name}.12345").write_bytes(b"")  # a listing killed part-way left its temp file
    instance.reads()
    assert listing(instance, "drop") == truth(outputs)
    assert instance.reads() == []
    assert list(cache.parent.iterdir()) == []


def test_without_a_cache_every_listing_reads_every_file_and_writes_nothing(instance, outputs):
    listing(instance, "off")
    listing(instance, "off")
    assert instance.reads() == sorted([*FILES, *FILES])
    assert not (instance.home / ".airflow-brev").exists()


def test_a_vanished_directory_removes_its_cache(instance, outputs):
    listing(instance, "keep")
    cache = instance.home / md5_cache_path("results")
    assert cache.is_file()
    for path in sorted(outputs.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    outputs.rmdir()
    report = parse_list_output(instance.run(build_list_script("results", md5_cache="keep")).stdout.splitlines())
    assert report.missing_dir
    assert not cache.exists()


def test_a_listing_of_the_home_directory_leaves_out_the_providers_own_state(instance, outputs):
    """Absolute outputs may be ``$HOME`` itself: the cache, job directories and secret files are never listed."""
    (instance.home / ".airflow-brev-secret-try1.env").write_text("export A=b\n")
    (instance.home / ".airflow-brev" / "jobs" / "j1").mkdir(parents=True)
    (instance.home / ".airflow-brev" / "jobs" / "j1" / "out.log").write_text("log\n")
    script = build_list_script(str(instance.home), md5_cache="keep", settle_seconds=0)
    for _ in range(2):  # the second listing runs with the first one's cache (and its own temp file) in ~/.airflow-brev
        listed = parse_list_output(instance.run(script).stdout.splitlines())
        assert sorted(f.relpath for f in listed.files) == sorted(f"results/{rel}" for rel in FILES)
    assert (instance.home / md5_cache_path(str(instance.home))).is_file()


@pytest.mark.parametrize("exclude", [None, ["bad*"]])
def test_list_script_skips_names_that_are_not_utf8_deliberately(instance, exclude):
    """A file named with byte \\xff once failed the whole upload under a UTF-8 locale: bash's ``=~`` and the
    S3 key. Matching is bytewise (LC_ALL=C); such names are skipped and counted (S3 keys are UTF-8)."""
    root = instance.home / "odd"
    root.mkdir()
    (root / "good.txt").write_bytes(b"ok")
    (root / "bad-but-valid.txt").write_bytes(b"ok")
    with open(os.path.join(os.fsencode(root), b"bad\xff.bin"), "wb") as handle:
        handle.write(b"x")
    script = build_list_script("odd", PathFilter.create(exclude=exclude) if exclude else None)
    done = subprocess.run(
        ["bash", "-c", script], env=instance.env(), cwd=instance.home, capture_output=True, check=False
    )
    assert done.returncode == 0 and done.stderr == b""
    lines = done.stdout.decode("utf-8", "replace").splitlines()  # as the hook decodes the CLI's output
    listed = parse_list_output(lines)
    assert listed.complete
    if exclude:
        assert [f.relpath for f in listed.files] == ["good.txt"]
    else:
        assert [f.relpath for f in listed.files] == ["bad-but-valid.txt", "good.txt"]
        assert listed.skipped_names == 1


def test_list_script_headers():
    assert md5_cache_path("data") == ".airflow-brev/md5/" + __import__("hashlib").sha256(b"data").hexdigest()[:32]
    plain = build_list_script("data")
    assert "__L_MD5=1\n" in plain and "__L_MAN=0\n" in plain and "__L_C=''\n" in plain and "__L_DROP=0\n" in plain
    assert "__L_SETTLE=2\n" in plain
    cached = build_list_script("data", md5_cache="keep", manifest=True, settle_seconds=5)
    assert f'__L_C="$HOME"/{md5_cache_path("data")}\n' in cached
    assert "__L_MAN=1\n" in cached and "__L_SETTLE=5\n" in cached and "__L_DROP=0\n" in cached
    assert "__L_DROP=1\n" in build_list_script("data", md5_cache="drop")
    assert "__L_C=''\n" in build_list_script("data", checksums=False, md5_cache="keep")
    assert "__L_MD5=0\n" in build_list_script("data", checksums=False)
