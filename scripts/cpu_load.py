"""Load the machine the way a user's busy machine is: CPU busy-loops, twice as many as there are cores.

A test that passes alone and fails under load is a bug in the test or, more often, in the product (a relaunch
under load is money paid twice), so ``make airflow-smoke`` runs the flagship under this load, and a suite can be
run under it by hand::

    .venv/bin/python scripts/cpu_load.py -- make test

Each loop is a ``sh`` process in a process group of its own; all are stopped when the context (or the command)
ends, also on Ctrl-C or when this script is killed with SIGTERM or SIGHUP.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Busy-loops per core.
LOOPS_PER_CORE = 2


@contextlib.contextmanager
def cpu_load(loops: int | None = None) -> Iterator[int]:
    """Run ``loops`` busy-loops (default: :data:`LOOPS_PER_CORE` per core) while the context is open; yields the
    number running."""
    count = loops if loops is not None else LOOPS_PER_CORE * (os.cpu_count() or 1)
    procs = [
        subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True, stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        yield len(procs)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: cpu_load.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    stopper = _Stopper()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stopper)  # so that the loops are stopped when this script is killed too
    with cpu_load() as running:
        print(f"cpu_load: {running} busy-loops on {os.cpu_count()} cores while running {' '.join(argv)}", flush=True)
        command = None
        try:
            command = subprocess.Popen(argv)
            with stopper.raising():
                return command.wait()
        finally:
            if command is not None and command.poll() is None:
                command.terminate()
                command.wait()


class _Stopper:
    """A SIGTERM/SIGHUP handler that ends the script (``SystemExit``), but only where everything started so far is
    known to it: a signal that arrives while a process is being started is remembered and acted on once that process
    can be stopped."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.armed = False

    def __call__(self, signum: int, _frame: object) -> None:
        self.pending = signum
        if self.armed:
            raise SystemExit(128 + signum)

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        self.armed = True
        try:
            if self.pending is not None:
                raise SystemExit(128 + self.pending)
            yield
        finally:
            self.armed = False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
