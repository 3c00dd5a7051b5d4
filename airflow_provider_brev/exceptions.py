"""Typed errors raised by the Brev provider.

Every error carries the ``brev`` CLI's own message (``cli_message``) when one exists, and says what the
user can do about it. They all derive from :class:`BrevError`, which derives from Airflow's
``AirflowException`` so Airflow's retry machinery treats them like any other task failure.

This module imports only ``airflow.exceptions.AirflowException`` (cheap, present on every Airflow 3).
"""

from __future__ import annotations

from airflow.exceptions import AirflowException

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # pragma: no cover - Airflow 3.0 layout
    from airflow.exceptions import AirflowFailException  # type: ignore[no-redef,attr-defined]

BREV_DOCS_URL = "https://docs.nvidia.com/brev/"


class BrevError(AirflowException):
    """Base class of every error raised by this provider.

    :param message: what went wrong and what to do about it.
    :param cli_message: the ``brev`` CLI's own error text (stderr), if any.
    :param command: the ``brev`` sub-command that failed (``"create"``, ``"ls"`` ...), never its arguments.
    """

    #: Whether retrying the same call later can help (transient infrastructure trouble).
    retryable: bool = False

    def __init__(self, message: str, *, cli_message: str | None = None, command: str | None = None) -> None:
        self.message = message
        self.cli_message = (cli_message or "").strip() or None
        self.command = command
        text = message
        if self.cli_message and self.cli_message not in message:
            text = f"{message}\nbrev said: {self.cli_message}"
        super().__init__(text)


class BrevCLINotFoundError(BrevError):
    """The ``brev`` executable could not be found or run."""


class BrevAuthError(BrevError):
    """Not logged in, or the token / API key was rejected."""


class BrevConfigurationError(BrevAuthError, AirflowFailException):
    """The Brev connection is missing or malformed; fix the configuration (no retry is spent)."""


class BrevInvalidInputError(BrevError, AirflowFailException, ValueError):
    """A parameter is invalid (instance name, GPU spec, flag); nothing was created.

    It is an ``AirflowFailException``: retrying the task with the same input cannot help, so no retry is spent.
    """


class BrevPlacementRequiredError(BrevInvalidInputError):
    """The account has several cloud credentials / workspace groups and needs explicit placement IDs."""


class BrevInstanceNotFoundError(BrevError):
    """The named instance does not exist (or is not visible to this token)."""


class BrevNoCapacityError(BrevError):
    """No instance type matched the request, or every candidate type had no capacity."""

    retryable = True


class BrevNoMatchingTypeError(BrevNoCapacityError, AirflowFailException):
    """No instance type matches the requested GPU / filters at all (retrying does not help, so no retry)."""

    retryable = False


class BrevDuplicateNameError(BrevError):
    """An instance with this name already exists (possibly still DELETING: the name stays reserved)."""


class BrevInstanceFailedError(BrevError):
    """The instance reached FAILURE (or vanished) while we waited for it."""


class BrevInstanceNotReadyError(BrevError):
    """The instance exists but cannot run commands (yet)."""


class BrevTimeoutError(BrevError):
    """A ``brev`` call or a wait exceeded its time budget."""


class BrevTransientError(BrevError):
    """A transient failure (HTTP 5xx, connection trouble, "please retry"); retried automatically."""

    retryable = True


class BrevConnectionLostError(BrevTransientError):
    """The SSH connection to the instance dropped or could not be established."""


class BrevJobLostError(BrevTransientError):
    """A detached remote job vanished or died without an exit code (reboot, OOM killer, instance replaced).

    Retrying on a healthy instance can help: the retry relaunches it with a new job id.
    """


class BrevCommandError(BrevError):
    """A remote command finished with a non-zero exit code.

    :param exit_code: the remote command's real exit code.
    """

    def __init__(self, message: str, *, exit_code: int, **kwargs: str | None) -> None:
        self.exit_code = exit_code
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


class BrevCLIError(BrevError):
    """The ``brev`` CLI failed in a way this provider does not classify further."""
