"""Pure shell-building for the listing of a remote directory (no process is run here): the files an upload sends
and the input manifest a download sync reads.

:func:`build_list_script` lists the regular files under a remote directory (relative path, size, md5 and
*signature*: :data:`~airflow_provider_brev.cli.transfer.checksums.SIGNATURE_FORMAT`, which the upload script of
:mod:`airflow_provider_brev.cli.transfer.scripts` compares before and after it reads a file) honouring a
:class:`~airflow_provider_brev.cli.transfer.paths.PathFilter`; with an md5 cache it reads again only the files
whose signature changed since the previous listing of that directory. Its output is parsed by
:func:`airflow_provider_brev.cli.transfer.reports.parse_list_output`. Every interpolated value is
``shlex.quote``-d or validated to a safe alphabet.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Literal

from airflow_provider_brev.cli.transfer.checksums import SIGNATURE_FORMAT
from airflow_provider_brev.cli.transfer.paths import PathFilter, remote_path_word
from airflow_provider_brev.cli.transfer.scripts import check_script_length
from airflow_provider_brev.cli.transfer.types import MANIFEST_NAME

FILE_MARKER = "BREV_XFER_FILE"
UNREADABLE_MARKER = "BREV_XFER_UNREADABLE"
LISTED_MARKER = "BREV_XFER_LISTED"
NODIR_MARKER = "BREV_XFER_NODIR"
MANIFEST_MARKER = "BREV_XFER_MANIFEST"

_LIST_BODY = r"""
if [ ! -d "$__L_D" ]; then [ -n "$__L_C" ] && rm -f -- "$__L_C" "$__L_C".*; echo 'BREV_XFER_NODIR'; exit 0; fi
if [ "$__L_MAN" = 1 ] && [ -f "$__L_D/$__L_MN" ]; then sed 's/^/BREV_XFER_MANIFEST /' -- "$__L_D/$__L_MN"; fi
declare -A __l_cm=()
__l_cw=; __l_cok=1
if [ -n "$__L_C" ]; then
  if [ -f "$__L_C" ]; then
    while IFS= read -r -d '' __l_k && IFS= read -r -d '' __l_v; do __l_cm["$__l_k"]=$__l_v; done < "$__L_C"
  fi
  if [ "$__L_DROP" = 1 ]; then
    rm -f -- "$__L_C" "$__L_C".*  # with the temp files of listings killed part-way
  elif mkdir -p -- "${__L_C%/*}" && : > "$__L_C.$$"; then
    __l_cw="$__L_C.$$"; exec 3> "$__l_cw"
    trap 'rm -f -- "$__l_cw"' EXIT
    trap 'rm -f -- "$__l_cw"; exit 0' HUP INT TERM PIPE
  fi
fi
printf -v __l_now '%(%s)T' -1
__l_n=0; __l_bad=0
while IFS= read -r -d '' __l_e; do
  __l_st=${__l_e%%//*}; __l_r=${__l_e#*//}; __l_s=${__l_st%%/*}
  [ "$__l_r" = "$__L_MN" ] && continue
  case $__l_r in *$'\n'*|*$'\r'*|*$'\t'*) __l_bad=$((__l_bad + 1)); continue ;; esac
  if [ -n "$__L_INC" ] && ! [[ $__l_r =~ $__L_INC ]]; then continue; fi
  if [ -n "$__L_EXC" ] && [[ $__l_r =~ $__L_EXC ]]; then continue; fi
  if [ "$__L_MD5" = 1 ]; then
    __l_c=${__l_cm["$__l_r"]-}
    if [ -n "$__l_c" ] && [ "${__l_c% *}" = "$__l_st" ]; then
      __l_m=${__l_c##* }
    else
      if ! __l_m=$(md5sum < "$__L_D/$__l_r"); then printf 'BREV_XFER_UNREADABLE %s\n' "$__l_r"; continue; fi
      __l_m=${__l_m%% *}
    fi
    __l_ct=${__l_st#*/*/}; __l_ct=${__l_ct%%[./]*}
    if [ -n "$__l_cw" ] && [ $((__l_now - __l_ct)) -ge "$__L_SETTLE" ]; then
      printf '%s\0%s %s\0' "$__l_r" "$__l_st" "$__l_m" >&3 || __l_cok=0  # disk full: keep no partial cache
    fi
  else
    __l_m=-
  fi
  printf 'BREV_XFER_FILE %s %s %s %s\n' "$__l_s" "$__l_m" "$__l_st" "$__l_r"
  __l_n=$((__l_n + 1))
done < <(find -H "$__L_D" -mindepth 1 \( -name .airflow-brev -o -name '.airflow-brev-*' \) -prune \
  -o -type f -printf "$__L_SF//%P\0")
if [ -n "$__l_cw" ]; then
  exec 3>&-
  if [ "$__l_cok" = 1 ]; then mv -f -- "$__l_cw" "$__L_C" || rm -f -- "$__l_cw"; else rm -f -- "$__l_cw"; fi
fi
printf 'BREV_XFER_LISTED %s %s\n' "$__l_n" "$__l_bad"
exit 0
"""


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
    manifest :data:`~airflow_provider_brev.cli.transfer.types.MANIFEST_NAME` at its top, which is never uploaded; so is
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
    header = "\n".join(
        [
            "exec 2>/dev/null",
            "export LC_ALL=C",  # patterns match bytes: a name that is not UTF-8 can never break the listing
            f"__L_D={remote_path_word(remote_dir)}",
            f"__L_INC={shlex.quote(path_filter.bash_include)}",
            f"__L_EXC={shlex.quote(path_filter.bash_exclude)}",
            f"__L_MD5={1 if checksums else 0}",
            f"__L_MAN={1 if manifest else 0}",
            f"__L_MN={shlex.quote(MANIFEST_NAME)}",
            f'__L_C="$HOME"/{shlex.quote(md5_cache_path(remote_dir))}'
            if checksums and md5_cache != "off"
            else "__L_C=",
            f"__L_DROP={1 if md5_cache == 'drop' else 0}",
            f"__L_SETTLE={int(settle_seconds)}",
            f"__L_SF={shlex.quote(SIGNATURE_FORMAT)}",
        ]
    )
    return check_script_length(header + _LIST_BODY)
