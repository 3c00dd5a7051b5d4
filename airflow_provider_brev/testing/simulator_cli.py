"""Command line of the simulator: ``python -m airflow_provider_brev.testing.simulator install|token|instances``.

``install`` prints ``export`` lines (``brev`` on PATH, and HOME set to the simulator's own home so that the real
``~/.brev`` is never touched); ``token`` prints a JWT the simulator accepts; ``instances`` prints them as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from airflow_provider_brev.testing.simulator import PROFILES, BrevSimulator

if TYPE_CHECKING:
    from collections.abc import Iterable


def main(argv: Iterable[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m airflow_provider_brev.testing.simulator")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_install = sub.add_parser("install", help="install a simulator root and print `export` lines")
    p_install.add_argument("--root", required=True)
    p_install.add_argument("--profile", choices=PROFILES, default="released")
    for key in ("deploy", "build", "ssh", "delete", "poll"):
        p_install.add_argument(f"--{key}-seconds", type=float, default=None)
    p_token = sub.add_parser("token", help="print a JWT the simulator accepts")
    p_token.add_argument("--root", required=True)
    p_token.add_argument("--exp", type=float, default=3600)
    p_token.add_argument(
        "--issuer", default=None, help="the token's iss (unknown: every brev call prints `no oauth found for token`)"
    )
    p_ls = sub.add_parser("instances", help="print the current instances as JSON")
    p_ls.add_argument("--root", required=True)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.cmd == "install":
        timings = {
            f"{k}_seconds": getattr(args, f"{k}_seconds")
            for k in ("deploy", "build", "ssh", "delete", "poll")
            if getattr(args, f"{k}_seconds") is not None
        }
        sim = BrevSimulator(args.root, profile=args.profile, **timings).install()
        sys.stdout.write(sim.shell_exports())
        return 0
    sim = BrevSimulator(args.root)
    if args.cmd == "token":
        sys.stdout.write(sim.make_token(args.exp, issuer=args.issuer) + "\n")
        return 0
    sys.stdout.write(json.dumps(sim.instances(), indent=2) + "\n")
    return 0
