"""Unit tests of ``airflow_provider_brev/core/protocol/invocation.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.protocol.invocation import EnsureLogin, Invocation, RunCli, exec_view
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.exceptions import BrevTimeoutError
from airflow_provider_brev.hooks.driver import drive


def test_the_exec_view_reads_the_tails():
    result = ProcessResult(1, [str(i) for i in range(8)], [str(i) for i in range(12)])
    assert exec_view()(result) == ("3\n4\n5\n6\n7", "\n".join(str(i) for i in range(2, 12)))
    assert exec_view(1, 1)(result) == ("7", "11")


def test_a_timed_out_call_names_its_budget():
    for timeout, words in ((12.4, "within 12 s"), (None, "within its time budget")):
        machine = Invocation("ls", timeout=timeout, authenticated=False, can_login=False)
        with pytest.raises(BrevTimeoutError, match=words):
            drive(machine, lambda call: ProcessResult(1, timed_out=True))


def test_an_unchecked_failure_is_returned_as_it_is():
    machine = Invocation("ls", timeout=1, authenticated=True, can_login=False, check=False)
    calls: list[object] = []
    result = drive(machine, lambda call: calls.append(call) or ProcessResult(3, ["x"], ["boom"]))
    assert result.exit_code == 3
    assert calls == [EnsureLogin(), RunCli()]
    assert RunCli() == RunCli()
