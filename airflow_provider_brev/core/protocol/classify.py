"""What a ``brev`` call's output means: breadcrumbs, "logged out", failure kinds and the re-login decision.

Pure functions (no process, no Airflow): the sync and the async runner in
:mod:`airflow_provider_brev.hooks.base` call exactly these, so a worker and the triggerer always reach the same
verdict for the same output.

**Breadcrumbs are noise, never a diagnosis.** The released CLI prints lines to stdout that are not errors:
``no oauth found for token`` on *every* call of a session whose stored access token is not a JWT from a known
issuer (e.g. after ``brev login --token`` with a non-JWT token), ``WARN: malformed refresh token, logging out``,
``warning: invalid refresh token | ...``, the login banners (``▸ Starting Login``, ``current organization: ...``,
hints), and ``Agent pid N`` from older ``brev exec``. :func:`strip_breadcrumbs` removes them first; every decision
is then made from the error the CLI actually reports (its last stderr lines), so a breadcrumb can never turn
"instance not found" into "not logged in".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLIError,
    BrevConnectionLostError,
    BrevDuplicateNameError,
    BrevError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevPlacementRequiredError,
    BrevTransientError,
)

__all__ = [
    "BREADCRUMB_PATTERNS",
    "LOGGED_OUT_MARKERS",
    "RULES",
    "STARTUP_BREADCRUMBS",
    "Marker",
    "Rule",
    "classify_failure",
    "is_logged_out",
    "is_startup_breadcrumb",
    "last_error_text",
    "login_failure",
    "should_relogin",
    "strip_breadcrumbs",
]

#: Lines the CLI prints that are not errors (matched against the stripped line).
BREADCRUMB_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"^no oauth found for token$",
        r"^WARN: malformed refresh token.*$",
        r"^warning: invalid refresh token.*$",
        r"^▸\s+Starting Login$",
        r"^current organization: .*$",
        r"^(create an instance|list your instances):$",
        r"^brev (ls|create .*)$",
        r"^💡 Detected an AI coding agent.*$",
        r"^👋 New to Brev\?.*$",
        r"^Agent pid \d+;?$",
    )
)


def _phrase(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))


@dataclass(frozen=True)
class Marker:
    """One phrase the CLI prints, as a pattern anchored where the CLI's text has a fixed form.

    :param name: a short name (tests/unit/core/protocol/test_classify.py has a positive and a near-miss case for each).
    :param pattern: what to search for in the output (after :func:`strip_breadcrumbs`).
    """

    name: str
    pattern: re.Pattern[str]

    def found(self, text: str) -> bool:
        return self.pattern.search(text) is not None


#: The CLI's "logged out" / rejected-credentials path, after the breadcrumbs are removed: the prompt on stdout, an
#: API answer 401/403 (the CLI words API errors ``<request URL> <status> <body>``), a declined or timed-out login.
#: A bare ``EOF`` as stderr's last line is the same path (:func:`is_logged_out`).
LOGGED_OUT_MARKERS: tuple[Marker, ...] = (
    Marker("login prompt", _phrase(r"^You are currently logged out, would you like to log in\?")),
    Marker("401 from the API", _phrase(r"https?://\S+ 401 Unauthorized\b")),
    Marker("403 from the API", _phrase(r"https?://\S+ 403 Forbidden\b")),
    Marker("login declined", _phrase(r"\bdeclined to login\s*$")),
    Marker("login timed out", _phrase(r"\btimed out waiting for login\s*$")),
)


@dataclass(frozen=True)
class Rule:
    """A failure kind and the CLI phrases that mean it (:func:`classify_failure`: the first rule that matches wins).

    :param error: the error type.
    :param message: its message (``{command}``: the sub-command).
    :param markers: phrases that mean this kind.
    :param unless: phrases that veto this rule (a later rule decides).
    """

    error: type[BrevError]
    message: str
    markers: tuple[Marker, ...]
    unless: tuple[Marker, ...] = ()

    def matches(self, text: str) -> bool:
        return any(m.found(text) for m in self.markers) and not any(m.found(text) for m in self.unless)


#: The server's per-type failure, and the CLI's own "is currently unavailable (no capacity)".
_NO_CAPACITY = Marker("no capacity", _phrase(r"\bno capacity\b"))
#: create's last line when no candidate type could be created.
_CREATED_NONE = Marker("created none", _phrase(r"\bcould only create 0/\d+ instances\b"))
_TRANSIENT = "`brev {command}` hit a transient Brev error."

#: Every failure kind but "logged out", in the order they are tried (:func:`classify_failure`).
RULES: tuple[Rule, ...] = (
    Rule(
        BrevInvalidInputError,
        "`brev {command}` rejected a flag or command; the installed brev CLI does not support it.",
        (
            Marker("unknown flag", _phrase(r"\bunknown flag: --[A-Za-z0-9]")),
            Marker("unknown shorthand flag", _phrase(r"\bunknown shorthand flag: '.' in -")),
            Marker("unknown command", _phrase(r'\bunknown command "[^"]+" for "brev\b')),
        ),
    ),
    Rule(
        BrevPlacementRequiredError,
        "Brev needs explicit placement for this account (it has several cloud credentials or "
        "workspace groups). Set the Brev connection extras 'cloud_cred_id' and 'workspace_group_id' "
        "(or the operator arguments of the same names); find the ids with `brev orgs --json` "
        "and `brev ls --json`.",
        (
            # the server's words are unknown; the documented CLI names its placement flags
            Marker("placement", _phrase(r"\bplacement\b", ignore_case=True)),
            Marker("--cloud-cred-id", _phrase(r"(?<![\w-])--cloud-cred-id\b")),
            Marker("--workspace-group-id", _phrase(r"(?<![\w-])--workspace-group-id\b")),
        ),
    ),
    Rule(
        BrevDuplicateNameError,
        "An instance with this name already exists (a DELETING instance keeps its name reserved "
        "until deletion completes): wait for it to disappear or choose another name.",
        (
            Marker("duplicate workspace", _phrase(r"\bduplicate workspace\b")),
            Marker("workspace already exists", _phrase(r"\bworkspace '[^']+' already exists\b")),
        ),
    ),
    Rule(
        BrevInvalidInputError,
        "`brev {command}` rejected its input.",
        (
            Marker("name is required", _phrase(r"(?<![\w-])name is required\b")),
            Marker("name too long", _phrase(r"(?<![\w-])name must be 63 characters or fewer\b")),
            Marker("name characters", _phrase(r"(?<![\w-])name must start with a letter or digit\b")),
            Marker("instance name required", _phrase(r"\binstance name required: provide as argument\b")),
            Marker("count at least 1", _phrase(r"(?<![\w-])--count must be at least 1\b")),
            Marker("command is required", _phrase(r"(?<![\w-])command is required\b")),
        ),
    ),
    Rule(
        BrevNoMatchingTypeError,
        "No Brev instance type matches the request: check the GPU name/count or instance types with `brev search`.",
        (
            Marker("no type matches", _phrase(r"\bno GPU instances match the specified filters\b")),
            Marker("not a recognized type", _phrase(r'\binstance type "[^"]+" is not a recognized type\b')),
        ),
    ),
    Rule(
        BrevTransientError,
        _TRANSIENT,
        (
            # create's workspace-group lookup when the instance-type listing failed: retrying is the CLI's advice
            Marker("please retry", _phrase(r"\bplease retry\b")),
            Marker("listing unavailable", _phrase(r"\binstance-type listing was unavailable\b")),
        ),
    ),
    Rule(
        BrevTransientError,
        _TRANSIENT,
        (
            # the API's error text: <request URL> <HTTP status> <body>
            Marker("5xx from the API", _phrase(r"https?://\S+ 5\d\d [A-Z][a-z]+")),
            Marker("try again", _phrase(r"\btry again\b", ignore_case=True)),
            # Go's network errors
            Marker("connection reset", _phrase(r"\bconnection reset by peer\b")),
            Marker("i/o timeout", _phrase(r"\bi/o timeout\b")),
            Marker("TLS handshake timeout", _phrase(r"\bTLS handshake timeout\b")),
            Marker("name resolution", _phrase(r"\btemporary failure in name resolution\b", ignore_case=True)),
            Marker("no such host", _phrase(r"\bno such host\b")),
            Marker("client timeout", _phrase(r"\bClient\.Timeout exceeded\b")),
            # a credentials file read while another task rewrote it
            Marker("truncated JSON", _phrase(r"\bunexpected end of JSON input\b")),
        ),
        # "[Worker 1] <type> Failed: ... (no capacity); try again later": a capacity verdict, not a server error
        unless=(_NO_CAPACITY,),
    ),
    Rule(
        BrevNoCapacityError,
        "Brev had no capacity for any candidate instance type; try later or allow more types.",
        (_NO_CAPACITY, _CREATED_NONE),
    ),
    Rule(
        BrevInstanceNotFoundError,
        "The Brev instance does not exist.",
        (
            Marker("no such instance", _phrase(r"\binstance with id/name \S+ not found\b")),
            Marker("lookup failed", _phrase(r'\bcould not look up instance "')),
            # `brev start` of an unknown name
            Marker("start: path not found", _phrase(r"\btried to start with local path but path not found\b")),
        ),
    ),
    Rule(
        BrevInstanceNotReadyError,
        "The Brev instance is not running.",
        (Marker("in state", _phrase(r'\binstance "[^"]+" is in state "[A-Z_]+"')),),
    ),
    Rule(
        BrevConnectionLostError,
        "Could not reach the Brev instance over SSH (it may still be booting).",
        (
            Marker("could not connect", _phrase(r'\bcould not connect to instance "')),
            Marker(
                "ssh connect failed",
                _phrase(r"\bssh: connect to host \S+ port \d+: (?:Connection refused|Connection timed out|Operation)"),
            ),
            Marker("closed by remote host", _phrase(r"\bConnection to \S+ closed by remote host\b")),
            # ssh's own exit code for a connection error (a remote command's code is anything else)
            Marker("exit status 255", _phrase(r"\bexit status 255\s*$")),
            Marker("unresolvable alias", _phrase(r"\bssh: Could not resolve hostname\b")),
        ),
    ),
)


def strip_breadcrumbs(text: str) -> str:
    """``text`` without the CLI's breadcrumb lines (see the module docstring)."""
    if not text:
        return text
    kept = [line for line in text.splitlines() if not any(p.match(line.strip()) for p in BREADCRUMB_PATTERNS)]
    return "\n".join(kept)


#: What the CLI prints on stdout as it starts, before anything else (``auth.StandardLogin``: a stored token from an
#: issuer it has no authenticator for), so before a remote command's first line.
STARTUP_BREADCRUMBS = ("no oauth found for token",)


def is_startup_breadcrumb(line: str) -> bool:
    """Whether a stdout line that comes before any other is the CLI's own start-up line, not a remote command's.

    :param line: a line of ``brev exec``'s stdout, read before the command printed anything.
    """
    return line.strip() in STARTUP_BREADCRUMBS


def is_logged_out(stdout: str, stderr: str) -> bool:
    """Whether a failed call took the CLI's "logged out" path (prompt on stdout + ``EOF``, 401, declined ...)."""
    out, err = strip_breadcrumbs(stdout), strip_breadcrumbs(stderr)
    text = f"{out}\n{err}"
    if any(marker.found(text) for marker in LOGGED_OUT_MARKERS):
        return True
    last = err.strip().splitlines()[-1].strip() if err.strip() else ""
    return last == "EOF"


def should_relogin(
    *, authenticated: bool, can_login: bool, first_round: bool, exit_code: int, stdout: str, stderr: str
) -> bool:
    """The re-login decision: log in again (once) and repeat the call?

    :param authenticated: the call needs a session (``search``/``--version`` do not).
    :param can_login: the connection holds a token or API key to log in with.
    :param first_round: no re-login happened for this call yet (at most one per call).
    :param exit_code: the CLI's exit code.
    :param stdout: what the CLI printed on stdout (for ``exec``: only the tail after the remote output).
    :param stderr: what the CLI printed on stderr.
    """
    return authenticated and can_login and first_round and exit_code != 0 and is_logged_out(stdout, stderr)


def last_error_text(stderr: str, limit: int = 2000) -> str:
    """The useful tail of the CLI's stderr (its error is printed last)."""
    text = stderr.strip()
    return text[-limit:] if len(text) > limit else text


def login_failure(exit_code: int, stdout: str, stderr: str) -> BrevError:
    """The error for a failed ``brev login``: transient trouble stays transient, anything else is the secret."""
    failure = classify_failure("login", exit_code, stdout, stderr)
    if isinstance(failure, BrevTransientError) and not is_logged_out(stdout, stderr):
        return failure  # a 5xx / network trouble: the caller's retry loop tries again
    return BrevAuthError(
        "Brev rejected the login: the token (connection password / extra 'token' / BREV_API_TOKEN) "
        "or API key is invalid or expired. Console tokens expire about hourly; create a new one "
        "at https://brev.nvidia.com/settings/cli or use an API key (extras api_key + org_id).",
        cli_message=strip_breadcrumbs(stderr) or strip_breadcrumbs(stdout),
        command="login",
    )


def classify_failure(command: str, exit_code: int, stdout: str, stderr: str) -> BrevError:
    """Map a failed ``brev`` call to a typed error carrying the CLI's own message.

    Breadcrumbs are removed first (:func:`strip_breadcrumbs`); then "logged out" (:func:`is_logged_out`), then the
    first of :data:`RULES` with a marker in the output decides; anything else is a :class:`BrevCLIError`.

    :param command: the sub-command (``create``, ``ls``, ``exec`` ...), used in messages only.
    :param exit_code: the CLI's exit code.
    :param stdout: what the CLI printed on stdout.
    :param stderr: what the CLI printed on stderr.
    """
    stdout, stderr = strip_breadcrumbs(stdout), strip_breadcrumbs(stderr)
    message = last_error_text(stderr) or stdout.strip()[-2000:]
    text = f"{stdout}\n{stderr}"
    if is_logged_out(stdout, stderr):
        return BrevAuthError(
            f"`brev {command}` failed because the CLI is not logged in or the token was rejected. "
            "Check the Brev connection's token (password field or extra 'token') or API key; "
            "console tokens expire about hourly, so use a fresh one or an API key.",
            cli_message=message,
            command=command,
        )
    for rule in RULES:
        if rule.matches(text):
            return rule.error(rule.message.format(command=command), cli_message=message, command=command)
    return BrevCLIError(f"`brev {command}` failed with exit code {exit_code}.", cli_message=message, command=command)
