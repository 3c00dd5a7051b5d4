"""Pure shell-building and parsing for S3 <-> Brev transfers (no process is run here).

The worker presigns S3 URLs; the instance only runs ``curl`` with them, so no AWS credential reaches it.
Presigned URLs are short-lived credentials themselves, so they travel in a *plan file* (mode 0600, shipped
with ``brev copy``), never on a command line:

* :func:`build_plan` writes one file per transfer round: ``T`` lines (one per task: a file to download, a file
  to upload in one ``PUT``, or one part of a multipart upload) and ``U`` lines (the task's presigned URL), then
  an ``N <count>`` trailer that proves the file arrived whole.
* :func:`build_transfer_script` reads the plan into memory and deletes it before the first ``curl`` starts.
  Each URL reaches ``curl`` as a config file on a pipe (``curl -K <(printf 'url = "%s"' ...)``; ``printf`` is a
  bash builtin), so it is on no process's command line and in no file. The script's stderr goes to
  ``/dev/null`` (curl messages can quote URLs); results travel as marker lines on stdout:

  - ``BREV_XFER_OK <task> <bytes> <md5|-> <etag|->`` -- downloads: size and md5 verified, file moved into
    place atomically; uploads: the ETag S3 answered (parts also report the part's md5);
  - ``BREV_XFER_FAIL <task> <code> <detail>`` -- ``code`` is one of :data:`FAIL_CODES`;
  - ``BREV_XFER_ERROR <reason>`` -- nothing could run (plan missing or truncated, no ``curl``);
  - ``BREV_XFER_DONE <count>`` -- the script got to its end.

  A private temp dir (0700) holds part files and response headers; a trap removes it and the plan on exit,
  hang-up or termination. The script always exits 0 (the released CLI re-runs commands that exit non-zero).
* :func:`build_list_script` lists the regular files under a remote directory (relative path, size, md5)
  honouring include/exclude patterns, which :func:`glob_to_regex` translates into one regular expression that
  means the same to bash's ``[[ =~ ]]`` (POSIX ERE) and to Python's :mod:`re` (used for S3 keys).

Every interpolated value is ``shlex.quote``-d or validated to a safe alphabet.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

OK_MARKER = "BREV_XFER_OK"
FAIL_MARKER = "BREV_XFER_FAIL"
ERROR_MARKER = "BREV_XFER_ERROR"
DONE_MARKER = "BREV_XFER_DONE"
FILE_MARKER = "BREV_XFER_FILE"
UNREADABLE_MARKER = "BREV_XFER_UNREADABLE"
LISTED_MARKER = "BREV_XFER_LISTED"
NODIR_MARKER = "BREV_XFER_NODIR"
CLEANED_MARKER = "BREV_XFER_CLEANED"

#: Failure codes reported by the transfer script.
FAIL_CODES = ("curl", "size", "md5", "mkdir", "move", "read", "changed", "etag", "nourl")

OP_GET = "G"  # download one object to <remote_dir>/<relpath>
OP_PUT = "S"  # upload one file with a single PUT
OP_PART = "P"  # upload one part of a multipart upload

#: Suffix (then ``-<round id>``) of a download in progress: next to its destination, so the final ``mv`` is
#: atomic; unique per round, so a killed round's leftover can never mix with a later round's download.
PART_SUFFIX = ".airflow-brev-part"
#: Where the private per-round temp directories live (relative to the remote ``$HOME``).
XFER_BASE = ".airflow-brev/xfer"
#: Object metadata key holding the whole-file md5 of multipart uploads (their ETag is not an md5).
MD5_METADATA_KEY = "airflow-brev-md5"

MIB = 1024 * 1024
S3_MIN_PART_SIZE = 5 * MIB
S3_MAX_PART_SIZE = 5 * 1024 * MIB
S3_MAX_PARTS = 10_000
S3_MAX_SINGLE_PUT = 5 * 1024 * MIB
#: Linux limits one execve argument to 128 KiB; the script travels as one argument.
MAX_SCRIPT_LENGTH = 100 * 1024

_MD5_RE = re.compile(r"^[0-9a-f]{32}$")
_ETAG_RE = re.compile(r"^[0-9A-Za-z_-]{1,200}$")
_XFER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_KEY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_URL_RE = re.compile(r"^https?://[^\s\"\\'\x00-\x1f\x7f]+$")
_BAD_PATH_CHARS = ("\n", "\r", "\t", "\x00")
_ERE_SPECIAL = set(".^$*+?()[]{}|\\")
_BRACKET_SAFE = re.compile(r"^[A-Za-z0-9 _.,:;/@%=+~#!-]*$")


def is_md5(value: object) -> bool:
    return isinstance(value, str) and bool(_MD5_RE.match(value))


# ------------------------------------------------------------------------------------------------ patterns


def glob_to_regex(pattern: str) -> str:
    """Translate a glob into a regex with the same meaning in POSIX ERE (bash ``=~``) and Python ``re``.

    ``*`` matches any characters *including* ``/`` (like :func:`fnmatch.fnmatchcase`, so ``*.pth`` matches at
    any depth); ``?`` one character; ``[abc]``, ``[a-z]``, ``[!abc]`` a set; a leading ``**/`` also matches
    zero directories (``**/x.json`` matches ``x.json`` and ``a/b/x.json``). Patterns match the path relative to
    the S3 prefix or the remote directory. Brackets may contain letters, digits and ``_.,:;/@%=+~#!-`` only.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("An include/exclude pattern must be a non-empty string.")
    if any(ch in pattern for ch in _BAD_PATH_CHARS):
        raise ValueError(f"Pattern {pattern!r} must not contain tabs, newlines or NUL characters.")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(.*/)?")
            i += 3
            continue
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
            while i + 1 < n and pattern[i + 1] == "*" and not pattern.startswith("**/", i + 1):
                i += 1
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i + 1
            negate = j < n and pattern[j] == "!"
            if negate:
                j += 1
            start = j
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal '['
                out.append("\\[")
            else:
                content = pattern[start:j]
                lead_bracket = content.startswith("]")
                body = content[1:] if lead_bracket else content
                if not body and not lead_bracket:
                    raise ValueError(f"Pattern {pattern!r} has an empty bracket expression.")
                if not _BRACKET_SAFE.match(body) or re.search(r"--|~~|&&|\|\|", body):
                    raise ValueError(
                        f"Pattern {pattern!r}: a bracket expression may only contain letters, digits and "
                        "'_.,:;/@%=+~#!-' (no doubled '-' or '~')."
                    )
                if body.startswith("^"):
                    raise ValueError(f"Pattern {pattern!r}: use '[!...]' to negate a bracket expression.")
                out.append("[" + ("^" if negate else "") + ("]" if lead_bracket else "") + body + "]")
                i = j
        elif ch in _ERE_SPECIAL:
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _alternation(patterns: Sequence[str]) -> str:
    return "|".join(f"({glob_to_regex(p)})" for p in patterns)


@dataclass(frozen=True)
class PathFilter:
    """Include/exclude globs (see :func:`glob_to_regex`); a path is selected when it matches at least one
    include pattern (or there are none) and no exclude pattern."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    include_regex: str = field(init=False, default="")
    exclude_regex: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "include_regex", _alternation(self.include) if self.include else "")
        object.__setattr__(self, "exclude_regex", _alternation(self.exclude) if self.exclude else "")

    @classmethod
    def create(
        cls, include: str | Iterable[str] | None = None, exclude: str | Iterable[str] | None = None
    ) -> PathFilter:
        return cls(include=normalize_patterns(include, "include"), exclude=normalize_patterns(exclude, "exclude"))

    @property
    def bash_include(self) -> str:
        """Anchored ERE for bash (empty = everything)."""
        return f"^({self.include_regex})$" if self.include_regex else ""

    @property
    def bash_exclude(self) -> str:
        return f"^({self.exclude_regex})$" if self.exclude_regex else ""

    def matches(self, relpath: str) -> bool:
        if self.include_regex and not re.fullmatch(self.include_regex, relpath, re.DOTALL):
            return False
        return not (self.exclude_regex and re.fullmatch(self.exclude_regex, relpath, re.DOTALL))


def normalize_patterns(value: str | Iterable[str] | None, what: str = "pattern") -> tuple[str, ...]:
    """``None``/``""`` -> ``()``; a string -> one pattern; an iterable of strings -> those patterns."""
    if value is None or value == "":
        return ()
    items = [value] if isinstance(value, str) else list(value)
    result = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"Every {what} pattern must be a non-empty string, got {item!r}.")
        glob_to_regex(item)  # validate early
        result.append(item)
    return tuple(result)


# --------------------------------------------------------------------------------------------------- paths


def validate_relpath(relpath: str) -> str:
    """A safe relative path: no leading ``/``, no empty, ``.`` or ``..`` component, no tab/newline/NUL."""
    if not isinstance(relpath, str) or not relpath:
        raise ValueError("empty relative path")
    if any(ch in relpath for ch in _BAD_PATH_CHARS):
        raise ValueError(f"{relpath!r} contains a tab, newline or NUL character")
    if "\ufffd" in relpath:
        raise ValueError(f"{relpath!r} is not valid UTF-8")
    if relpath.startswith("/"):
        raise ValueError(f"{relpath!r} is absolute")
    parts = relpath.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{relpath!r} has an empty, '.' or '..' component")
    return relpath


def find_path_conflicts(relpaths: Iterable[str]) -> list[str]:
    """Paths that are also a parent directory of another path (``a`` and ``a/b`` cannot both be files)."""
    paths = set(relpaths)
    parents = set()
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parents.add("/".join(parts[:i]))
    return sorted(paths & parents)


def normalize_prefix(prefix: str | None) -> str:
    """An S3 "directory" prefix: ``""`` (whole bucket) or ending in exactly one ``/``."""
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise ValueError(f"The S3 prefix must be a string, got {prefix!r}")
    prefix = prefix.lstrip("/")
    if any(ch in prefix for ch in ("\n", "\r", "\x00")):
        raise ValueError(f"Invalid S3 prefix {prefix!r}")
    return prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def remote_path_word(path: str) -> str:
    """Shell word for a remote path: ``~``/``~/x``/relative paths resolve against ``$HOME``."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("The remote directory must be a non-empty path.")
    if any(ch in path for ch in ("\n", "\r", "\x00")):
        raise ValueError(f"The remote directory {path!r} must not contain newlines or NUL characters.")
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:].lstrip("/")
        return f'"$HOME"/{shlex.quote(rest)}' if rest else '"$HOME"'
    if path.startswith("/"):
        return shlex.quote(path)
    return f'"$HOME"/{shlex.quote(path)}'


def plan_path(xfer_id: str) -> str:
    """Where a round's plan file goes on the instance (relative to ``$HOME``, as ``brev copy`` takes it)."""
    _check_xfer_id(xfer_id)
    return f".airflow-brev-xfer-{xfer_id}.plan"


def _check_xfer_id(xfer_id: str) -> None:
    if not isinstance(xfer_id, str) or not _XFER_ID_RE.match(xfer_id):
        raise ValueError(f"Invalid transfer id {xfer_id!r}")


# ---------------------------------------------------------------------------------------------- checksums


def md5_hex_to_base64(md5_hex: str) -> str:
    """The ``Content-MD5`` header value for an md5 given in hex."""
    if not is_md5(md5_hex):
        raise ValueError(f"not an md5: {md5_hex!r}")
    return base64.b64encode(bytes.fromhex(md5_hex)).decode("ascii")


def multipart_etag(part_md5s: Sequence[str]) -> str:
    """The ETag S3 gives a multipart object: md5 of the concatenated part digests, ``-<number of parts>``."""
    digest = hashlib.md5(b"".join(bytes.fromhex(m) for m in part_md5s), usedforsecurity=False).hexdigest()
    return f"{digest}-{len(part_md5s)}"


def split_parts(size: int, part_size: int) -> list[tuple[int, int, int]]:
    """``[(part_number, offset, length), ...]`` covering ``size`` bytes (at least one part)."""
    if part_size <= 0:
        raise ValueError("part_size must be positive")
    count = max(1, math.ceil(size / part_size))
    return [(n + 1, n * part_size, min(part_size, size - n * part_size)) for n in range(count)]


def choose_part_size(size: int, part_size: int) -> int:
    """``part_size``, grown (to whole MiB) when ``size`` would need more than S3's 10,000 parts."""
    if size > part_size * S3_MAX_PARTS:
        part_size = math.ceil(size / S3_MAX_PARTS / MIB) * MIB
    return part_size


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

    def __post_init__(self) -> None:
        if not _KEY_RE.match(self.key):
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
            "\t".join(["T", t.key, t.op, str(t.file_size), str(t.offset), str(length), t.plan_md5_field(), t.relpath])
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
__x_upload() {  # key, file to send, Content-MD5 (base64 or -), bytes, md5 (or -)
  local k=$1 src=$2 cmd5=$3 size=$4 md5=$5 h="$__X_T/h.$1" code rc etag
  local -a hdr=(-H 'Expect:')
  [ "$cmd5" != - ] && hdr+=(-H "Content-MD5: $cmd5")
  code=$(__x_curl "$k" -T "$src" "${hdr[@]}" -D "$h" -o /dev/null); rc=$?
  if [ "$rc" -ne 0 ]; then __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; return; fi
  etag=$(__x_etag "$h")
  if [ -z "$etag" ]; then __x_fail "$k" "etag missing in the response"; return; fi
  printf 'BREV_XFER_OK %s %s %s %s\n' "$k" "$size" "$md5" "$etag"
}
__x_put() {
  local k=$1 src="$__X_D/${__X_R[$1]}" size
  if ! size=$(__x_size "$src"); then __x_fail "$k" "read cannot read the file"; return; fi
  if [ "$size" != "${__X_FS[$k]}" ]; then
    __x_fail "$k" "changed size is now $size bytes, listed ${__X_FS[$k]}"; return
  fi
  __x_upload "$k" "$src" "${__X_M[$k]}" "$size" -
}
__x_part() {
  local k=$1 src="$__X_D/${__X_R[$1]}" p="$__X_T/p.$1" size md5 b64
  if ! size=$(__x_size "$src"); then __x_fail "$k" "read cannot read the file"; return; fi
  if [ "$size" != "${__X_FS[$k]}" ]; then
    __x_fail "$k" "changed size is now $size bytes, listed ${__X_FS[$k]}"; return
  fi
  tail -c +$((__X_O[$k] + 1)) -- "$src" | head -c "${__X_L[$k]}" > "$p"
  size=$(__x_size "$p")
  if [ "$size" != "${__X_L[$k]}" ]; then
    rm -f -- "$p"; __x_fail "$k" "read got $size bytes of the part, expected ${__X_L[$k]}"; return
  fi
  md5=$(md5sum < "$p"); md5=${md5%% *}
  b64=-
  if [ "${__X_M[$k]}" = + ]; then b64=$(printf "$(printf '%s' "$md5" | sed 's/../\\x&/g')" | base64); fi
  __x_upload "$k" "$p" "$b64" "$size" "$md5"
  rm -f -- "$p"
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
  if [ "$__X_GET" = 1 ] && [ -d "$__X_D" ]; then find "$__X_D" -type f -name "*$__X_PS" -delete; fi
}
__X_GET=0
trap __x_clean EXIT
trap '__x_clean; exit 0' HUP INT TERM PIPE
if ! mkdir -p -- "$__X_BASE" || ! mkdir -m 700 -- "$__X_T"; then
  rm -f -- "$__X_F"; echo 'BREV_XFER_ERROR cannot create a private temp directory'; exit 0
fi
if [ ! -f "$__X_F" ]; then echo 'BREV_XFER_ERROR the plan file is missing'; exit 0; fi
chmod 600 -- "$__X_F"
declare -A __X_U __X_OP __X_FS __X_O __X_L __X_M __X_R
__X_K=(); __X_N=-1
while IFS=$'\t' read -r tag k op fs off len md rp; do
  case $tag in
    U) __X_U[$k]=$op ;;
    T) __X_K+=("$k"); __X_OP[$k]=$op; __X_FS[$k]=$fs; __X_O[$k]=$off; __X_L[$k]=$len; __X_M[$k]=$md; __X_R[$k]=$rp ;;
    N) __X_N=$k ;;
  esac
done < "$__X_F"
rm -f -- "$__X_F"
if [ "$__X_N" != "${#__X_K[@]}" ]; then echo 'BREV_XFER_ERROR the plan file is truncated'; exit 0; fi
if ! command -v curl >/dev/null; then echo 'BREV_XFER_ERROR curl is not installed on the instance'; exit 0; fi
if curl --help all 2>/dev/null | grep -q -e --retry-all-errors; then __X_CURL+=(--retry-all-errors); fi
if [ "${#__X_K[@]}" -gt 0 ] && [ "${__X_OP[${__X_K[0]}]}" = G ]; then __X_GET=1; mkdir -p -- "$__X_D"; fi
__x_n=0
for __x_k in "${__X_K[@]}"; do
  if [ "$__x_n" -ge "$__X_P" ]; then wait -n; __x_n=$((__x_n - 1)); fi
  __x_task "$__x_k" &
  __x_n=$((__x_n + 1))
done
wait
printf 'BREV_XFER_DONE %s\n' "${#__X_K[@]}"
exit 0
"""


def _check_int(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _finish(script: str) -> str:
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
) -> str:
    """The script of one transfer round (reads the plan :func:`plan_path` ``(xfer_id)``; see the module doc).

    :param remote_dir: downloads land in / uploads are read from this directory (``~/``, relative = ``$HOME``).
    :param concurrency: tasks run in parallel.
    :param curl_retries: ``curl --retry`` count of each task (transient errors and, where supported, all
        errors); the worker retries failed tasks again in later rounds with fresh URLs.
    :param stall_seconds: abort a transfer slower than 1 KiB/s for this long (then it is retried).
    """
    _check_xfer_id(xfer_id)
    _check_int("concurrency", concurrency, 1)
    _check_int("curl_retries", curl_retries, 0)
    _check_int("connect_timeout", connect_timeout, 1)
    _check_int("stall_seconds", stall_seconds, 1)
    curl = [
        "curl",
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
            "__X_CURL=(" + " ".join(shlex.quote(a) for a in curl) + ")",
        ]
    )
    return _finish(header + _TRANSFER_BODY)


def build_cleanup_script(xfer_id: str) -> str:
    """Remove a round's plan file and temp directory (after an exec that failed part-way); prints
    ``BREV_XFER_CLEANED``."""
    _check_xfer_id(xfer_id)
    return (
        f'rm -f -- "$HOME"/{shlex.quote(plan_path(xfer_id))} 2>/dev/null; '
        f'rm -rf -- "$HOME"/{XFER_BASE}/{shlex.quote(xfer_id)} 2>/dev/null; '
        f"echo {CLEANED_MARKER}; exit 0"
    )


_LIST_BODY = r"""
if [ ! -d "$__L_D" ]; then echo 'BREV_XFER_NODIR'; exit 0; fi
__l_n=0; __l_bad=0
while IFS= read -r -d '' __l_e; do
  __l_s=${__l_e%%/*}; __l_r=${__l_e#*/}
  case $__l_r in *$'\n'*|*$'\r'*|*$'\t'*) __l_bad=$((__l_bad + 1)); continue ;; esac
  if [ -n "$__L_INC" ] && ! [[ $__l_r =~ $__L_INC ]]; then continue; fi
  if [ -n "$__L_EXC" ] && [[ $__l_r =~ $__L_EXC ]]; then continue; fi
  if [ "$__L_MD5" = 1 ]; then
    if ! __l_m=$(md5sum < "$__L_D/$__l_r"); then printf 'BREV_XFER_UNREADABLE %s\n' "$__l_r"; continue; fi
    __l_m=${__l_m%% *}
  else
    __l_m=-
  fi
  printf 'BREV_XFER_FILE %s %s %s\n' "$__l_s" "$__l_m" "$__l_r"
  __l_n=$((__l_n + 1))
done < <(find -H "$__L_D" -mindepth 1 -type f -printf '%s/%P\0')
printf 'BREV_XFER_LISTED %s %s\n' "$__l_n" "$__l_bad"
exit 0
"""


def build_list_script(remote_dir: str, path_filter: PathFilter | None = None, *, checksums: bool = True) -> str:
    """List the regular files under ``remote_dir`` (symlinks and special files are skipped).

    Prints ``BREV_XFER_FILE <size> <md5|-> <relpath>`` per selected file, ``BREV_XFER_UNREADABLE <relpath>``
    for a selected file that cannot be read, then ``BREV_XFER_LISTED <count> <names skipped>`` (names with a
    tab or newline are skipped and counted); or ``BREV_XFER_NODIR`` when the directory does not exist.
    Always exits 0. Parse with :func:`parse_list_output`.
    """
    path_filter = path_filter or PathFilter()
    header = "\n".join(
        [
            "exec 2>/dev/null",
            f"__L_D={remote_path_word(remote_dir)}",
            f"__L_INC={shlex.quote(path_filter.bash_include)}",
            f"__L_EXC={shlex.quote(path_filter.bash_exclude)}",
            f"__L_MD5={1 if checksums else 0}",
        ]
    )
    return _finish(header + _LIST_BODY)


# ------------------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class TaskResult:
    """What the script reported for one successful task."""

    size: int
    md5: str | None
    etag: str | None


@dataclass
class TransferReport:
    """Parsed output of :func:`build_transfer_script`.

    ``complete`` is true when the script reached its end; tasks with neither an ``ok`` nor a ``failed``
    entry were not reported (connection lost, script killed) and must be treated as failed.
    """

    ok: dict[str, TaskResult] = field(default_factory=dict)
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)
    error: str | None = None
    complete: bool = False

    def outcome(self, key: str) -> tuple[str, str] | None:
        """``None`` if the task succeeded, else ``(code, detail)``."""
        if key in self.ok:
            return None
        if key in self.failed:
            return self.failed[key]
        if self.error:
            return ("error", self.error)
        return ("unreported", "no report from the instance (connection lost or script interrupted)")


def parse_transfer_output(lines: Iterable[str]) -> TransferReport:
    report = TransferReport()
    for raw in lines:
        line = raw.rstrip("\r")
        if line.startswith(OK_MARKER + " "):
            parts = line.split()
            if len(parts) != 5 or not _KEY_RE.match(parts[1]) or not parts[2].isdigit():
                continue
            md5 = parts[3] if is_md5(parts[3]) else None
            etag = parts[4] if parts[4] != "-" and _ETAG_RE.match(parts[4]) else None
            report.ok[parts[1]] = TaskResult(size=int(parts[2]), md5=md5, etag=etag)
            report.failed.pop(parts[1], None)
        elif line.startswith(FAIL_MARKER + " "):
            parts = line.split(" ", 3)
            if len(parts) < 3 or not _KEY_RE.match(parts[1]):
                continue
            if parts[1] not in report.ok:
                report.failed[parts[1]] = (parts[2], redact(parts[3] if len(parts) > 3 else ""))
        elif line.startswith(ERROR_MARKER + " "):
            report.error = redact(line[len(ERROR_MARKER) + 1 :].strip())
        elif line.startswith(DONE_MARKER):
            report.complete = True
    return report


@dataclass(frozen=True)
class RemoteFile:
    relpath: str
    size: int
    md5: str | None


@dataclass
class ListReport:
    """Parsed output of :func:`build_list_script`."""

    files: list[RemoteFile] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    skipped_names: int = 0
    missing_dir: bool = False
    complete: bool = False


def parse_list_output(lines: Iterable[str]) -> ListReport:
    report = ListReport()
    for raw in lines:
        line = raw[:-1] if raw.endswith("\r") else raw
        if line.startswith(FILE_MARKER + " "):
            parts = line.split(" ", 3)
            if len(parts) != 4 or not parts[1].isdigit():
                continue
            report.files.append(
                RemoteFile(relpath=parts[3], size=int(parts[1]), md5=parts[2] if is_md5(parts[2]) else None)
            )
        elif line.startswith(UNREADABLE_MARKER + " "):
            report.unreadable.append(line[len(UNREADABLE_MARKER) + 1 :])
        elif line.startswith(LISTED_MARKER):
            parts = line.split()
            report.complete = True
            if len(parts) >= 3 and parts[2].isdigit():
                report.skipped_names = int(parts[2])
        elif line.strip() == NODIR_MARKER:
            report.missing_dir = True
            report.complete = True
    report.files.sort(key=lambda f: f.relpath)
    return report


# ------------------------------------------------------------------------------------------------ redaction

_URL_TEXT_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_AMZ_PARAM_RE = re.compile(r"(X-Amz-[A-Za-z-]+|Signature|AWSAccessKeyId|Expires)=[^&\s\"']*", re.IGNORECASE)


def redact(text: str) -> str:
    """Remove URLs and presigned-URL query parameters from a text that goes to a log or an error."""
    text = _URL_TEXT_RE.sub("<url>", text or "")
    return _AMZ_PARAM_RE.sub(lambda m: m.group(1) + "=***", text)
