"""Running mutants: one forked child per mutant, at most ``parallel`` at once, each with a timeout.

The parent (:mod:`mutation.session`, inside one pytest session that collected every test once) forks a child per
mutant; the child puts the mutant in place (:mod:`mutation.patch`) and runs the selected tests; its exit status is
the verdict (:func:`verdict`). A child that runs past its timeout is killed with its whole process group.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import CodeType

KILLED = "killed"
SURVIVED = "survived"
TIMEOUT = "timeout"
NO_TESTS = "no-tests"
ERROR = "error"
#: Exit status of a child whose harness itself failed (not a test verdict).
HARNESS_FAILED = 70


@dataclass
class Job:
    """One mutant to run: its module's name, how to compile the mutated module (in the child; ``None``: no
    mutant), the tests and the time allowed."""

    key: str
    module: str
    code: Callable[[], CodeType] | None
    tests: list[str]
    timeout: float


@dataclass
class Outcome:
    status: str
    seconds: float
    exit_code: int | None


def _child(job: Job, body: Callable[[Job], int]) -> None:
    """The forked child: never returns."""
    status = HARNESS_FAILED
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        atexit._clear()  # the parent's exit handlers are the parent's
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2) if not os.environ.get("MUTATION_DEBUG") else (0,):  # debugging: keep the output
            os.dup2(devnull, fd)
        status = body(job)
    except BaseException:
        status = HARNESS_FAILED
    finally:
        os._exit(status)


def verdict(wait_status: int) -> tuple[str, int | None]:
    if os.WIFSIGNALED(wait_status):
        return KILLED, None  # the mutant crashed the interpreter: the tests noticed
    code = os.WEXITSTATUS(wait_status)
    if code == 0:
        return SURVIVED, code
    if code in (1, 2):  # tests failed, or collection failed (the mutated module did not import)
        return KILLED, code
    return ERROR, code


def run_jobs(
    jobs: Sequence[Job],
    body: Callable[[Job], int],
    *,
    parallel: int,
    on_done: Callable[[Job, Outcome], None] | None = None,
    prepare: Callable[[Job], None] | None = None,
) -> dict[str, Outcome]:
    """Run every job in a forked child that calls ``body(job)`` (its exit status), at most ``parallel`` at once;
    the outcome of each by key. ``prepare(job)`` runs in the parent just before the job's fork."""
    pending = list(jobs)
    pending.reverse()
    gc.collect()
    gc.freeze()  # the children's collections then skip the parent's (large, Airflow-sized) heap
    running: dict[int, tuple[Job, float]] = {}
    outcomes: dict[str, Outcome] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        while pending or running:
            while pending and len(running) < parallel:
                job = pending.pop()
                if not job.tests:
                    outcomes[job.key] = Outcome(NO_TESTS, 0.0, None)
                    if on_done:
                        on_done(job, outcomes[job.key])
                    continue
                if prepare:
                    prepare(job)
                pid = os.fork()
                if pid == 0:
                    _child(job, body)
                running[pid] = (job, time.monotonic())
            if not running:
                continue
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for child, (job, started) in list(running.items()):
                    if now - started > job.timeout:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(child, signal.SIGKILL)
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(child, signal.SIGKILL)
                        os.waitpid(child, 0)
                        _finish(running.pop(child), Outcome(TIMEOUT, now - started, None), outcomes, on_done)
                time.sleep(0.01)
                continue
            if pid in running:
                job, started = running[pid]
                status, code = verdict(wait_status)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)  # anything the tests left running
                _finish(running.pop(pid), Outcome(status, time.monotonic() - started, code), outcomes, on_done)
    finally:
        for child in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)
    return outcomes


def _finish(
    entry: tuple[Job, float],
    outcome: Outcome,
    outcomes: dict[str, Outcome],
    on_done: Callable[[Job, Outcome], None] | None,
) -> None:
    job, _ = entry
    outcomes[job.key] = outcome
    if on_done:
        on_done(job, outcome)
