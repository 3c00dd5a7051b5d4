"""What ``brev`` runs with, and the ``ssh-agent`` some CLI releases start anyway: pure rules, no I/O.

The released CLI (v0.6.320+) runs each ``ssh`` of ``brev exec`` (the fast path, and the slow path's second run) as
``bash -c 'if [ -z "$SSH_AUTH_SOCK" ]; then eval $(ssh-agent -s) >/dev/null; fi && ssh ...'``. ``ssh-agent -s``
daemonises (its own session, stdio on ``/dev/null``) and nothing ever stops it. Airflow workers and triggerers
normally have no ``SSH_AUTH_SOCK``, so every poll, probe, launch and copy would leave an agent running: hundreds a
week for one DAG, until the host runs out of processes.

:func:`brev_environment` therefore gives ``brev`` (and the hook's own ``ssh`` readiness probe) ``SSH_AUTH_SOCK=``
:data:`NO_SSH_AGENT` (``/dev/null``) when the worker has none, and keeps a worker's real agent socket as it is.
Why this value rather than an agent of the provider's own:

* nothing needs an agent: the host entries ``brev refresh`` writes name their ``IdentityFile``
  (``~/.brev/brev.pem``, ``IdentitiesOnly yes``), and ssh authenticates with that file whether an agent answers or
  not;
* OpenSSH takes a socket it cannot connect to as "no agent" and says so only at debug level
  (``get_agent_identities: ... Connection refused``, checked with OpenSSH 9.2 and brev's host entry): it offers no
  agent keys, ``AddKeysToAgent yes`` adds nothing, and ``ForwardAgent yes`` forwards nothing (a plain session drops
  the request; through brev's ``ControlMaster`` the instance gets a socket that no agent answers). The CLI's own
  agent, by contrast, is handed ``~/.brev/brev.pem`` by ``AddKeysToAgent`` and forwarded to the instance, where any
  process could use the account's key to log in to the account's other instances;
* ``/dev/null`` is not a socket (``connect`` fails with ECONNREFUSED) and only root can replace it, unlike a made-up
  path where another local user could put a listening socket;
* nothing is started, so nothing can be left: no agent per worker or triggerer process to end with it (also when
  it is SIGKILLed), no socket file to remove.

v0.6.317 - v0.6.319 ran ``eval $(ssh-agent -s) && ssh ...`` whatever ``SSH_AUTH_SOCK`` held, once per exec, and the
agent's ``echo Agent pid N;`` reached stdout before the remote command's output. For those releases
(:func:`announces_agent`) the hook reads that first announcement (:class:`AgentAnnouncement`), keeps it out of the
output and, once the call has ended, stops that agent if it is an ``ssh-agent`` of this user started during the
call (:func:`is_announced_agent`; the I/O is :mod:`airflow_provider_brev.hooks.process`).

``ssh`` itself may keep a connection master for up to 10 minutes after the last use (brev's host entries say
``ControlMaster auto``, ``ControlPersist 10m``): bounded, reused by the next call to the same instance, left as the
CLI configures it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "NO_SSH_AGENT",
    "AgentAnnouncement",
    "announces_agent",
    "brev_environment",
    "is_announced_agent",
    "login_environment",
]

#: ``SSH_AUTH_SOCK`` for ``brev`` on a worker without an agent: set (so the CLI starts none), never an agent.
NO_SSH_AGENT = "/dev/null"
#: The releases whose ``brev exec`` starts an agent whatever ``SSH_AUTH_SOCK`` holds and prints ``Agent pid N``.
AGENT_ANNOUNCING_RELEASES = ((0, 6, 317), (0, 6, 319))
#: Seconds of slack between a call's recorded start and the start time of an agent it started (clock ticks).
AGENT_START_SLACK = 1.0

_AGENT_PID = re.compile(r"Agent pid (\d+)")
#: Terminal control sequences (a spinner's line erase) around the announcement.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def brev_environment(environ: Mapping[str, str], *, brev_home: str | None) -> dict[str, str]:
    """The environment every process the hook starts (``brev``, ``ssh``) gets: this process's, without the token
    variable the CLI does not read, with the connection's HOME, no colours, and an ``SSH_AUTH_SOCK`` that stops the
    CLI from starting an agent (a worker's own agent is kept).

    :param environ: this process's environment.
    :param brev_home: the connection's ``brev_home`` extra (``None``: the worker's HOME).
    """
    env = dict(environ)
    env.pop("BREV_API_TOKEN", None)
    if brev_home:
        env["HOME"] = brev_home
    env.setdefault("NO_COLOR", "1")
    if not env.get("SSH_AUTH_SOCK"):
        env["SSH_AUTH_SOCK"] = NO_SSH_AGENT
    return env


#: What ``brev login`` runs with on top of :func:`brev_environment`: from v0.6.323 the CLI sends each command's
#: flags to its analytics service (on by default), and the flags of a login are the token or API key. The CLI's
#: own switch (``DO_NOT_TRACK``/``BREV_NO_ANALYTICS``) keeps the secret on the worker; other commands' flags hold
#: no secret and keep the user's own analytics choice.
LOGIN_ENVIRONMENT = {"BREV_NO_ANALYTICS": "1", "DO_NOT_TRACK": "1"}


def login_environment(environ: Mapping[str, str], *, home: str) -> dict[str, str]:
    """The environment of one ``brev login``: ``environ`` (already :func:`brev_environment`) in the scratch ``home``,
    with analytics off for this one call (:data:`LOGIN_ENVIRONMENT`).

    :param environ: what every ``brev`` call of the hook runs with.
    :param home: the scratch HOME the login runs in.
    """
    return {**environ, "HOME": home, **LOGIN_ENVIRONMENT}


def announces_agent(command: str, version: tuple[int, int, int] | None) -> bool:
    """Whether a ``brev <command>`` of this CLI version starts an agent and prints ``Agent pid N`` (v0.6.317 -
    v0.6.319's ``exec``).

    :param command: the sub-command.
    :param version: the installed CLI's version (``None``: unknown, taken as a newer one).
    """
    low, high = AGENT_ANNOUNCING_RELEASES
    return command == "exec" and version is not None and low <= version <= high


class AgentAnnouncement:
    """The ``Agent pid N`` line of one ``brev exec`` of v0.6.317 - v0.6.319: the first such stdout line, which comes
    before anything the remote command prints (the CLI prints it before it starts ``ssh``); later ones are output."""

    def __init__(self) -> None:
        #: The announced agent's PID (``None``: not seen yet).
        self.pid: int | None = None

    def keep(self, line: str) -> bool:
        """Whether ``line`` belongs in the call's output (``False`` for the announcement itself).

        :param line: one stdout line, in order.
        """
        if self.pid is not None:
            return True
        match = _AGENT_PID.fullmatch(_ANSI.sub("", line).strip())
        if match is None:
            return True
        self.pid = int(match.group(1))
        return False


def is_announced_agent(name: str, owner: int, started: float, *, user: int, call_started: float) -> bool:
    """Whether the process an announcement names is the agent the call started (and may be stopped): an
    ``ssh-agent`` of this user that started during the call, not a process that got its PID since or another
    agent of the worker's.

    :param name: the process's name (``/proc/<pid>/comm``).
    :param owner: its real user id.
    :param started: when it started (wall clock, seconds).
    :param user: this process's user id.
    :param call_started: when the ``brev`` call started (wall clock, seconds).
    """
    return name == "ssh-agent" and owner == user and started >= call_started - AGENT_START_SLACK
