"""The ``ssh-agent`` the released CLI starts around each ``ssh`` of ``brev exec``.

v0.6.320+ runs the fast path and the slow path's second run as ``bash -c 'if [ -z "$SSH_AUTH_SOCK" ]; then eval
$(ssh-agent -s) >/dev/null; fi && ssh ...'``: with ``SSH_AUTH_SOCK`` unset or empty, each leaves an agent running
(daemonised: its own session, stdio on ``/dev/null``, never stopped by anyone). v0.6.317 - v0.6.319 ran ``eval
$(ssh-agent -s) && ssh ...`` whatever ``SSH_AUTH_SOCK`` held, and the agent's ``echo Agent pid N;`` reached stdout
(:func:`announces_agent`).

The fake agent is ``sleep`` (or Python, see :func:`_agent_argv`) started under the name ``ssh-agent``
(``/proc/<pid>/comm`` says ``ssh-agent``), in its own session, with brev's environment plus :data:`AGENT_MARKER`
``=<root>``; it ends after :data:`AGENT_SECONDS` at the latest (a real one lives until the host reboots). Each start is a line of :data:`AGENTS_FILE`; the controller counts
and stops them (:meth:`~airflow_provider_brev.testing.simulator.BrevSimulator.agent_pids`, ``stop_agents``).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time

from airflow_provider_brev.testing.fake_common import append_jsonl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from airflow_provider_brev.testing.fake_brev.context import Ctx

#: Environment variable (value: the simulator root) that marks the agents of one simulator.
AGENT_MARKER = "BREV_SIM_SSH_AGENT"
#: One JSON line per agent started: ``pid``, ``brev_pid``, ``alias``, ``announced``, ``ts``.
AGENTS_FILE = "agents.jsonl"
#: How long a fake agent lives when nobody stops it.
AGENT_SECONDS = 3600
#: The releases whose exec starts an agent whatever ``SSH_AUTH_SOCK`` holds and prints ``Agent pid N``.
_ANNOUNCING = ((0, 6, 317), (0, 6, 319))


def announces_agent(ctx: Ctx) -> bool:
    """Whether this CLI is one of v0.6.317 - v0.6.319 (config ``version``): an agent on every ``ssh``, announced."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", ctx.version)
    version = tuple(int(part) for part in match.groups()) if match else None
    return not ctx.documented and version is not None and _ANNOUNCING[0] <= version <= _ANNOUNCING[1]


def _agent_argv(root: str) -> tuple[str, list[str]]:
    """The executable ``<root>/agent/ssh-agent`` (a link to ``sleep``, made once; concurrent CLIs may race to make
    it) and its argv. Where ``sleep`` is busybox (which picks its applet by name), the link is to Python."""
    path = os.path.join(root, "agent", "ssh-agent")
    sleep = os.path.realpath(shutil.which("sleep") or "/bin/sleep")
    python = os.path.basename(sleep) == "busybox"
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        os.symlink(sys.executable if python else sleep, tmp)
        os.replace(tmp, path)
    args = ["-ISc", f"import time; time.sleep({AGENT_SECONDS})"] if python else [str(AGENT_SECONDS)]
    return path, ["ssh-agent", *args]


def agent_snippet(ctx: Ctx, alias: str) -> None:
    """The CLI's agent snippet before one ``ssh``: start a detached agent when the CLI would (and announce it on
    stdout where the release did)."""
    import subprocess

    announced = announces_agent(ctx)
    if not announced and os.environ.get("SSH_AUTH_SOCK"):
        return
    executable, argv = _agent_argv(ctx.root)
    proc = subprocess.Popen(
        argv,
        executable=executable,
        env={**os.environ, AGENT_MARKER: ctx.root},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    record = {"pid": proc.pid, "brev_pid": os.getpid(), "alias": alias, "announced": announced, "ts": time.time()}
    append_jsonl(os.path.join(ctx.root, AGENTS_FILE), record)
    ctx.record.setdefault("ssh_agents", []).append(proc.pid)
    if announced:
        ctx.out(f"Agent pid {proc.pid}\n")
