"""One ``brev`` call as a sans-I/O state machine: every decision here, the I/O in the drivers.

:class:`Invocation` (a :class:`~airflow_provider_brev.core.protocol.machine.StepMachine`) *asks* for I/O
(:class:`EnsureLogin`, :class:`RunCli`) and receives the answers; it decides about timeouts, the one re-login round
and the failure type. :meth:`airflow_provider_brev.hooks.base.BrevBaseHook.run_cli` and ``arun_cli`` run it with the
generic sync and async drivers (:mod:`airflow_provider_brev.hooks.driver`) and only perform the requested calls, so
a worker and the triggerer cannot disagree (the pattern of the h11/wsproto protocol libraries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_brev.core.protocol.classify import classify_failure, should_relogin
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Call, Done, Fail, Failed, Sleep, StepMachine
from airflow_provider_brev.exceptions import BrevTimeoutError

__all__ = ["EnsureLogin", "Invocation", "OutputView", "RunCli", "exec_view"]


@dataclass(frozen=True)
class EnsureLogin(Call):
    """Call: make sure the CLI has a session (``force``: log in again unless someone did after ``failed_since``);
    the answer is ``None``.

    :param force: log in even if this process logged in before.
    :param failed_since: wall-clock time the failed call started (a newer credentials file means another task
        already logged in again).
    """

    force: bool = False
    failed_since: float | None = None


@dataclass(frozen=True)
class RunCli(Call):
    """Call: run ``brev`` once with the call's arguments; the answer is a :class:`ProcessResult`."""


#: Which part of a result (stdout, stderr) the re-login decision and the classifier may read.
OutputView = Callable[[ProcessResult], tuple[str, str]]


def exec_view(stdout_lines: int = 5, stderr_lines: int = 10) -> OutputView:
    """The view of a ``brev exec`` result: the output's tail, where the CLI's own words are, not the remote
    command's output (a remote command printing "unknown flag" must not become an input error).

    :param stdout_lines: how many last stdout lines to read.
    :param stderr_lines: how many last stderr lines to read (the CLI's error block is printed last).
    """
    return lambda r: ("\n".join(r.stdout_lines[-stdout_lines:]), "\n".join(r.stderr_lines[-stderr_lines:]))


class Invocation(StepMachine[ProcessResult]):
    """The machine of one ``brev <command> ...`` call: log in first if needed, run, re-login once on the
    logged-out path, then the result or the classified error.

    :param command: the sub-command (for messages).
    :param timeout: the call's budget (for the timeout message).
    :param authenticated: the call needs a session (log in first; re-login once on the logged-out path).
    :param can_login: the connection holds a secret to log in with.
    :param check: fail with the classified error on a non-zero exit (otherwise the result as it is).
    :param view: which part of the output the re-login decision and the classifier may read (``exec``: not the
        remote command's own output, :func:`exec_view`); default: all of it.
    """

    def __init__(
        self,
        command: str,
        *,
        timeout: float | None,
        authenticated: bool,
        can_login: bool,
        check: bool = True,
        view: OutputView | None = None,
    ) -> None:
        super().__init__()
        self.command = command
        self.timeout = timeout
        self.authenticated = authenticated
        self.can_login = can_login
        self.check = check
        self.view = view
        self.first_round = True
        self._next: EnsureLogin | RunCli = EnsureLogin() if authenticated else RunCli()

    def _decide(self, now: float) -> Call | Sleep | Done[ProcessResult] | Fail:
        return self._next

    def _receive(self, call: Call, outcome: object, now: float) -> None:
        if isinstance(outcome, Failed):  # the login failed, or the process could not be started
            self._finish(Fail(outcome.error))
            return
        if isinstance(call, EnsureLogin):
            self._next = RunCli()
            return
        assert isinstance(outcome, ProcessResult)
        self._finish_run(outcome)

    def _finish_run(self, result: ProcessResult) -> None:
        command = self.command
        if result.timed_out:
            limit = f"{self.timeout:.0f} s" if self.timeout is not None else "its time budget"
            self._finish(Fail(BrevTimeoutError(f"`brev {command}` did not finish within {limit}.", command=command)))
            return
        stdout, stderr = self.view(result) if self.view is not None else (result.stdout, result.stderr)
        if should_relogin(
            authenticated=self.authenticated,
            can_login=self.can_login,
            first_round=self.first_round,
            exit_code=result.exit_code,
            stdout=stdout,
            stderr=stderr,
        ):
            self.first_round = False
            self._next = EnsureLogin(force=True, failed_since=result.started_at)
            return
        if self.check and result.exit_code != 0:
            self._finish(Fail(classify_failure(command, result.exit_code, stdout, stderr)))
            return
        self._finish(Done(result))
