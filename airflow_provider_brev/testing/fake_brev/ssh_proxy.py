"""The ``ProxyCommand`` of the simulator's host entries: what the machine's own ``ssh`` meets on the way to an instance.

Every host entry ``brev refresh`` writes (:mod:`.ssh`) names ``ProxyCommand "<root>/bin/brev-sim-proxy" <id>``, so any
``ssh`` (``/usr/bin/ssh`` as much as the simulator's own ``bin/ssh``, :mod:`.ssh_client`, which ignores the line)
reaches the simulator instead of a made-up ``10.x`` address that no network answers. An ``ssh`` through it fails at
once, the way ssh fails: with the connection error a real one would print while the instance's sshd is not up (or the
instance is gone), and once it is up with a line saying that plain ``ssh`` cannot run commands on a simulated
instance. Either way it exits 1, and ``ssh`` 255. No connect timeout is ever waited for, so a readiness probe through
plain ``ssh`` hands over to ``brev exec`` in milliseconds (the simulator's own ``bin/ssh`` first on ``PATH`` runs the
command instead). Every invocation is recorded in ``ssh_calls.jsonl`` with ``"via": "proxy"``.

The fault ``direct_ssh_unreachable`` (:meth:`~airflow_provider_brev.testing.simulator.BrevSimulator.set_fault`,
``instance=``) makes both answer ``Connection timed out`` for an instance that ``brev exec`` reaches: a worker whose
plain ``ssh`` cannot get through (a firewall, a proxy only the CLI knows).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from airflow_provider_brev.testing.fake_common import append_jsonl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from airflow_provider_brev.testing.fake_brev.context import Ctx

#: The launcher's name in ``<root>/bin``.
PROXY_NAME = "brev-sim-proxy"


def unreachable_line(ctx: Ctx, ident: str) -> str | None:
    """ssh's ``Connection timed out`` line when the fault ``direct_ssh_unreachable`` covers instance ``ident``
    (``instance=`` its id or name, or no ``instance=``: every instance)."""
    from airflow_provider_brev.testing.fake_brev.store import fake_ip, peek_fault

    state = ctx.store.read()
    inst = next((i for i in state["instances"] if i["id"] == ident), None)
    for name in {ident, inst["name"] if inst else ident}:
        if peek_fault(state, "direct_ssh_unreachable", instance=name) is not None:
            return f"ssh: connect to host {fake_ip(ident)} port 22: Connection timed out"
    return None


def main(argv: list[str] | None = None, root: str | None = None) -> int:
    from airflow_provider_brev.testing.fake_brev.context import Ctx
    from airflow_provider_brev.testing.fake_brev.ssh import ssh_check

    argv = list(sys.argv[1:] if argv is None else argv)
    root = os.path.abspath(root or os.environ.get("FAKE_BREV_STATE", ""))
    record: dict = {"ts": time.time(), "argv": argv, "via": "proxy", "exit_code": 1}
    ctx = None
    try:
        ident = argv[0] if argv else ""
        ctx = Ctx(root, record)
        record["alias"] = ident
        line = unreachable_line(ctx, ident)
        if line is None:
            inst, line = ssh_check(ctx, ident, {ident: ident})
            if inst is not None:
                record["reached"] = True
                line = (
                    f"brev simulator: plain ssh cannot run commands on the simulated instance {inst['name']!r}; "
                    f"brev exec can, and so can the simulator's own ssh ({os.path.join(root, 'bin', 'ssh')})"
                )
        with contextlib.suppress(OSError):
            sys.stderr.write(line + "\n")
    finally:
        with contextlib.suppress(OSError):
            append_jsonl(os.path.join(root, "ssh_calls.jsonl"), record)
        if ctx is not None:
            ctx.store.close()
    return 1
