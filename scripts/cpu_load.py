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
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on_signal)  # so that the loops are stopped when this script is killed too
    with cpu_load() as running:
        print(f"cpu_load: {running} busy-loops on {os.cpu_count()} cores while running {' '.join(argv)}", flush=True)
        command = subprocess.Popen(argv)
        try:
            return command.wait()
        finally:
            if command.poll() is None:
                command.terminate()
                command.wait()


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
