"""What a failed process start means: the CLI is not installed, or the machine ran out of resources.

Both runners (:func:`~airflow_provider_brev.hooks.process.run_process` on a worker,
:func:`~airflow_provider_brev.hooks.process.arun_process` on the triggerer) ask :func:`start_failure` about the
``errno`` of the ``OSError`` their process start raised, and :func:`start_error` builds the typed error from the
answer:

* :data:`MISSING` -- ``ENOENT``, ``EACCES``, ``ENOTDIR``, ``ENOEXEC``: the executable is gone, not executable or
  not a program. Only this is "the brev CLI must be installed" (:class:`~airflow_provider_brev.exceptions.BrevCLINotFoundError`).
* :data:`EXHAUSTED` -- ``EMFILE``, ``ENFILE`` (no file descriptor left for the pipes), ``EAGAIN`` (the process limit),
  ``ENOMEM``, ``ETXTBSY`` (the binary is being replaced): an infrastructure fault of the machine that starts the
  process, not of the CLI or the instance; retried with back-off
  (:class:`~airflow_provider_brev.exceptions.BrevProcessStartError`, transient), and a job follower keeps following
  (it never spends its failure budget on it: the job's fate is unknown, not bad).
* :data:`UNEXPECTED` -- anything else: reported as it is (:class:`~airflow_provider_brev.exceptions.BrevCLIError`).
"""

from __future__ import annotations

import errno
from typing import Final, Literal, cast

from airflow_provider_brev.exceptions import BrevCLIError, BrevCLINotFoundError, BrevError, BrevProcessStartError

__all__ = ["EXHAUSTED", "MISSING", "UNEXPECTED", "StartFailure", "start_error", "start_failure"]

MISSING: Final = "missing"
EXHAUSTED: Final = "exhausted"
UNEXPECTED: Final = "unexpected"
StartFailure = Literal["missing", "exhausted", "unexpected"]

_MISSING = frozenset({errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.ENOEXEC})
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM, errno.ETXTBSY})


def start_failure(error_number: int | None) -> StartFailure:
    """What a process start that failed with ``error_number`` (``OSError.errno``; ``None``: unknown) means."""
    if error_number in _MISSING:
        return MISSING
    if error_number in _EXHAUSTED:
        return EXHAUSTED
    return UNEXPECTED


def start_error(program: str, error_number: int | None, reason: str) -> BrevError:
    """The typed error of a process start of ``program`` that failed with ``error_number`` (see the module docstring).

    :param program: the executable's path (never an argument: arguments may carry secrets).
    :param error_number: ``OSError.errno``.
    :param reason: the system's text for it (``OSError.strerror``).
    """
    verdict = start_failure(error_number)
    if verdict == MISSING:
        return BrevCLINotFoundError(
            f"Could not start {program!r}: {reason}. The brev CLI must be installed and executable on every Airflow "
            "worker and triggerer (or set the connection extra 'cli_path')."
        )
    if verdict == EXHAUSTED:
        name = errno.errorcode[cast("int", error_number)]  # one of the numbers of _EXHAUSTED
        return BrevProcessStartError(
            f"Could not start a process ({program!r}): {reason} [{name}]. This machine is out of file descriptors, "
            "processes or memory (too many processes at once: lower [brev] max_concurrent_processes, or raise the "
            "open-file limit); retrying. Remote jobs keep running."
        )
    return BrevCLIError(f"Could not start {program!r}: {reason}.")
