"""The one grammar of the marker lines the remote scripts print, and its one parser (pure).

Every script in ``airflow_provider_brev/remote/`` reports on stdout in marker lines (it always exits 0: the
released CLI re-runs a command whose ssh exits non-zero), printed through ``__brev_mark BREV_<KIND> ...`` of
``remote/lib.sh`` (or, for bulk output, ``find -printf``/``sed`` in the same form; the word is spelt out in full,
so a script's text names the markers it prints). The grammar::

    line   = "BREV_" KIND { " " field } [ " " text ]      at the very start of a line
    KIND   = one of KINDS (upper case, digits, "_")
    field  = one or more characters, none of them a space, tab, CR or LF
    text   = the rest of the line, verbatim (may hold spaces; may be empty)

* A marker is anchored at the start of its line (blanks before it are tolerated: readers always stripped them);
  the line's terminator (LF, and one CR before it) is not part of it. A line that merely *contains* ``BREV_`` (a
  user's log line), an unknown kind, or the wrong number of fields is not a marker.
* Each kind has a fixed list of fields (:data:`KINDS`; a reader tolerates a kind's ``optional`` trailing fields
  missing, as readers always did); only a kind that declares a ``text`` takes the rest of the line, and only it
  may hold spaces (a relative path, a failure detail, a manifest line). Trailing whitespace
  after the last field of a kind without ``text`` is ignored.
* Escaping is by construction, not by quoting: no value with a newline is ever printed (file names with a tab or
  newline are skipped and counted by the listing); a value that may hold any bytes (a JSON record, a file, a log
  line) travels base64 (``base64 -w 0``); ``-`` stands for "none" in a field.

:func:`parse_marker` is the parser every consumer uses (:mod:`airflow_provider_brev.core.jobs.remote`,
:mod:`airflow_provider_brev.core.staging.reports`, :mod:`airflow_provider_brev.core.tao.report`; the foreground
kill's ``FG_*`` lines are for its caller's log and tests). Not a marker of this grammar: the exit-code line of the
exactly-once wrapper (:func:`airflow_provider_brev.core.jobs.shell.parse_once_marker`), a per-call random token
on stderr that the command it wraps cannot forge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

PREFIX = "BREV_"
_BLANKS = " \t\r"


@dataclass(frozen=True)
class MarkerKind:
    """One kind of marker line.

    :param name: the kind (after ``BREV_``).
    :param fields: the names of its fixed fields, in order.
    :param text: the name of its free-text tail, if it has one.
    :param optional: the names of trailing fields a reader tolerates missing (a kind without ``text`` only).
    """

    name: str
    fields: tuple[str, ...] = ()
    text: str | None = None
    optional: tuple[str, ...] = ()


# Detached jobs (remote/job_*.sh; parsed by core/jobs/remote.py).
JOB_STATUS = "JOB_STATUS"
JOB_LOG_BEGIN = "JOB_LOG_BEGIN"
JOB_LOG_END = "JOB_LOG_END"
JOB_LAUNCHED = "JOB_LAUNCHED"
JOB_EXISTS = "JOB_EXISTS"
JOB_LAUNCH_FAILED = "JOB_LAUNCH_FAILED"
JOB_KILLED = "JOB_KILLED"
JOB_CLEANED = "JOB_CLEANED"
# S3 transfer rounds and listings (remote/transfer*.sh, remote/list.sh; parsed by core/staging/reports.py).
XFER_OK = "XFER_OK"
XFER_FAIL = "XFER_FAIL"
XFER_ERROR = "XFER_ERROR"
XFER_DONE = "XFER_DONE"
XFER_CLEANED = "XFER_CLEANED"
XFER_FILE = "XFER_FILE"
XFER_UNREADABLE = "XFER_UNREADABLE"
XFER_LISTED = "XFER_LISTED"
XFER_NODIR = "XFER_NODIR"
XFER_MANIFEST = "XFER_MANIFEST"
# What a TAO action left (remote/tao_report.sh; parsed by core/tao/report.py).
TAO_STATUS = "TAO_STATUS"
TAO_STARTED = "TAO_STARTED"
TAO_CKPT = "TAO_CKPT"
TAO_FILE = "TAO_FILE"
TAO_FAULT = "TAO_FAULT"
TAO_END = "TAO_END"
# The foreground kill (remote/foreground_kill.sh, run by hooks/brev.py stop_foreground).
FG_KILLED = "FG_KILLED"
FG_NONE = "FG_NONE"

#: Every kind, by name.
KINDS: dict[str, MarkerKind] = {
    kind.name: kind
    for kind in (
        MarkerKind(JOB_STATUS, ("job_id", "state", "exit_code", "log_size", "pid")),
        MarkerKind(JOB_LOG_BEGIN),
        MarkerKind(JOB_LOG_END),
        MarkerKind(JOB_LAUNCHED, ("job_id", "pid")),
        MarkerKind(JOB_EXISTS, ("job_id",)),
        MarkerKind(JOB_LAUNCH_FAILED, ("job_id", "reason")),
        MarkerKind(JOB_KILLED, ("job_id", "result")),
        MarkerKind(JOB_CLEANED, ("job_id", "result")),
        MarkerKind(XFER_OK, ("task", "bytes", "md5", "etag")),
        MarkerKind(XFER_FAIL, ("task", "code"), text="detail"),
        MarkerKind(XFER_ERROR, (), text="reason"),
        MarkerKind(XFER_DONE, optional=("count",)),
        MarkerKind(XFER_CLEANED),
        MarkerKind(XFER_FILE, ("size", "md5", "signature"), text="relpath"),
        MarkerKind(XFER_UNREADABLE, (), text="relpath"),
        MarkerKind(XFER_LISTED, optional=("count", "skipped")),
        MarkerKind(XFER_NODIR),
        MarkerKind(XFER_MANIFEST, (), text="line"),
        MarkerKind(TAO_STATUS, (), text="record_base64"),
        MarkerKind(TAO_STARTED, ("epoch",)),
        MarkerKind(TAO_CKPT, ("mtime", "size"), text="path"),
        MarkerKind(TAO_FILE, ("name",), text="content_base64"),
        MarkerKind(TAO_FAULT, (), text="line_base64"),
        MarkerKind(TAO_END),
        MarkerKind(FG_KILLED),
        MarkerKind(FG_NONE),
    )
}


@dataclass(frozen=True)
class Marker:
    """One parsed marker line.

    :param kind: its kind (a key of :data:`KINDS`).
    :param fields: its fixed fields, in the order of :attr:`MarkerKind.fields` then :attr:`MarkerKind.optional`
        (those present).
    :param text: its free-text tail (``""`` when absent; ``None`` for a kind without one).
    """

    kind: str
    fields: tuple[str, ...] = ()
    text: str | None = None

    def __getitem__(self, name: str) -> str:
        """The value of the field -- or the text -- that :data:`KINDS` calls ``name`` for this kind: readers name
        what they read (``marker["job_id"]``), so the grammar table is the one place a field's position is known.
        An optional field the line left out, or an absent text, reads as ``""``.

        :raises KeyError: this kind has no field or text called ``name``.
        """
        spec = KINDS[self.kind]
        if name == spec.text:
            return self.text or ""
        names = spec.fields + spec.optional
        if name not in names:
            raise KeyError(f"BREV_{self.kind} has no field {name!r}: its fields are {names}, its text {spec.text!r}")
        index = names.index(name)
        return self.fields[index] if index < len(self.fields) else ""


def marker_word(kind: str) -> str:
    """What a line of ``kind`` starts with: ``BREV_<kind>``."""
    if kind not in KINDS:
        raise ValueError(f"Unknown marker kind {kind!r}")
    return PREFIX + kind


def format_marker(kind: str, *fields: str, text: str | None = None) -> str:
    """The line (without its newline) that ``__brev_mark <kind> <fields...> [<text>]`` prints; the inverse of
    :func:`parse_marker` (used by tests and by fakes that speak the grammar).

    :raises ValueError: an unknown kind, the wrong number of fields, a field with a blank, or a newline.
    """
    spec = KINDS.get(kind)
    if spec is None:
        raise ValueError(f"Unknown marker kind {kind!r}")
    if not len(spec.fields) <= len(fields) <= len(spec.fields) + len(spec.optional) or any(
        not f or any(c in f for c in _BLANKS + "\n") for f in fields
    ):
        raise ValueError(f"{kind} takes the fields {spec.fields + spec.optional}, got {fields!r}")
    if text is not None and (spec.text is None or "\n" in text or "\r" in text):
        raise ValueError(f"{kind} takes no text with a newline{'' if spec.text else ' (and no text at all)'}")
    words = [marker_word(kind), *fields]
    if text is not None:
        words.append(text)
    return " ".join(words)


def parse_marker(line: str) -> Marker | None:
    """The marker on ``line`` (see the module doc), or ``None`` when ``line`` is not one."""
    line = line.lstrip(_BLANKS)
    if not line.startswith(PREFIX):
        return None
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    head, _sep, rest = line[len(PREFIX) :].partition(" ")
    spec = KINDS.get(head)
    if spec is None or "\n" in rest:
        return None
    count = len(spec.fields)
    if spec.text is None:
        words = rest.rstrip(_BLANKS).split(" ") if rest.strip(_BLANKS) else []
        text = None
        if count < len(words) <= count + len(spec.optional):
            count = len(words)
    elif count == 0:
        words, text = [], rest
    else:
        words = rest.split(" ", count)
        text = words.pop() if len(words) > count else ""
    if len(words) != count or any(not w or any(c in w for c in _BLANKS) for w in words):
        return None
    return Marker(spec.name, tuple(words), text)


def iter_markers(lines: Iterable[str]) -> Iterator[Marker]:
    """The markers among ``lines``, in order (other lines skipped)."""
    for line in lines:
        marker = parse_marker(line)
        if marker is not None:
            yield marker
