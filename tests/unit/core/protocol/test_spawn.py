"""What a failed process start means (core/protocol/spawn.py): only a missing or unusable executable is "not
installed"; descriptors, processes or memory running out is a transient fault of this machine."""

from __future__ import annotations

import errno
from typing import get_args

import pytest

from airflow_provider_brev.core.instances.recovery import may_be_lost
from airflow_provider_brev.core.protocol.spawn import (
    EXHAUSTED,
    MISSING,
    UNEXPECTED,
    StartFailure,
    start_error,
    start_failure,
)
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevCLINotFoundError,
    BrevProcessStartError,
    retry_policy,
)


@pytest.mark.parametrize("number", [errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.ENOEXEC])
def test_a_missing_or_unusable_executable_is_not_installed(number):
    assert start_failure(number) == MISSING
    error = start_error("/opt/brev", number, "No such file or directory")
    assert isinstance(error, BrevCLINotFoundError)
    assert "must be installed" in str(error)
    assert retry_policy(error) == "task"


@pytest.mark.parametrize("number", [errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM, errno.ETXTBSY])
def test_exhausted_resources_are_a_transient_fault_of_this_machine(number):
    assert start_failure(number) == EXHAUSTED
    error = start_error("/opt/brev", number, "Too many open files")
    assert isinstance(error, BrevProcessStartError)
    assert retry_policy(error) == "hook"
    assert "installed" not in str(error)
    assert errno.errorcode[number] in str(error)
    assert not may_be_lost(error)  # the instance is not suspected: nothing went to it


@pytest.mark.parametrize("number", [None, errno.E2BIG, errno.EPERM])
def test_anything_else_is_reported_as_it_is(number):
    assert start_failure(number) == UNEXPECTED
    error = start_error("/opt/brev", number, "Argument list too long")
    assert type(error) is BrevCLIError
    assert "installed" not in str(error)


def test_the_verdicts_are_the_words_their_type_names():
    """Callers type a verdict as :data:`StartFailure`: each constant is one of its words, and no word is missing."""
    assert sorted([MISSING, EXHAUSTED, UNEXPECTED]) == sorted(get_args(StartFailure))
