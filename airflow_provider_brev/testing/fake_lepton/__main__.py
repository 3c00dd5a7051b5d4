"""``python -m airflow_provider_brev.testing.fake_lepton --root DIR [--port N] [--token T] [--workspace ID]
[--pull-secret NAME]...``: serve a fake Lepton workspace until killed (SIGTERM); prints its connection JSON (for
``AIRFLOW_CONN_LEPTON_DEFAULT``) on one line."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from airflow_provider_brev.testing.fake_lepton import TOKEN_ENV, FakeLepton


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_lepton")
    parser.add_argument("--root", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None, help=f"the API token (better: ${TOKEN_ENV}, not on a command line)")
    parser.add_argument("--workspace", default="ws-fake")
    parser.add_argument("--pull-secret", action="append", default=[], help="an nvcr.io registry secret's name")
    args = parser.parse_args(argv)
    fake = FakeLepton(
        Path(args.root), workspace_id=args.workspace, token=args.token or os.environ.get(TOKEN_ENV), port=args.port
    ).start()
    for name in args.pull_secret:
        fake.add_image_pull_secret(name)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(fake.connection_json(), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        done.wait()
    fake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
