"""What a user installs: one version everywhere, the licence in the repository, the sdist and the wheel, and
project URLs that say where things are."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

import airflow_provider_brev
from airflow_provider_brev.get_provider_info import get_provider_info

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
UV = ROOT / ".tools" / "bin" / "uv"


def test_one_version_in_pyproject_metadata_package_and_provider_info():
    written = PYPROJECT["project"]["version"]
    assert version("airflow-provider-brev") == written
    assert airflow_provider_brev.__version__ == written
    assert get_provider_info()["versions"][0] == written


def test_the_changelog_has_an_entry_for_the_current_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "\n## Unreleased\n" in changelog
    assert f"\n## {PYPROJECT['project']['version']} - " in changelog


def test_license_file_is_the_apache_2_text_with_the_authors_copyright():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    assert "Copyright 2026 The airflow-provider-brev authors" in text
    assert PYPROJECT["project"]["license"] == "Apache-2.0"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """``uv build`` (sdist, then the wheel from the sdist), as a user builds from a checkout."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [str(UV), "build", "--quiet", "--out-dir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_wheel_contains_the_license_and_the_package(built):
    (wheel,) = built.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert f"airflow_provider_brev-{PYPROJECT['project']['version']}.dist-info/licenses/LICENSE" in names
    assert "airflow_provider_brev/compat.py" in names
    assert not [name for name in names if "__pycache__" in name]
    meta = zipfile.ZipFile(wheel).read(f"airflow_provider_brev-{PYPROJECT['project']['version']}.dist-info/METADATA")
    labels = {
        line.split(":", 1)[1].split(",", 1)[0].strip()
        for line in meta.decode().splitlines()
        if line.startswith("Project-URL:")
    }
    assert {"Source", "Issues", "Changelog", "Documentation"} <= labels


def test_sdist_contains_license_changelog_and_readme_and_nothing_else_at_the_top(built):
    (sdist,) = built.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    top = {name.split("/", 1)[0] for name in names}
    always = {"pyproject.toml", "PKG-INFO", ".gitignore"}  # hatchling adds these to every sdist
    assert top == {"airflow_provider_brev", "LICENSE", "CHANGELOG.md", "README.md", *always}


def test_wheel_and_sdist_ship_every_remote_script(built):
    """The bash scripts of ``airflow_provider_brev/remote/`` (and the Lepton job's agent) are package data, loaded
    with importlib.resources."""
    remote = ROOT / "airflow_provider_brev" / "remote"
    scripts = sorted([*(p.name for p in remote.glob("*.sh")), "__init__.py", "lepton_agent.py"])
    assert {"lib.sh", "transfer.sh", "list.sh", "job_launch.sh", "once.sh", "tao_report.sh"} <= set(scripts)
    (wheel,) = built.glob("*.whl")
    in_wheel = sorted(n.rsplit("/", 1)[1] for n in zipfile.ZipFile(wheel).namelist() if "/remote/" in n)
    assert in_wheel == scripts
    (sdist,) = built.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        in_sdist = sorted(n.rsplit("/", 1)[1] for n in archive.getnames() if "/airflow_provider_brev/remote/" in n)
    assert in_sdist == scripts


def test_the_code_finds_the_remote_scripts_in_the_wheel(built):
    """The wheel alone (imported from the zip, not this checkout) serves the remote scripts and the Lepton agent to
    the code that loads them."""
    (wheel,) = built.glob("*.whl")
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import airflow_provider_brev.remote as remote;"
        "from airflow_provider_brev.core.protocol.remote_scripts import load_script;"
        "from airflow_provider_brev.core.lepton.agent import agent_source;"
        "assert remote.__file__.startswith(sys.argv[1]), remote.__file__;"
        "print(len(load_script('lib')), len(load_script('transfer')), 'RESULT_MARKER' in agent_source())"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(wheel)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lib, transfer, agent = done.stdout.split()
    remote = ROOT / "airflow_provider_brev" / "remote"
    assert (int(lib), int(transfer)) == (
        len((remote / "lib.sh").read_text()),
        len((remote / "transfer.sh").read_text()),
    )
    assert agent == "True"
