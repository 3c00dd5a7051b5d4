"""One ``brev`` call as a sans-I/O protocol: every decision here, the I/O in the drivers.

:func:`invocation` is a generator that *asks* for I/O (:class:`EnsureLogin`, :class:`RunCli`) and receives the
answers; it decides about timeouts, the one re-login round and the failure type. The sync driver
(:meth:`airflow_provider_brev.hooks.base.BrevBaseHook.run_cli`) and the async driver (``arun_cli``) only perform
the requested steps, so a worker and the triggerer cannot disagree (the pattern of the h11/wsproto protocol
libraries). :func:`drive` runs the protocol with plain callables (used by the sync driver and by tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass

from airflow_provider_brev.cli.protocol.classify import classify_failure, should_relogin
from airflow_provider_brev.cli.protocol.lines import ProcessResult
from airflow_provider_brev.exceptions import BrevTimeoutError

__all__ = ["EnsureLogin", "Invocation", "OutputView", "RunCli", "Step", "adrive", "drive", "exec_view", "invocation"]


@dataclass(frozen=True)
class EnsureLogin:
    """Step: make sure the CLI has a session (``force``: log in again unless someone did after ``failed_since``).

    :param force: log in even if this process logged in before.
    :param failed_since: wall-clock time the failed call started (a newer credentials file means another task
        already logged in again).
    """

    force: bool = False
    failed_since: float | None = None


@dataclass(frozen=True)
class RunCli:
    """Step: run ``brev`` once with the call's arguments; the answer is a :class:`ProcessResult`."""


Step = EnsureLogin | RunCli
#: Which part of a result (stdout, stderr) the re-login decision and the classifier may read.
OutputView = Callable[[ProcessResult], tuple[str, str]]


def exec_view(stdout_lines: int = 5, stderr_lines: int = 10) -> OutputView:
    """The view of a ``brev exec`` result: the output's tail, where the CLI's own words are, not the remote
    command's output (a remote command printing "unknown flag" must not become an input error).

    :param stdout_lines: how many last stdout lines to read.
    :param stderr_lines: how many last stderr lines to read (the CLI's error block is printed last).
    """
    return lambda r: ("\n".join(r.stdout_lines[-stdout_lines:]), "\n".join(r.stderr_lines[-stderr_lines:]))


#: The protocol's type: yields steps, receives ``None`` (after a login) or a :class:`ProcessResult`.
Invocation = Generator[Step, "ProcessResult | None", ProcessResult]


def invocation(
    command: str,
    *,
    timeout: float | None,
    authenticated: bool,
    can_login: bool,
    check: bool = True,
    view: OutputView | None = None,
) -> Invocation:
    """The protocol of one ``brev <command> ...`` call.

    :param command: the sub-command (for messages).
    :param timeout: the call's budget (for the timeout message).
    :param authenticated: the call needs a session (log in first; re-login once on the logged-out path).
    :param can_login: the connection holds a secret to log in with.
    :param check: raise the classified error on a non-zero exit (otherwise return the result as it is).
    :param view: which part of the output the re-login decision and the classifier may read (``exec``: not the
        remote command's own output, :func:`exec_view`); default: all of it.
    """
    if authenticated:
        yield EnsureLogin()
    first_round = True
    while True:
        result = yield RunCli()
        assert result is not None
        if result.timed_out:
            limit = f"{timeout:.0f} s" if timeout is not None else "its time budget"
            raise BrevTimeoutError(f"`brev {command}` did not finish within {limit}.", command=command)
        stdout, stderr = view(result) if view is not None else (result.stdout, result.stderr)
        if should_relogin(
            authenticated=authenticated,
            can_login=can_login,
            first_round=first_round,
            exit_code=result.exit_code,
            stdout=stdout,
            stderr=stderr,
        ):
            first_round = False
            yield EnsureLogin(force=True, failed_since=result.started_at)
            continue
        if check and result.exit_code != 0:
            raise classify_failure(command, result.exit_code, stdout, stderr)
        return result


def drive(
    protocol: Invocation,
    *,
    login: Callable[[EnsureLogin], None],
    run: Callable[[], ProcessResult],
) -> ProcessResult:
    """Run ``protocol`` synchronously: ``login`` performs :class:`EnsureLogin`, ``run`` performs :class:`RunCli`."""
    answer: ProcessResult | None = None
    try:
        while True:
            step = protocol.send(answer)
            if isinstance(step, EnsureLogin):
                login(step)
                answer = None
            else:
                answer = run()
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(
    protocol: Invocation,
    *,
    login: Callable[[EnsureLogin], Awaitable[None]],
    run: Callable[[], Awaitable[ProcessResult]],
) -> ProcessResult:
    """Run ``protocol`` asynchronously: the async twin of :func:`drive` (same protocol, awaited steps)."""
    answer: ProcessResult | None = None
    try:
        while True:
            step = protocol.send(answer)
            if isinstance(step, EnsureLogin):
                await login(step)
                answer = None
            else:
                answer = await run()
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
