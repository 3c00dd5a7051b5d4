"""Pure shell-building for the listing of a remote directory (no process is run here): the files an upload sends
and the input manifest a download sync reads.

:func:`build_list_script` lists the regular files under a remote directory (relative path, size, md5 and
*signature*: :data:`~airflow_provider_brev.core.staging.checksums.SIGNATURE_FORMAT`, which the upload script of
:mod:`airflow_provider_brev.core.staging.scripts` compares before and after it reads a file) honouring a
:class:`~airflow_provider_brev.core.staging.paths.PathFilter`; with an md5 cache it reads again only the files
whose signature changed since the previous listing of that directory. Its output is parsed by
:func:`airflow_provider_brev.core.staging.reports.parse_list_output`. The script is
``airflow_provider_brev/remote/list.sh``; every value reaches it through the renderer's quoted header.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from airflow_provider_brev.core.protocol.markers import (
    XFER_FILE,
    XFER_LISTED,
    XFER_MANIFEST,
    XFER_NODIR,
    XFER_UNREADABLE,
    marker_word,
)
from airflow_provider_brev.core.protocol.remote_scripts import HomePath, Value, render_script
from airflow_provider_brev.core.staging.checksums import SIGNATURE_FORMAT
from airflow_provider_brev.core.staging.paths import PathFilter, remote_path_value
from airflow_provider_brev.core.staging.scripts import check_script_length
from airflow_provider_brev.core.staging.types import MANIFEST_NAME

FILE_MARKER = marker_word(XFER_FILE)
UNREADABLE_MARKER = marker_word(XFER_UNREADABLE)
LISTED_MARKER = marker_word(XFER_LISTED)
NODIR_MARKER = marker_word(XFER_NODIR)
MANIFEST_MARKER = marker_word(XFER_MANIFEST)

# The listing's script is airflow_provider_brev/remote/list.sh (rendered by core/protocol/remote_scripts.py).


#: What a listing does with its directory's md5 cache: ``off`` (none), ``keep`` (use it and write it back: the
#: periodic output syncs of a running step), ``drop`` (use it, then delete it: the step's last sync).
Md5Cache = Literal["off", "keep", "drop"]
#: A file whose inode changed less than this many seconds before the listing is hashed again next time: a write
#: within the same timestamp tick as the listing's ``stat`` could otherwise go unseen (git's "racily clean").
MD5_CACHE_SETTLE_SECONDS = 2


def md5_cache_path(remote_dir: str) -> str:
    """Where the md5 cache of ``remote_dir`` lives, relative to the remote ``$HOME`` (outside the directory, so it
    is never uploaded)."""
    return f".airflow-brev/md5/{hashlib.sha256(remote_dir.encode('utf-8')).hexdigest()[:32]}"


def build_list_script(
    remote_dir: str,
    path_filter: PathFilter | None = None,
    *,
    checksums: bool = True,
    manifest: bool = False,
    md5_cache: Md5Cache = "off",
    settle_seconds: int = MD5_CACHE_SETTLE_SECONDS,
) -> str:
    """List the regular files under ``remote_dir`` (symlinks and special files are skipped; so is the input
    manifest :data:`~airflow_provider_brev.core.staging.types.MANIFEST_NAME` at its top, which is never uploaded; so is
    the provider's own working state, ``.airflow-brev`` and ``.airflow-brev-*``, when ``remote_dir`` holds it).

    With ``manifest``, first prints each line of that manifest as ``BREV_XFER_MANIFEST <line>``.

    With an ``md5_cache`` (see :data:`Md5Cache`; only with ``checksums``), a file whose size, mtime, ctime and inode
    are those of the previous listing keeps the md5 that listing computed, so periodic syncs of a directory of
    multi-GB checkpoints read each file once. The cache (:func:`md5_cache_path`) is replaced atomically; files
    changed less than ``settle_seconds`` before the listing are not cached.

    Prints ``BREV_XFER_FILE <size> <md5|-> <signature> <relpath>`` per selected file (:data:`SIGNATURE_FORMAT`), ``BREV_XFER_UNREADABLE <relpath>``
    for a selected file that cannot be read, then ``BREV_XFER_LISTED <count> <names skipped>`` (names with a
    tab or newline are skipped and counted; so are names that are not UTF-8, by :func:`parse_list_output`); or ``BREV_XFER_NODIR`` when the directory does not exist.
    Always exits 0. Parse with :func:`parse_list_output`.
    """
    path_filter = path_filter or PathFilter()
    values: dict[str, Value] = {
        "__L_D": remote_path_value(remote_dir),
        "__L_INC": path_filter.bash_include,
        "__L_EXC": path_filter.bash_exclude,
        "__L_MD5": 1 if checksums else 0,
        "__L_MAN": 1 if manifest else 0,
        "__L_MN": MANIFEST_NAME,
        "__L_C": HomePath(md5_cache_path(remote_dir)) if checksums and md5_cache != "off" else "",
        "__L_DROP": 1 if md5_cache == "drop" else 0,
        "__L_SETTLE": int(settle_seconds),
        "__L_SF": SIGNATURE_FORMAT,
    }
    return check_script_length(render_script("list", values))
