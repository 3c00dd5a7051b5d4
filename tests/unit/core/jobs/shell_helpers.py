"""Test helpers shared by ``core/jobs/test_shell.py``, ``core/test_secrets.py`` (one definition, imported by each)."""

from __future__ import annotations

import shutil

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
    "Zw==\n"
    "-----END PRIVATE KEY-----\n"
)


CREDENTIAL = (
    "{\n"
    '  "type": "service_account",\n'
    '  "private_key_id": "5f1e0c2a9b7d4e3f8a6b",\n'
    '  "client_email": "trainer@example-project.iam.gserviceaccount.com",\n'
    '  "scopes": [\n'
    '    "storage"\n'
    "  ],\n"
    '  "n": 1\r\n'
    "}"
)


#: What must leave the instance redacted: every line that carries part of a secret.
SECRET_LINES = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu",
    '"private_key_id": "5f1e0c2a9b7d4e3f8a6b",',
    '"client_email": "trainer@example-project.iam.gserviceaccount.com",',
]


def awks() -> list[str]:
    """The awks this machine has: the filter must work with mawk (Ubuntu's awk) and gawk alike."""
    found = [name for name in ("mawk", "gawk") if shutil.which(name)]
    assert found
    return found


def with_awk(tmp_path, awk: str) -> dict[str, str]:
    """PATH whose ``awk`` is ``awk``."""
    bin_dir = tmp_path / f"bin-{awk}"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "awk").unlink(missing_ok=True)
    (bin_dir / "awk").symlink_to(shutil.which(awk))
    return {"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin"}
