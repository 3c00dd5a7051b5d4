"""Logging the CLI in without touching the session other connections and users of its HOME rely on, unless the
login succeeds.

``brev login --token`` writes ``~/.brev/credentials.json`` *before* it asks the API whose token it is (``GET
api/me``): with a wrong token it fails after having replaced the file that every other connection and user of that
HOME shares, and logs them all out. The hook therefore runs the login in a scratch HOME (:func:`scratch_home`): a
fresh directory inside ``~/.brev`` (mode 0700) holding copies of the CLI's small state files, so the login sees
what it would see in place (the session it replaces, the active org, the user's analytics choice in
``personal_settings.json``). Only when the login succeeded are the files it wrote or changed moved into ``~/.brev``
(:func:`adopt_login`), each with ``os.replace``: one filesystem, so each file is replaced atomically and a reader
sees the old file or the new one, never the failed login's. Backing the file up and restoring it after a failure
would leave a window in which another task (or a person's shell) reads the wrong token and is logged out.

Logins of one HOME are serialised by the hook's file lock, held around all of this; a scratch directory left by a
killed login is removed by the next login (under the same lock, so no login is using it).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["PROVIDER_PREFIX", "SCRATCH_PREFIX", "adopt_login", "scratch_home"]

#: Name prefix of the provider's own files in ``~/.brev`` (login lock and stamp) and of the scratch HOMEs.
PROVIDER_PREFIX = ".airflow-provider-brev"
SCRATCH_PREFIX = f"{PROVIDER_PREFIX}-login-"
#: The CLI's state files are small JSON/YAML files; larger ones (the ``cloudflared`` binary) are not copied.
MAX_STATE_FILE_BYTES = 1024 * 1024
#: Moved last: the file whose change other processes act on.
CREDENTIALS = "credentials.json"


@contextlib.contextmanager
def scratch_home(brev_dir: Path) -> Iterator[Path]:
    """A scratch HOME for one ``brev login``, removed afterwards: ``<scratch>/.brev`` holds copies of the regular
    files of ``brev_dir`` (the CLI's state; not the provider's own, nor files over :data:`MAX_STATE_FILE_BYTES`).
    Call it holding the login lock of ``brev_dir``.

    :param brev_dir: the CLI's ``~/.brev``.
    """
    brev_dir.mkdir(parents=True, exist_ok=True, mode=0o770)
    for stale in brev_dir.glob(f"{SCRATCH_PREFIX}*"):  # left by a login that was killed
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=brev_dir))
    try:
        (scratch / ".brev").mkdir(mode=0o700)
        for path in brev_dir.iterdir():
            with contextlib.suppress(OSError):  # a file another process removes meanwhile
                if _is_state_file(path):
                    shutil.copy2(path, scratch / ".brev" / path.name)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _is_state_file(path: Path) -> bool:
    return (
        not path.name.startswith(PROVIDER_PREFIX)
        and not path.is_symlink()
        and path.is_file()
        and path.stat().st_size <= MAX_STATE_FILE_BYTES
    )


def adopt_login(scratch: Path, brev_dir: Path) -> list[str]:
    """Move every file a successful login wrote or changed in ``scratch`` into ``brev_dir`` (``credentials.json``
    last), each atomically; returns their names.

    :param scratch: the scratch HOME the login ran with.
    :param brev_dir: the CLI's ``~/.brev``.
    """
    written = []
    for path in sorted((scratch / ".brev").iterdir(), key=lambda p: (p.name == CREDENTIALS, p.name)):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            unchanged = (brev_dir / path.name).read_bytes() == path.read_bytes()
        except OSError:
            unchanged = False
        if not unchanged:
            path.replace(brev_dir / path.name)
            written.append(path.name)
    return written
