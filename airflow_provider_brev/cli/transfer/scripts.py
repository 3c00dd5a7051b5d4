"""Pure shell-building for S3 <-> Brev transfers: plan files and scripts (no process is run here).

The worker presigns S3 URLs; the instance only runs ``curl`` with them, so no AWS credential reaches it.
Presigned URLs are short-lived credentials themselves, so they travel in a *plan file* (mode 0600, shipped
with ``brev copy``), never on a command line:

* :func:`build_plan` writes one file per transfer round: ``T`` lines (one per task: a file to download, a file
  to upload in one ``PUT``, or one part of a multipart upload) and ``U`` lines (the task's presigned URL), then
  an ``N <count>`` trailer that proves the file arrived whole.
* :func:`build_transfer_script` reads the plan into memory and deletes it before the first ``curl`` starts.
  Each URL reaches ``curl`` as a config file on a pipe (``curl -K <(printf 'url = "%s"' ...)``; ``printf`` is a
  bash builtin), so it is on no process's command line and in no file. Downloads go *in one batch* when the
  instance's curl is 7.75 or newer: one ``curl --parallel --parallel-max <concurrency>`` process reads every
  ``url``/``output`` pair from such a pipe and writes each file into a private staging directory next to its
  destination (``<dir>/.airflow-brev-part-<round id>/``); then one ``find`` (sizes), one ``md5sum`` and one
  ``mv -t`` per destination directory (atomic renames) settle every file, each still verified and reported on
  its own. Older curls get the per-file pool below (one ``curl`` per file, ``concurrency`` at a time), as
  uploads always do. The script's stderr goes to
  ``/dev/null`` (curl messages can quote URLs); results travel as marker lines on stdout:

  - ``BREV_XFER_OK <task> <bytes> <md5|-> <etag|->`` -- downloads: size and md5 verified, file moved into
    place atomically; uploads: the ETag S3 answered (parts also report the part's md5);
  - ``BREV_XFER_FAIL <task> <code> <detail>`` -- ``code`` is one of :data:`FAIL_CODES`; an upload whose file
    no longer has the size, times and inode the listing saw fails with :data:`CHANGED`;
  - ``BREV_XFER_ERROR <reason>`` -- nothing could run (plan missing or truncated, no ``curl``);
  - ``BREV_XFER_DONE <count>`` -- the script got to its end.

  A private temp dir (0700) holds part files and response headers; a trap removes it and the plan on exit,
  hang-up or termination. The script always exits 0 (the released CLI re-runs commands that exit non-zero).
* the listing of a directory (relative path, size, md5, signature) is
  :mod:`airflow_provider_brev.cli.transfer.listing`.

The output of the transfer script is parsed by :mod:`airflow_provider_brev.cli.transfer.reports`. Every
interpolated value is ``shlex.quote``-d or validated to a safe alphabet.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_brev.cli.transfer.checksums import SIGNATURE_FORMAT, SIGNATURE_RE, is_md5, md5_hex_to_base64
from airflow_provider_brev.cli.transfer.paths import remote_path_word, validate_relpath

if TYPE_CHECKING:
    from collections.abc import Sequence

OK_MARKER = "BREV_XFER_OK"
FAIL_MARKER = "BREV_XFER_FAIL"
ERROR_MARKER = "BREV_XFER_ERROR"
DONE_MARKER = "BREV_XFER_DONE"
CLEANED_MARKER = "BREV_XFER_CLEANED"

#: Failure codes reported by the transfer script.
#: The failure code of a file that changed while it was read (still being written).
CHANGED = "changed"
FAIL_CODES = ("curl", "size", "md5", "mkdir", "move", "read", CHANGED, "etag", "nourl")

OP_GET = "G"  # download one object to <remote_dir>/<relpath>
OP_PUT = "S"  # upload one file with a single PUT
OP_PART = "P"  # upload one part of a multipart upload

#: Suffix (then ``-<round id>``) of a download in progress: next to its destination, so the final ``mv`` is
#: atomic; unique per round, so a killed round's leftover can never mix with a later round's download.
PART_SUFFIX = ".airflow-brev-part"
#: Where the private per-round temp directories live (relative to the remote ``$HOME``).
XFER_BASE = ".airflow-brev/xfer"
#: Linux limits one execve argument to 128 KiB; the script travels as one argument.
MAX_SCRIPT_LENGTH = 100 * 1024

#: A task key in a plan and in the markers: ``<n>`` or, for parts, ``<n>.<part number>``.
TASK_KEY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_XFER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_URL_RE = re.compile(r"^https?://[^\s\"\\'\x00-\x1f\x7f]+$")


def plan_path(xfer_id: str) -> str:
    """Where a round's plan file goes on the instance (relative to ``$HOME``, as ``brev copy`` takes it)."""
    _check_xfer_id(xfer_id)
    return f".airflow-brev-xfer-{xfer_id}.plan"


def _check_xfer_id(xfer_id: str) -> None:
    if not isinstance(xfer_id, str) or not _XFER_ID_RE.match(xfer_id):
        raise ValueError(f"Invalid transfer id {xfer_id!r}")


# --------------------------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class TransferTask:
    """One unit of work of a transfer round.

    :param key: task id in the plan and in the markers: ``<n>`` or, for parts, ``<n>.<part number>``.
    :param op: :data:`OP_GET`, :data:`OP_PUT` or :data:`OP_PART`.
    :param relpath: path relative to the remote directory.
    :param file_size: size of the whole file (downloads: expected size; uploads: size when listed).
    :param url: the presigned URL (a secret: it goes only into the plan file).
    :param md5: downloads: expected md5 hex (or ``None``: size only); single uploads: md5 hex sent as
        ``Content-MD5`` (S3 rejects a body that does not match; presign with the same ``ContentMD5``);
        parts: unused (computed on the instance).
    :param offset: parts: first byte of the part.
    :param length: parts: bytes in the part.
    :param content_md5: parts: send the part's md5 as ``Content-MD5`` (only when the URL does not sign that
        header, i.e. SigV4 URLs, which sign ``host`` only).
    :param signature: uploads: the file's :data:`SIGNATURE_FORMAT` when it was listed (``None``: size only).
    """

    key: str
    op: str
    relpath: str
    file_size: int
    url: str
    md5: str | None = None
    offset: int = 0
    length: int = 0
    content_md5: bool = False
    signature: str | None = None

    def __post_init__(self) -> None:
        if not TASK_KEY_RE.match(self.key):
            raise ValueError(f"Invalid task key {self.key!r}")
        if self.op not in (OP_GET, OP_PUT, OP_PART):
            raise ValueError(f"Invalid task op {self.op!r}")
        validate_relpath(self.relpath)
        for name in ("file_size", "offset", "length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        if not isinstance(self.url, str) or not _URL_RE.match(self.url):
            raise ValueError("A presigned URL must be an http(s) URL without spaces, quotes or backslashes.")
        if self.md5 is not None and not is_md5(self.md5):
            raise ValueError(f"Invalid md5 {self.md5!r}")
        if self.signature is not None and not SIGNATURE_RE.match(self.signature):
            raise ValueError(f"Invalid file signature {self.signature!r}")
        if self.op == OP_PART and (self.length <= 0 and self.file_size > 0):
            raise ValueError("A part must have a positive length")

    def plan_md5_field(self) -> str:
        if self.op == OP_PART:
            return "+" if self.content_md5 else "-"
        if self.md5 is None:
            return "-"
        return self.md5 if self.op == OP_GET else md5_hex_to_base64(self.md5)


def build_plan(tasks: Sequence[TransferTask]) -> str:
    """The plan file of one round (contains the presigned URLs: ship it only with a 0600 file copy)."""
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("Task keys must be unique")
    lines = []
    for t in tasks:
        length = t.length if t.op == OP_PART else t.file_size
        lines.append(
            "\t".join(
                [
                    *("T", t.key, t.op, str(t.file_size), str(t.offset), str(length), t.plan_md5_field()),
                    *(t.signature or "-", t.relpath),
                ]
            )
        )
    lines.extend(f"U\t{t.key}\t{t.url}" for t in tasks)
    lines.append(f"N\t{len(tasks)}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------- scripts

_TRANSFER_BODY = r"""
__x_fail() { printf 'BREV_XFER_FAIL %s %s\n' "$1" "$2"; }
__x_size() { local s; s=$(wc -c < "$1") || return 1; printf '%s' "${s//[!0-9]/}"; }
__x_etag() {
  local line v=
  while IFS= read -r line; do
    line=${line%$'\r'}
    case ${line,,} in etag:*) v=${line#*:} ;; esac
  done < "$1"
  v=${v//\"/}; v=${v//[[:space:]]/}
  printf '%s' "$v"
}
__x_curl() {  # task-key, then extra curl args; prints the HTTP status; the URL travels on a pipe
  local k=$1; shift
  "${__X_CURL[@]}" -K <(printf 'url = "%s"\n' "${__X_U[$k]}") -w '%{http_code}' "$@"
}
__x_get() {
  local k=$1 dest="$__X_D/${__X_R[$1]}" part code rc size got
  part="$dest$__X_PS"
  if ! mkdir -p -- "${dest%/*}"; then __x_fail "$k" "mkdir cannot create the directory"; return; fi
  rm -f -- "$part"
  code=$(__x_curl "$k" -o "$part"); rc=$?
  if [ "$rc" -ne 0 ]; then rm -f -- "$part"; __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; return; fi
  [ -e "$part" ] || : > "$part"
  size=$(__x_size "$part")
  if [ "$size" != "${__X_FS[$k]}" ]; then
    rm -f -- "$part"; __x_fail "$k" "size got $size bytes, expected ${__X_FS[$k]}"; return
  fi
  got=$(md5sum < "$part"); got=${got%% *}
  if [ "${__X_M[$k]}" != - ] && [ "$got" != "${__X_M[$k]}" ]; then
    rm -f -- "$part"; __x_fail "$k" "md5 got $got, expected ${__X_M[$k]}"; return
  fi
  if ! mv -f -- "$part" "$dest"; then rm -f -- "$part"; __x_fail "$k" "move cannot move into place"; return; fi
  printf 'BREV_XFER_OK %s %s %s -\n' "$k" "$size" "$got"
}
__x_changed() {  # key, file: true when the file is no longer what the listing saw (size, times, inode)
  local now
  [ "${__X_SIG[$1]}" != - ] || return 1
  now=$(find "$2" -maxdepth 0 -printf "$__X_SF") || return 0
  [ "$now" != "${__X_SIG[$1]}" ]
}
__x_upload() {  # key, file to send, Content-MD5 (base64 or -), bytes, md5 (or -), [listed file read by curl]
  local k=$1 src=$2 cmd5=$3 size=$4 md5=$5 h="$__X_T/h.$1" code rc etag
  local -a hdr=(-H 'Expect:')
  [ "$cmd5" != - ] && hdr+=(-H "Content-MD5: $cmd5")
  code=$(__x_curl "$k" -T "$src" "${hdr[@]}" -D "$h" -o /dev/null); rc=$?
  if [ -n "$6" ] && __x_changed "$k" "$6"; then __x_fail "$k" "changed while it was uploaded"; return; fi
  if [ "$rc" -ne 0 ]; then __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; return; fi
  etag=$(__x_etag "$h")
  if [ -z "$etag" ]; then __x_fail "$k" "etag missing in the response"; return; fi
  printf 'BREV_XFER_OK %s %s %s %s\n' "$k" "$size" "$md5" "$etag"
}
__x_listed() {  # key, file: the file is readable and still what the listing saw (else reports why not)
  local size
  if ! size=$(__x_size "$2"); then __x_fail "$1" "read cannot read the file"; return 1; fi
  if [ "$size" != "${__X_FS[$1]}" ]; then
    __x_fail "$1" "changed size is now $size bytes, listed ${__X_FS[$1]}"; return 1
  fi
  if __x_changed "$1" "$2"; then __x_fail "$1" "changed rewritten since it was listed"; return 1; fi
}
__x_put() {
  local k=$1 src="$__X_D/${__X_R[$1]}"
  __x_listed "$k" "$src" || return
  __x_upload "$k" "$src" "${__X_M[$k]}" "${__X_FS[$k]}" - "$src"
}
__x_part() {
  local k=$1 src="$__X_D/${__X_R[$1]}" p="$__X_T/p.$1" size md5 b64
  __x_listed "$k" "$src" || return
  tail -c +$((__X_O[$k] + 1)) -- "$src" | head -c "${__X_L[$k]}" > "$p"
  size=$(__x_size "$p")
  if __x_changed "$k" "$src"; then rm -f -- "$p"; __x_fail "$k" "changed while the part was read"; return; fi
  if [ "$size" != "${__X_L[$k]}" ]; then
    rm -f -- "$p"; __x_fail "$k" "read got $size bytes of the part, expected ${__X_L[$k]}"; return
  fi
  md5=$(md5sum < "$p"); md5=${md5%% *}
  b64=-
  if [ "${__X_M[$k]}" = + ]; then b64=$(printf "$(printf '%s' "$md5" | sed 's/../\\x&/g')" | base64); fi
  __x_upload "$k" "$p" "$b64" "$size" "$md5"
  rm -f -- "$p"
}
__x_parallel_ok() {  # curl >= 7.75: --parallel and the %{urlnum} / %{exitcode} write-out variables
  local v maj min
  read -r _ v _ < <(curl --version) || return 1
  IFS=. read -r maj min _ <<< "$v"
  [[ $maj =~ ^[0-9]+$ && $min =~ ^[0-9]+$ ]] || return 1
  [ "$maj" -gt 7 ] || { [ "$maj" -eq 7 ] && [ "$min" -ge 75 ]; }
}
__x_cfg() {  # the curl config of a batch: one url/output pair per download (goes to curl on a pipe)
  local k p
  for k in "${__X_G[@]}"; do
    p=${__X_SP[$k]}; p=${p//\\/\\\\}; p=${p//\"/\\\"}
    printf 'url = "%s"\noutput = "%s"\n' "${__X_U[$k]}" "$p"
  done
}
__x_batch() {  # every download through one `curl --parallel`, then one find, one md5sum, one mv per directory
  local k n rc code p dest stage line size got
  local -A ok=() sizes=() sums=() moves=() md=()
  for k in "${__X_K[@]}"; do
    if [ -z "${__X_U[$k]}" ]; then __x_fail "$k" "nourl no URL for this task"; continue; fi
    dest="$__X_D/${__X_R[$k]}"; stage="${dest%/*}/$__X_PS"
    __X_G+=("$k"); __X_SP[$k]="$stage/${dest##*/}"; __X_SD[$stage]=1
  done
  [ "${#__X_G[@]}" -gt 0 ] || return 0
  while read -r n rc code; do
    [[ $n =~ ^[0-9]+$ ]] && [ -n "${__X_G[$n]}" ] || continue
    k=${__X_G[$n]}
    if [ "$rc" = 0 ]; then ok[$k]=1; else rm -f -- "${__X_SP[$k]}"; __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; fi
  done < <("${__X_CURL[@]}" --parallel --parallel-max "$((__X_P > 300 ? 300 : __X_P))" --create-dirs \
             -w '%{urlnum} %{exitcode} %{http_code}\n' -K <(__x_cfg))
  for k in "${!ok[@]}"; do  # curl creates no file for an empty body
    p=${__X_SP[$k]}; [ -e "$p" ] || { mkdir -p -- "${p%/*}"; : > "$p"; }
  done
  while IFS= read -r line; do sizes[${line#* }]=${line%% *}; done \
    < <(find "${!__X_SD[@]}" -maxdepth 1 -type f -printf '%s %p\n')
  while IFS= read -r line; do sums[${line#*  }]=${line%% *}; done < <(
    for k in "${!ok[@]}"; do p=${__X_SP[$k]}; [[ $p == *\\* ]] || printf '%s\0' "$p"; done | xargs -0 -r md5sum --)
  for k in "${__X_G[@]}"; do
    [ -n "${ok[$k]}" ] || continue
    p=${__X_SP[$k]}; size=${sizes[$p]:-0}; unset 'ok[$k]'
    if [ "$size" != "${__X_FS[$k]}" ]; then
      rm -f -- "$p"; __x_fail "$k" "size got $size bytes, expected ${__X_FS[$k]}"; continue
    fi
    got=${sums[$p]}
    if [ -z "$got" ]; then got=$(md5sum < "$p"); got=${got%% *}; fi
    if [ "${__X_M[$k]}" != - ] && [ "$got" != "${__X_M[$k]}" ]; then
      rm -f -- "$p"; __x_fail "$k" "md5 got $got, expected ${__X_M[$k]}"; continue
    fi
    ok[$k]=1; md[$k]=$got; moves[${p%/*}]+="$p"$'\n'
  done
  for stage in "${!moves[@]}"; do printf '%s' "${moves[$stage]}" | xargs -d '\n' -r mv -f -t "${stage%/*}" --; done
  for k in "${__X_G[@]}"; do
    [ -n "${ok[$k]}" ] || continue
    if [ -e "${__X_SP[$k]}" ]; then
      rm -f -- "${__X_SP[$k]}"; __x_fail "$k" "move cannot move into place"
    else
      printf 'BREV_XFER_OK %s %s %s -\n' "$k" "${__X_FS[$k]}" "${md[$k]}"
    fi
  done
  rm -rf -- "${!__X_SD[@]}"
}
__x_task() {
  if [ -z "${__X_U[$1]}" ]; then __x_fail "$1" "nourl no URL for this task"; return; fi
  case ${__X_OP[$1]} in
    G) __x_get "$1" ;;
    S) __x_put "$1" ;;
    P) __x_part "$1" ;;
  esac
}
__x_clean() {
  rm -f -- "$__X_F"; rm -rf -- "$__X_T"
  if [ "${#__X_SD[@]}" -gt 0 ]; then rm -rf -- "${!__X_SD[@]}"; fi
  if [ "$__X_GET" = 1 ] && [ -d "$__X_D" ]; then find "$__X_D" -name "*$__X_PS" -prune -exec rm -rf -- {} +; fi
}
__X_GET=0; __X_G=()
declare -A __X_SP __X_SD
trap __x_clean EXIT
trap '__x_clean; exit 0' HUP INT TERM PIPE
if ! mkdir -p -- "$__X_BASE" || ! mkdir -m 700 -- "$__X_T"; then
  rm -f -- "$__X_F"; echo 'BREV_XFER_ERROR cannot create a private temp directory'; exit 0
fi
if [ ! -f "$__X_F" ]; then echo 'BREV_XFER_ERROR the plan file is missing'; exit 0; fi
chmod 600 -- "$__X_F"
declare -A __X_U __X_OP __X_FS __X_O __X_L __X_M __X_SIG __X_R
__X_K=(); __X_N=-1
while IFS=$'\t' read -r tag k op fs off len md sig rp; do
  case $tag in
    U) __X_U[$k]=$op ;;
    T) __X_K+=("$k"); __X_OP[$k]=$op; __X_FS[$k]=$fs; __X_O[$k]=$off; __X_L[$k]=$len; __X_M[$k]=$md
       __X_SIG[$k]=$sig; __X_R[$k]=$rp ;;
    N) __X_N=$k ;;
  esac
done < "$__X_F"
rm -f -- "$__X_F"
if [ "$__X_N" != "${#__X_K[@]}" ]; then echo 'BREV_XFER_ERROR the plan file is truncated'; exit 0; fi
if ! command -v curl >/dev/null; then echo 'BREV_XFER_ERROR curl is not installed on the instance'; exit 0; fi
if curl --help all 2>/dev/null | grep -q -e --retry-all-errors; then __X_CURL+=(--retry-all-errors); fi
if [ "${#__X_K[@]}" -gt 0 ] && [ "${__X_OP[${__X_K[0]}]}" = G ]; then __X_GET=1; mkdir -p -- "$__X_D"; fi
__x_n=0
if [ "$__X_GET" = 1 ] && [ "$__X_BATCH" = 1 ] && __x_parallel_ok; then __x_batch; __X_K=(); fi
for __x_k in "${__X_K[@]}"; do
  if [ "$__x_n" -ge "$__X_P" ]; then wait -n; __x_n=$((__x_n - 1)); fi
  __x_task "$__x_k" &
  __x_n=$((__x_n + 1))
done
wait
printf 'BREV_XFER_DONE %s\n' "$__X_N"
exit 0
"""


def _check_int(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_script_length(script: str) -> str:
    if len(script.encode("utf-8")) > MAX_SCRIPT_LENGTH:
        raise ValueError(f"The transfer script is longer than {MAX_SCRIPT_LENGTH} bytes.")
    return script


def build_transfer_script(
    *,
    xfer_id: str,
    remote_dir: str,
    concurrency: int = 4,
    curl_retries: int = 3,
    connect_timeout: int = 30,
    stall_seconds: int = 120,
    parallel_downloads: bool = True,
) -> str:
    """The script of one transfer round (reads the plan :func:`plan_path` ``(xfer_id)``; see the module doc).

    :param remote_dir: downloads land in / uploads are read from this directory (``~/``, relative = ``$HOME``).
    :param concurrency: tasks run in parallel.
    :param curl_retries: ``curl --retry`` count of each task (transient errors and, where supported, all
        errors); the worker retries failed tasks again in later rounds with fresh URLs.
    :param stall_seconds: abort a transfer slower than 1 KiB/s for this long (then it is retried).
    :param parallel_downloads: fetch every download of the round with one ``curl --parallel`` process (when the
        instance's curl is 7.75 or newer; else, or when false, one ``curl`` per file, ``concurrency`` at a time).
    """
    _check_xfer_id(xfer_id)
    _check_int("concurrency", concurrency, 1)
    _check_int("curl_retries", curl_retries, 0)
    _check_int("connect_timeout", connect_timeout, 1)
    _check_int("stall_seconds", stall_seconds, 1)
    curl = [
        "curl",
        "--globoff",  # '[...]'/'{...}' in a file name (curl -T) or URL are literal: 'br[0].png', 'cur{ep}.ckpt'
        "--fail",
        "--silent",
        "--retry",
        str(curl_retries),
        "--connect-timeout",
        str(connect_timeout),
        "--speed-limit",
        "1024",
        "--speed-time",
        str(stall_seconds),
    ]
    header = "\n".join(
        [
            f"# airflow-provider-brev transfer round {xfer_id}: presigned URLs come from the plan file only.",
            "exec 2>/dev/null",  # curl messages may quote URLs: nothing reaches the brev CLI's stderr
            "set +m",
            f"__X_D={remote_path_word(remote_dir)}",
            f'__X_F="$HOME"/{shlex.quote(plan_path(xfer_id))}',
            f'__X_BASE="$HOME"/{XFER_BASE}',
            f'__X_T="$HOME"/{XFER_BASE}/{shlex.quote(xfer_id)}',
            f"__X_PS={shlex.quote(PART_SUFFIX + '-' + xfer_id)}",
            f"__X_P={concurrency}",
            f"__X_SF={shlex.quote(SIGNATURE_FORMAT)}",
            f"__X_BATCH={1 if parallel_downloads else 0}",
            "__X_CURL=(" + " ".join(shlex.quote(a) for a in curl) + ")",
        ]
    )
    return check_script_length(header + _TRANSFER_BODY)


def build_cleanup_script(xfer_id: str) -> str:
    """Remove a round's plan file and temp directory (after an exec that failed part-way); prints
    ``BREV_XFER_CLEANED``."""
    _check_xfer_id(xfer_id)
    return (
        f'rm -f -- "$HOME"/{shlex.quote(plan_path(xfer_id))} 2>/dev/null; '
        f'rm -rf -- "$HOME"/{XFER_BASE}/{shlex.quote(xfer_id)} 2>/dev/null; '
        f"echo {CLEANED_MARKER}; exit 0"
    )
