"""Logging the CLI in without touching the session other connections and users of its HOME rely on, unless the
login succeeds.

``brev login --token`` writes ``~/.brev/credentials.json`` *before* it asks the API whose token it is (``GET
api/me``): with a wrong token it fails after having replaced the file that every other connection and user of that
HOME shares, and logs them all out. The hook therefore runs the login in a scratch HOME (:func:`scratch_home`): a
fresh directory inside ``~/.brev`` (mode 0700) holding a copy of the state files the login reads (which session it
replaces, the active org). Only when the login succeeded are the files it wrote or changed moved into ``~/.brev``
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

__all__ = ["SCRATCH_PREFIX", "adopt_login", "scratch_home"]

#: Name prefix of the scratch HOMEs inside ``~/.brev`` (the CLI never writes such names).
SCRATCH_PREFIX = ".airflow-provider-brev-login-"
#: The CLI's state files a login reads: the session it replaces and the active org (kept by a token login).
STATE_FILES = ("credentials.json", "active_org.json", "config.yaml")
#: Moved last: the file whose change other processes act on.
CREDENTIALS = "credentials.json"


@contextlib.contextmanager
def scratch_home(brev_dir: Path) -> Iterator[Path]:
    """A scratch HOME for one ``brev login``, removed afterwards: ``<scratch>/.brev`` holds copies of the CLI's
    :data:`STATE_FILES` from ``brev_dir``. Call it holding the login lock of ``brev_dir``.

    :param brev_dir: the CLI's ``~/.brev``.
    """
    brev_dir.mkdir(parents=True, exist_ok=True, mode=0o770)
    for stale in brev_dir.glob(f"{SCRATCH_PREFIX}*"):  # left by a login that was killed
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=brev_dir))
    try:
        (scratch / ".brev").mkdir(mode=0o700)
        for name in STATE_FILES:
            with contextlib.suppress(FileNotFoundError):
                shutil.copy2(brev_dir / name, scratch / ".brev" / name)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
