"""Every typed error the Brev provider raises, grouped by kind, and the one rule that decides retries.

Every error carries the ``brev`` CLI's own message (``cli_message``) when one exists, and says what the user can
do about it. They all derive from :class:`BrevError` (an ``AirflowException``).

**The retry rule is the type, nothing else** (:func:`retry_policy`):

* :class:`BrevTransientError` and its subclasses: retried *inside the hook* (tenacity, exponential back-off),
  then, if they persist, by Airflow's task retries;
* every error that is also an ``AirflowFailException`` (bad input, bad configuration, a request no instance type
  can satisfy, a program fault, an untruthful success): fails the task at once, **no retry is spent**, because
  the same input cannot succeed;
* everything else (no capacity, instance failed, timeouts, lost jobs ...): not retried in the hook, but the task's
  own ``retries`` apply.

This module imports only Airflow's exception classes (cheap, present on every Airflow 3); it is the one Airflow
import the pure core (:mod:`airflow_provider_brev.core`) may reach.
"""

from __future__ import annotations

from typing import Literal

from airflow.exceptions import AirflowException

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # pragma: no cover - Airflow 3.0 layout
    from airflow.exceptions import AirflowFailException  # type: ignore[no-redef,attr-defined]

__all__ = [
    "BREV_DOCS_URL",
    "BrevAuthError",
    "BrevCLIError",
    "BrevCLINotFoundError",
    "BrevCommandError",
    "BrevConfigurationError",
    "BrevConnectionLostError",
    "BrevCostCapError",
    "BrevDuplicateNameError",
    "BrevError",
    "BrevImagePullError",
    "BrevInstanceFailedError",
    "BrevInstanceLostError",
    "BrevInstanceNotFoundError",
    "BrevInstanceNotOwnedError",
    "BrevInstanceNotReadyError",
    "BrevInstanceReplacedError",
    "BrevInvalidInputError",
    "BrevJobLostError",
    "BrevNoCapacityError",
    "BrevNoMatchingTypeError",
    "BrevPlacementRequiredError",
    "BrevPreflightError",
    "BrevPriceCapError",
    "BrevProcessStartError",
    "BrevS3LocationError",
    "BrevSweepFailedError",
    "BrevTaskKilledError",
    "BrevTimeoutError",
    "BrevTransferConflictError",
    "BrevTransferError",
    "BrevTransientError",
    "LeptonAuthError",
    "LeptonConfigurationError",
    "LeptonError",
    "LeptonJobExistsError",
    "LeptonJobFailedError",
    "LeptonJobLostError",
    "LeptonNotFoundError",
    "LeptonRejectedError",
    "LeptonResourcesUnavailableError",
    "LeptonTTLTooShortError",
    "LeptonTransientError",
    "RetryPolicy",
    "TaoProgramFaultError",
    "TaoUnreachableKpiError",
    "TaoVerificationError",
    "error_from_event",
    "retry_policy",
]

BREV_DOCS_URL = "https://docs.nvidia.com/brev/"

#: ``"hook"``: retried inside the hook, then by task retries; ``"task"``: only the task's retries apply;
#: ``"never"``: the task fails at once.
RetryPolicy = Literal["hook", "task", "never"]


class BrevError(AirflowException):
    """Base class of every error raised by this provider.

    :param message: what went wrong and what to do about it.
    :param cli_message: the ``brev`` CLI's own error text (stderr), if any.
    :param command: the ``brev`` sub-command that failed (``"create"``, ``"ls"`` ...), never its arguments.
    """

    def __init__(self, message: str, *, cli_message: str | None = None, command: str | None = None) -> None:
        self.message = message
        self.cli_message = (cli_message or "").strip() or None
        self.command = command
        text = message
        if self.cli_message and self.cli_message not in message:
            text = f"{message}\nbrev said: {self.cli_message}"
        super().__init__(text)


def retry_policy(exc: BaseException) -> RetryPolicy:
    """The retry decision for ``exc``, from its type alone (see the module docstring).

    :param exc: any exception.
    """
    if isinstance(exc, AirflowFailException):
        return "never"
    if isinstance(exc, BrevTransientError):
        return "hook"
    return "task"


# --- configuration and input: fix it, no retry is spent -------------------------------------------------------


class BrevCLINotFoundError(BrevError):
    """The ``brev`` executable could not be found or run."""


class BrevAuthError(BrevError):
    """Not logged in, or the token / API key was rejected."""


class BrevConfigurationError(BrevAuthError, AirflowFailException):
    """The Brev connection is missing or malformed; fix the configuration (no retry is spent)."""


class BrevInvalidInputError(BrevError, AirflowFailException, ValueError):
    """A parameter is invalid (instance name, GPU spec, flag); nothing was created (no retry is spent)."""


class BrevPlacementRequiredError(BrevInvalidInputError):
    """The account has several cloud credentials / workspace groups and needs explicit placement IDs."""


class BrevPreflightError(BrevInvalidInputError):
    """A pre-launch check failed: fix the configuration; nothing was created (no retry is spent)."""


class BrevS3LocationError(BrevInvalidInputError):
    """A declared S3 location cannot be used with the task's AWS connection (no such bucket, access denied, wrong
    region), found before anything was created; the message names ``s3://bucket/prefix`` and the connection (no
    retry is spent: the same configuration cannot succeed)."""


class BrevInstanceNotOwnedError(BrevInvalidInputError):
    """An instance of that name exists and this provider did not create it: it is used only with
    ``adopt_existing=True`` (and then never deleted by the provider); nothing was touched."""


class BrevInstanceReplacedError(BrevError, AirflowFailException):
    """The instance this DAG run created under a name is gone, and another instance now holds that name (someone
    created it after the name was freed): the provider never deletes, stops or uses it (no retry is spent)."""


class BrevNoMatchingTypeError(BrevError, AirflowFailException):
    """No instance type matches the requested GPU / filters at all (retrying does not help, so no retry)."""


class BrevPriceCapError(BrevNoMatchingTypeError):
    """No candidate instance type costs at most ``max_price_per_hour``: found before ``brev create``, nothing was
    created (no retry is spent: raise the cap or ask for a cheaper GPU)."""


class BrevCostCapError(BrevError, AirflowFailException):
    """A step's estimated cost (price per hour x its longest billed time: ``ready_timeout`` for an instance it
    creates, plus ``timeout``) exceeds ``max_run_cost``: found before any ``brev create`` and any launch, nothing
    was created or launched (no retry is spent)."""


# --- instances ---------------------------------------------------------------------------------------------------


class BrevInstanceNotFoundError(BrevError):
    """The named instance does not exist (or is not visible to this token)."""


class BrevNoCapacityError(BrevError):
    """Every candidate instance type had no capacity right now (the task's retries may find some later)."""


class BrevDuplicateNameError(BrevError):
    """An instance with this name already exists (possibly still DELETING: the name stays reserved)."""


class BrevInstanceFailedError(BrevError):
    """The instance reached FAILURE (or vanished) while we waited for it."""


class BrevInstanceLostError(BrevError):
    """A step's instance is gone (deleted, FAILURE, unreachable past its budget) and could not be recovered
    within ``max_instance_recoveries``; the task's retries may recover it."""


class BrevInstanceNotReadyError(BrevError):
    """The instance exists but cannot run commands (yet)."""


class BrevTimeoutError(BrevError):
    """A ``brev`` call or a wait exceeded its time budget."""


class BrevTaskKilledError(BrevError, AirflowFailException):
    """The task was killed (``on_kill``): what it was doing stopped, and nothing more is created or launched."""


class BrevSweepFailedError(BrevError):
    """At least one expired instance could not be deleted (the others were)."""


# --- transient: retried inside the hook ----------------------------------------------------------------------


class BrevTransientError(BrevError):
    """A transient failure (HTTP 5xx, connection trouble, "please retry"); retried automatically."""


class BrevConnectionLostError(BrevTransientError):
    """The SSH connection to the instance dropped or could not be established."""


class BrevProcessStartError(BrevTransientError):
    """A process (``brev``, ``ssh``) could not be started on this machine: out of file descriptors, processes or
    memory. An infrastructure fault of the worker or triggerer, never of the CLI's installation or the instance:
    retried with back-off, and a job follower keeps following through it
    (:mod:`airflow_provider_brev.core.protocol.spawn`)."""


class BrevJobLostError(BrevTransientError):
    """A detached remote job vanished or died without an exit code (reboot, OOM killer, instance replaced).

    Retrying on a healthy instance can help: the retry relaunches it with a new job id.
    """


# --- remote commands and their results ----------------------------------------------------------------------


class BrevCommandError(BrevError):
    """A remote command finished with a non-zero exit code.

    :param message: what went wrong.
    :param exit_code: the remote command's real exit code.
    """

    def __init__(self, message: str, *, exit_code: int, **kwargs: str | None) -> None:
        self.exit_code = exit_code
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


class BrevImagePullError(BrevError):
    """A container image could not be pulled onto the instance (its background pull failed, or did not finish within
    ``pull_timeout``); the message quotes the pull's last line. A retry pulls it again."""


class BrevCLIError(BrevError):
    """The ``brev`` CLI failed in a way this provider does not classify further."""


class TaoProgramFaultError(BrevCommandError, AirflowFailException):
    """TAO failed for a reason retrying cannot fix (out of memory, CUDA assert, bad spec, missing input)."""


class TaoVerificationError(BrevError, AirflowFailException):
    """TAO exited 0 but its outputs do not prove success (status.json not SUCCESS, no new checkpoint)."""


class TaoUnreachableKpiError(BrevError, AirflowFailException):
    """Gap analysis found no threshold meeting the recall target: a business result, not retried."""


# --- S3 transfers ----------------------------------------------------------------------------------------------


class BrevTransferError(BrevError):
    """A transfer between S3 and an instance did not complete; the message names the files."""


class BrevTransferConflictError(BrevTransferError, AirflowFailException):
    """The destination already holds different objects and ``overwrite`` is off (a retry cannot help)."""


# --- DGX Cloud Lepton (a job-based compute; hooks/lepton.py maps the API's answers, core/lepton/errors.py) --------


class LeptonError(BrevError):
    """Base of the errors of DGX Cloud Lepton steps (the retry rule is still :func:`retry_policy`, by type)."""


class LeptonAuthError(LeptonError, BrevAuthError):
    """The workspace token was rejected (401) or has no access to the workspace or the resource (403): issue a new
    token (dashboard, Settings > Tokens) and put it in the ``lepton`` connection's password. Never carries the
    token."""


class LeptonConfigurationError(LeptonAuthError, AirflowFailException):
    """The ``lepton`` connection is missing or incomplete (workspace id, token), or the ``leptonai`` SDK is not
    installed (``pip install 'airflow-provider-brev[lepton]'``): no retry is spent."""


class LeptonRejectedError(LeptonError, AirflowFailException, ValueError):
    """The API refused the request as invalid (400/422: a shape, node group or image the workspace does not know):
    the same request cannot succeed, no retry is spent."""


class LeptonResourcesUnavailableError(LeptonError, BrevNoCapacityError):
    """The workspace has no quota or free resources for the job right now: its creation was refused, or it waited
    in its node group's queue longer than ``queue_timeout`` (then it was stopped). The task's retries may find
    resources later; a higher ``priority`` or another node group may too."""


class LeptonTTLTooShortError(LeptonError, BrevInvalidInputError):
    """``ttl_seconds_after_finished`` is shorter than the time the step needs to read an ended job's status and the
    end of its log (:func:`~airflow_provider_brev.core.lepton.follower.ttl_floor`): Lepton would remove the job
    before the step saw how it ended. Refused before anything is submitted; no retry is spent."""


class LeptonNotFoundError(LeptonError):
    """The workspace or the job does not exist (or is not visible to this token)."""


class LeptonJobExistsError(LeptonError, BrevDuplicateNameError):
    """A job of that name exists already (409): the provider's names are per try, so it is this try's own job,
    submitted before a worker was lost -- the step attaches to it."""


class LeptonTransientError(LeptonError, BrevTransientError):
    """A transient API failure (5xx, 429, connection trouble); retried inside the hook, then by task retries."""


class LeptonJobLostError(LeptonError, BrevJobLostError):
    """The job was stopped or removed by someone else, or vanished before the step read its result; a retry
    submits it again."""


class LeptonJobFailedError(LeptonError):
    """The job failed before its command could report an exit code (image pull, container start, OOM kill, every
    ``max_failure_retry`` restart used up); the message quotes the end of its log."""


def error_from_event(message: str, error_type: str | None) -> BrevError:
    """Rebuild the typed error a trigger reported (its ``error_type`` is a class name of this module).

    The type crosses the deferral by name, so the retry rule (:func:`retry_policy`) decides on the worker exactly
    as it would have in the triggerer; unknown names become a plain :class:`BrevError`.

    :param message: the error's message.
    :param error_type: the class name the trigger sent.
    """
    cls = globals().get(error_type or "") if error_type in __all__ else None
    if isinstance(cls, type) and issubclass(cls, BrevError):
        try:
            return cls(message)
        except TypeError:  # a class with extra required arguments (e.g. BrevCommandError)
            pass
    return BrevError(message)
