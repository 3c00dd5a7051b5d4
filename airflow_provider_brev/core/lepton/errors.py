"""What an answer of the Lepton API means: the typed error of every failed call (pure).

The hook (:mod:`airflow_provider_brev.hooks.lepton`) hands :func:`api_error` the HTTP status of a failed call (or
``None`` when no answer came: connection refused, reset, timed out) and the answer's body; the error's type decides
the retry (:func:`~airflow_provider_brev.exceptions.retry_policy`). Messages name the call and the workspace, quote
at most :data:`MAX_QUOTED` characters of the body when the call may quote it, and never carry the token.
"""

from __future__ import annotations

import re

from airflow_provider_brev.exceptions import (
    BrevError,
    LeptonAuthError,
    LeptonJobExistsError,
    LeptonNotFoundError,
    LeptonRejectedError,
    LeptonResourcesUnavailableError,
    LeptonTransientError,
)

#: Characters of an answer's body quoted in a message.
MAX_QUOTED = 300
#: Phrases of a refusal for want of quota or resources (any status below 500).
_NO_RESOURCES = re.compile(
    r"quota|insufficient|not enough|exceed(?:s|ed)? (?:the )?(?:limit|capacity)|no (?:available|free) (?:node|gpu|"
    r"resource)|resources? (?:are |is )?unavailable",
    re.IGNORECASE,
)


def quote(body: str) -> str:
    """The start of an answer's body, on one line."""
    text = " ".join(body.split())
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 3] + "..."


def api_error(status: int | None, body: str, *, what: str, workspace: str, quotable: bool = True) -> BrevError:
    """The typed error of a failed call.

    :param status: the HTTP status, or ``None`` when no answer came.
    :param body: the answer's body (``""`` when none).
    :param what: the call, e.g. ``"create job af-...-t1"``.
    :param workspace: the workspace id (for messages).
    :param quotable: the body may be quoted (not for calls whose request carried a secret value).
    """
    if status is None:
        return LeptonTransientError(f"Could not reach the Lepton API of workspace {workspace!r} ({what}): {body}")
    text = body or ""
    said = f" Lepton said: {quote(text)}" if quotable and text else ""
    if status == 401:
        return LeptonAuthError(
            f"Lepton rejected the workspace token of {workspace!r} ({what}, 401): issue a new token and put it in the "
            "lepton connection's password."
        )
    if status == 409:
        return LeptonJobExistsError(f"Lepton says it exists already ({what}).{said}")
    if status == 429 or status >= 500:
        return LeptonTransientError(f"The Lepton API of workspace {workspace!r} failed ({what}, {status}).{said}")
    if _NO_RESOURCES.search(text):
        return LeptonResourcesUnavailableError(
            f"Lepton has no quota or resources for this ({what}, {status}): retry later, raise the priority or use "
            f"another node group or shape.{said}"
        )
    if status == 403:
        return LeptonAuthError(
            f"The workspace token of {workspace!r} may not do this ({what}, 403): check the token's workspace and "
            f"role.{said}"
        )
    if status == 404:
        return LeptonNotFoundError(f"Not found in Lepton workspace {workspace!r} ({what}).{said}")
    return LeptonRejectedError(f"Lepton refused the request ({what}, {status}).{said}")
