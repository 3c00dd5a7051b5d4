"""Pure shell-building for commands sent through ``brev exec``.

``brev exec <instance> <command>`` hands one command string to ``ssh``. The released CLI treats *any*
non-zero ssh exit as a connection failure, refreshes, and runs the command a second time, then exits 1
without the real code. :func:`build_once_command` wraps a command so that

* it runs at most once per ``run_id`` (``mkdir`` is the atomic guard; a re-run only reports),
* the wrapper itself always exits 0 (so the CLI never takes the re-run path because of *our* exit code),
* the real exit code is reported on stderr behind a per-call random marker the command cannot forge.

The scripts are ``airflow_provider_brev/remote/once.sh``, ``foreground_kill.sh`` and ``secret_sweep.sh``; every
value reaches them through the quoted header of
:func:`~airflow_provider_brev.core.protocol.remote_scripts.render_script`. Nothing here runs a process.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from airflow_provider_brev.core.protocol.markers import FG_KILLED, FG_NONE, marker_word
from airflow_provider_brev.core.protocol.remote_scripts import HomePath, Value, render_script
from airflow_provider_brev.core.secrets import MIN_SECRET_LINE_BYTES, NOT_CONTENT, TRIMMED

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Where the exactly-once guards live, relative to the remote ``$HOME``.
RUNS_DIR = ".airflow-brev/runs"
STARTED_ELSEWHERE = "started"


#: Secret env files left by a worker that died between ``brev copy`` and the launch are removed after this long
#: (a live one is sourced and deleted within seconds of its copy).
STALE_SECRET_MINUTES = 60


def secret_file_name(call_id: str) -> str:
    """The remote file (relative to ``$HOME``) that carries one call's ``secret_env`` values."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", call_id):
        raise ValueError(f"call id {call_id!r} must be alphanumeric")
    return f".airflow-brev-secret-{call_id}.env"


def stale_secret_cleanup(call_ids: Iterable[str] = ()) -> str:
    """Remove the secret files of ``call_ids`` (earlier tries of the same task) and any secret file older than
    :data:`STALE_SECRET_MINUTES`: a worker that died after copying one never left it behind for good
    (``remote/secret_sweep.sh``)."""
    files = " ".join(secret_file_name(i) for i in call_ids)
    return render_script("secret_sweep", {"__B_FILES": files, "__B_STALE_MINUTES": STALE_SECRET_MINUTES})


def validate_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """Check environment variable names; values are converted to ``str``."""
    result: dict[str, str] = {}
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not _ENV_NAME_RE.match(key):
            raise ValueError(f"Invalid environment variable name {key!r}: use letters, digits and '_'.")
        result[key] = str(value)
    return result


def env_prefix(env: Mapping[str, str] | None) -> str:
    """``env K=V ... `` (quoted) or an empty string."""
    pairs = validate_env(env)
    if not pairs:
        return ""
    return "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in pairs.items()) + " "


_AWK_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\t": "\\t", "\r": "\\r", "\f": "\\f", "\v": "\\v"})


def _awk_string(text: str) -> str:
    """``text`` as an awk string literal (POSIX escapes)."""
    return '"' + text.translate(_AWK_ESCAPES) + '"'


#: The awk program of :func:`redact_filter` (and of ``remote/job_run.sh``): the rule of :mod:`airflow_provider_brev.core.secrets`
#: in POSIX awk. Its BEGIN block applies :func:`~airflow_provider_brev.core.secrets.secret_fragments` to each value (read
#: from awk's environment, so no value is on a command line) and sorts the fragments longest first
#: (:func:`~airflow_provider_brev.core.secrets.redaction_fragments`); then every occurrence of each is replaced,
#: literally (``index``, not a regex). POSIX awk only (mawk, Ubuntu's default awk, and gawk alike).
REDACT_AWK = (
    'function trim(s){while(s!=""&&index(W,substr(s,1,1)))s=substr(s,2);'
    'while(s!=""&&index(W,substr(s,length(s),1)))s=substr(s,1,length(s)-1);return s}'
    "function content(s,  q){for(q=1;q<=length(s);q++)if(!index(P,substr(s,q,1)))return 1;return 0}"
    "BEGIN{W=" + _awk_string(TRIMMED) + ";P=" + _awk_string(NOT_CONTENT) + ";"
    'n=split(N,k," ");m=0;for(i=1;i<=n;i++){s=ENVIRON[k[i]];'
    'if(!index(s,"\\n")){if(length(s)>0)v[++m]=s;continue}'
    'c=split(s,ls,"\\n");for(j=1;j<=c;j++){t=trim(ls[j]);'
    f"if(length(t)>={MIN_SECRET_LINE_BYTES}&&content(t))v[++m]=t}}}}"
    "for(i=2;i<=m;i++){t=v[i];for(j=i-1;j>=1&&length(v[j])<length(t);j--)v[j+1]=v[j];v[j+1]=t}}"
    '{l=$0;for(i=1;i<=m;i++){s=v[i];o="";'
    'while((p=index(l,s))>0){o=o substr(l,1,p-1) "***";l=substr(l,p+length(s))}l=o l}print l;fflush()}'
)


def redact_names(names: Iterable[str]) -> str:
    """The names of the secret variables, sorted and space-separated, as :data:`REDACT_AWK` reads them (``N``).

    :param names: names of the secret environment variables (not secret themselves).
    """
    return " ".join(sorted(validate_env(dict.fromkeys(names, ""))))


def redact_filter(names: Iterable[str]) -> str:
    """A filter (``| <this>``) that replaces the values of the environment variables ``names`` with ``***``
    (each line of a multi-line value: :func:`~airflow_provider_brev.core.secrets.secret_fragments`).

    Runs on the instance, where the secret values already are: output that prints a ``secret_env`` value leaves
    the instance redacted, so no log, XCom, trigger event or exception downstream can carry it. It runs in the C
    locale: lengths and matches are in bytes, as :func:`~airflow_provider_brev.core.secrets.secret_fragments` counts them, whatever the output holds.

    :param names: names of the secret environment variables (not secret themselves).
    """
    return f"LC_ALL=C awk -v N={shlex.quote(redact_names(names))} {shlex.quote(REDACT_AWK)}"


def marker_line_re(marker: str) -> re.Pattern[str]:
    return re.compile(re.escape(marker) + r"=(\d+|" + STARTED_ELSEWHERE + r")\s*$")


def build_once_command(
    command: str,
    *,
    run_id: str,
    marker: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    secret_env_path: str | None = None,
    secret_names: Iterable[str] = (),
) -> str:
    """Wrap ``command`` to run at most once for ``run_id`` and report its exit code behind ``marker``.

    :param command: the user's shell command (run with ``bash -c``).
    :param run_id: unique per logical call (the hook's retries of the same call reuse it).
    :param secret_names: names of the ``secret_env`` variables: their values are redacted from the output on the
        instance (:func:`redact_filter`).
    :param marker: a random token; the wrapper prints ``<marker>=<exit code>`` on stderr at the end,
        or ``<marker>=started`` when an earlier attempt of the same call already started the command.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", run_id):
        raise ValueError(f"run_id {run_id!r} must be alphanumeric")
    if not re.fullmatch(r"[A-Za-z0-9_]+", marker):
        raise ValueError("marker must be alphanumeric")
    plain_env = validate_env(env)
    names = list(secret_names)
    values: dict[str, Value] = {
        "__B_RUNS": HomePath(RUNS_DIR),
        "__B_GUARD": HomePath(f"{RUNS_DIR}/{run_id}"),
        "__B_MARKER": marker,
        "__B_CMD": command,
        "__B_CWD": cwd or "",
        "__B_SECRET": secret_env_path or "",
        "__B_ENV_NAMES": " ".join(plain_env),
        **{f"__B_ENV_{name}": value for name, value in plain_env.items()},
        "__B_SECRET_NAMES": redact_names(names),
        "__BREV_REDACT_AWK": REDACT_AWK if names else "",
        "__B_STALE_MINUTES": STALE_SECRET_MINUTES,
    }
    return render_script("once", values)


#: What :func:`build_foreground_kill_command` prints when it signalled the command / found none.
FOREGROUND_KILLED = marker_word(FG_KILLED)
FOREGROUND_NONE = marker_word(FG_NONE)


def build_foreground_kill_command(run_id: str, *, grace_seconds: float = 1.0) -> str:
    """Stop the foreground command of ``run_id`` (:func:`build_once_command`): SIGTERM to its whole session,
    SIGKILL after ``grace_seconds``. Prints :data:`FOREGROUND_KILLED` or :data:`FOREGROUND_NONE`; exits 0.

    :param run_id: the call's run id.
    :param grace_seconds: seconds between SIGTERM and SIGKILL.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", run_id):
        raise ValueError(f"run_id {run_id!r} must be alphanumeric")
    values: dict[str, Value] = {"__B_GUARD": HomePath(f"{RUNS_DIR}/{run_id}"), "__B_GRACE": f"{float(grace_seconds):g}"}
    return render_script("foreground_kill", values)


def parse_once_marker(stderr_lines: Iterable[str], marker: str) -> int | str | None:
    """The exit code reported by :func:`build_once_command` (or ``"started"``), ``None`` if absent."""
    pattern = marker_line_re(marker)
    found: int | str | None = None
    for line in stderr_lines:
        match = pattern.search(line)
        if match:
            value = match.group(1)
            found = int(value) if value.isdigit() else value
    return found


def strip_once_stdout(lines: list[str], instance_name: str) -> list[str]:
    """Remove the CLI's trailing instance-name line and the wrapper's one extra newline."""
    if lines and lines[-1].strip() == instance_name:
        lines = lines[:-1]
    if lines and lines[-1] == "":
        lines = lines[:-1]
    return lines
