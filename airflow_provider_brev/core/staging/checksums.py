"""Pure S3 checksum and multipart arithmetic for transfers: md5/ETag rules, ``Content-MD5`` values, part
splitting within S3's limits, and the file signature that tells a file rewritten since it was listed.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Object metadata key holding the whole-file md5 of multipart uploads (their ETag is not an md5).
MD5_METADATA_KEY = "airflow-brev-md5"

MIB = 1024 * 1024
S3_MIN_PART_SIZE = 5 * MIB
S3_MAX_PART_SIZE = 5 * 1024 * MIB
S3_MAX_PARTS = 10_000
S3_MAX_SINGLE_PUT = 5 * 1024 * MIB

_MD5_RE = re.compile(r"^[0-9a-f]{32}$")

#: ``find -printf`` format of a file's *signature* on the instance: size, mtime, ctime and inode. The listing
#: prints it for every file; an upload (a single ``PUT`` or a part) whose file no longer has the listed signature
#: fails as ``changed`` (rewritten in place since its md5 was read), checked before and after it reads the bytes.
SIGNATURE_FORMAT = "%s/%T@/%C@/%i"
SIGNATURE_RE = re.compile(r"^[0-9]+/[0-9.]+/[0-9.]+/[0-9]+$")


def is_md5(value: object) -> bool:
    return isinstance(value, str) and bool(_MD5_RE.match(value))


def normalize_etag(etag: object) -> str:
    """An ETag as S3 returns it (quoted, any case) -> bare lower-case text."""
    return str(etag or "").strip('"').lower()


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
