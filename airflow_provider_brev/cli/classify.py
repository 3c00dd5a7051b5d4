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
    "classify_failure",
    "is_logged_out",
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

#: Texts of the CLI's real "logged out" / rejected-credentials path (after breadcrumbs are removed).
LOGGED_OUT_MARKERS = (
    "You are currently logged out",
    "401 Unauthorized",
    "403 Forbidden",
    "declined to login",
    "timed out waiting for login",
)

_TRANSIENT_RE = re.compile(
    r"\b5\d\d (?:[A-Z][a-z]+ ?)+|please retry|try again|listing was unavailable|connection reset|"
    r"i/o timeout|TLS handshake timeout|temporary failure in name resolution|no such host|"
    r"unexpected end of JSON input|Client\.Timeout",
    re.IGNORECASE,
)


def strip_breadcrumbs(text: str) -> str:
    """``text`` without the CLI's breadcrumb lines (see the module docstring)."""
    if not text:
        return text
    kept = [line for line in text.splitlines() if not any(p.match(line.strip()) for p in BREADCRUMB_PATTERNS)]
    return "\n".join(kept)


def is_logged_out(stdout: str, stderr: str) -> bool:
    """Whether a failed call took the CLI's "logged out" path (prompt on stdout + ``EOF``, 401, declined ...)."""
    out, err = strip_breadcrumbs(stdout), strip_breadcrumbs(stderr)
    text = f"{out}\n{err}"
    if any(marker in text for marker in LOGGED_OUT_MARKERS):
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

    Breadcrumbs are removed first (:func:`strip_breadcrumbs`); the verdict comes from what remains.

    :param command: the sub-command (``create``, ``ls``, ``exec`` ...), used in messages only.
    :param exit_code: the CLI's exit code.
    :param stdout: what the CLI printed on stdout.
    :param stderr: what the CLI printed on stderr.
    """
    stdout, stderr = strip_breadcrumbs(stdout), strip_breadcrumbs(stderr)
    message = last_error_text(stderr) or stdout.strip()[-2000:]
    text = f"{stdout}\n{stderr}"
    lowered = text.lower()
    kwargs = {"cli_message": message, "command": command}

    if is_logged_out(stdout, stderr):
        return BrevAuthError(
            f"`brev {command}` failed because the CLI is not logged in or the token was rejected. "
            "Check the Brev connection's token (password field or extra 'token') or API key; "
            "console tokens expire about hourly, so use a fresh one or an API key.",
            **kwargs,
        )
    if "unknown flag" in lowered or "unknown shorthand flag" in lowered or "unknown command" in lowered:
        return BrevInvalidInputError(
            f"`brev {command}` rejected a flag or command; the installed brev CLI does not support it.",
            **kwargs,
        )
    if "placement" in lowered or "cloud-cred-id" in lowered or "workspace-group-id" in lowered:
        return BrevPlacementRequiredError(
            "Brev needs explicit placement for this account (it has several cloud credentials or "
            "workspace groups). Set the Brev connection extras 'cloud_cred_id' and 'workspace_group_id' "
            "(or the operator arguments of the same names); find the ids with `brev orgs --json` "
            "and `brev ls --json`.",
            **kwargs,
        )
    if "duplicate workspace" in lowered or "already exists" in lowered:
        return BrevDuplicateNameError(
            "An instance with this name already exists (a DELETING instance keeps its name reserved "
            "until deletion completes): wait for it to disappear or choose another name.",
            **kwargs,
        )
    if any(
        text in lowered
        for text in ("name must", "name is required", "name required", "must be at least", "command is required")
    ):
        return BrevInvalidInputError(f"`brev {command}` rejected its input.", **kwargs)
    if "no gpu instances match" in lowered or "is not a recognized type" in lowered:
        return BrevNoMatchingTypeError(
            "No Brev instance type matches the request: check the GPU name/count or instance types with `brev search`.",
            **kwargs,
        )
    if "please retry" in lowered or "listing was unavailable" in lowered:
        return BrevTransientError(f"`brev {command}` hit a transient Brev error.", **kwargs)
    if "no capacity" not in lowered and "currently unavailable" not in lowered and _TRANSIENT_RE.search(text):
        # e.g. create's per-type "[Worker 1] <type> Failed: <url> 502 Bad Gateway" ending in "could only create
        # 0/1 instances": a server error, not a capacity verdict.
        return BrevTransientError(f"`brev {command}` hit a transient Brev error.", **kwargs)
    if "no capacity" in lowered or "currently unavailable" in lowered or "could only create 0/" in lowered:
        return BrevNoCapacityError(
            "Brev had no capacity for any candidate instance type; try later or allow more types.",
            **kwargs,
        )
    if (
        ("not found" in lowered and "instance with id/name" in lowered)
        or "could not look up instance" in lowered
        or "path not found" in lowered
    ):
        return BrevInstanceNotFoundError("The Brev instance does not exist.", **kwargs)
    if 'is in state "' in lowered:
        return BrevInstanceNotReadyError("The Brev instance is not running.", **kwargs)
    if (
        "could not connect to instance" in lowered
        or "connection refused" in lowered
        or "closed by remote host" in lowered
        or "exit status 255" in lowered
        or "could not resolve hostname" in lowered
    ):
        return BrevConnectionLostError(
            "Could not reach the Brev instance over SSH (it may still be booting).", **kwargs
        )
    return BrevCLIError(f"`brev {command}` failed with exit code {exit_code}.", **kwargs)
