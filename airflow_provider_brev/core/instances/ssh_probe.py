"""The direct ``ssh`` readiness probe: pure rules for probing an instance through the host entry ``brev`` wrote.

``brev exec`` on an instance whose sshd is still coming up waits in the CLI's ``WaitForSSHToBeAvailable``, which
retries ``ssh`` once a second: a probe through ``brev exec`` notices readiness up to a second late. ``brev refresh``
writes a host entry per RUNNING instance to ``~/.brev/ssh_config`` (the file the CLI's own ``ssh`` reads through
``~/.ssh/config``); probing with plain ``ssh -F ~/.brev/ssh_config <name>`` at a shorter interval notices readiness
sooner and starts no ``brev`` process per attempt. Like the CLI, it waits on only while ``ssh`` says the connection
was refused or timed out; anything else, a missing entry or a missing ``ssh`` falls back to the ``brev exec`` probe.

A worker's plain ``ssh`` may never get through where the CLI does (a different ``ssh`` first on ``PATH``, a proxy
or jump host only the CLI's environment knows, a firewall): every check would then spend its whole direct window
(:data:`SSH_WAIT_SECONDS`) on connections that time out. So when a direct attempt failed and the ``brev exec``
probe then reached the instance, one confirming attempt follows; :func:`direct_ssh_unreachable` judges it, and a
host entry that still cannot be reached is remembered by the hook for the rest of its process (logged once), whose
later checks probe through ``brev exec`` alone.

:class:`~airflow_provider_brev.core.instances.readiness.ReadinessCheck` makes the decisions; the hook
(:mod:`airflow_provider_brev.hooks.instances`) reads the file and runs the processes.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Call

#: Seconds between two direct ``ssh`` attempts (the CLI's own retry waits 1 s) ...
SSH_PROBE_INTERVAL = 0.1
#: ... for this long after the first one; then every :data:`SSH_SLOW_INTERVAL` seconds (a slow sshd does not keep
#: a triggerer spawning ten ``ssh`` processes a second per wait).
SSH_FAST_SECONDS = 10.0
SSH_SLOW_INTERVAL = 0.5
#: How long one check probes directly before it hands over to ``brev exec`` (the CLI's own ~40 attempts).
SSH_WAIT_SECONDS = 40.0
#: ``ssh -o ConnectTimeout`` of one direct attempt (the CLI's fast path uses 5 s).
SSH_CONNECT_TIMEOUT = 5
#: Budget of the one confirming attempt made after ``brev exec`` reached an instance that plain ``ssh`` did not.
SSH_CONFIRM_SECONDS = float(SSH_CONNECT_TIMEOUT)
#: What ``ssh`` says while sshd is not up yet: the lines the CLI's ``WaitForSSHToBeAvailable`` retries on.
SSH_BOOTING_MARKERS = ("Connection refused", "Operation timed out", "Connection timed out")


@dataclass(frozen=True)
class ReadHostEntries(Call):
    """Call: the text of the CLI's ssh config (``~/.brev/ssh_config``); the answer is the text, or ``None`` when the
    file does not exist."""


@dataclass(frozen=True)
class RefreshHostEntries(Call):
    """Call: ``brev refresh`` (writes a host entry per RUNNING instance); the answer is its result or ``Failed``.

    :param timeout: the call's budget (what is left of the check's probe budget).
    """

    timeout: float


@dataclass(frozen=True)
class RunSshProbe(Call):
    """Call: run ``command`` with plain ``ssh`` through the host entry (:func:`ssh_probe_argv`); the answer is its
    :class:`~airflow_provider_brev.core.protocol.lines.ProcessResult` (or ``Failed``: ``ssh`` could not be started).

    :param command: the probe command.
    :param timeout: the process's budget (at most the connect timeout plus 5 s, and what is left of the check's).
    """

    command: str
    timeout: float


def ssh_retry_interval(probing_for: float) -> float:
    """Seconds before the next direct attempt, ``probing_for`` seconds after the first one.

    :param probing_for: seconds since the check's first direct attempt.
    """
    return SSH_PROBE_INTERVAL if probing_for < SSH_FAST_SECONDS else SSH_SLOW_INTERVAL


def host_entry_present(config_text: str | None, alias: str) -> bool:
    """Whether an ssh config text has a ``Host`` entry for exactly ``alias`` (patterns and negations do not count).

    :param config_text: the file's text (``None``: no file).
    :param alias: the host alias (the instance name).
    """
    if not config_text:
        return False
    for line in config_text.splitlines():
        words = line.strip().split()
        if len(words) >= 2 and words[0].lower() == "host" and alias in words[1:]:
            return True
    return False


def ssh_probe_argv(ssh: str, config_path: str, alias: str, command: str) -> list[str]:
    """``ssh`` through the CLI's host entry, never prompting (no password, no host-key question, no TTY).

    :param ssh: the ``ssh`` executable.
    :param config_path: the CLI's ssh config (``~/.brev/ssh_config``).
    :param alias: the host alias (the instance name, as ``brev exec`` uses it).
    :param command: the remote command.
    """
    return [
        ssh,
        "-F",
        config_path,
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={SSH_CONNECT_TIMEOUT}",
        "-o",
        "LogLevel=ERROR",
        alias,
        command,
    ]


def ssh_still_booting(result: ProcessResult) -> bool:
    """Whether a failed direct attempt means "sshd not up yet" (wait on) rather than anything else (hand over).

    :param result: the ``ssh`` process's result.
    """
    if result.timed_out:
        return True
    return result.exit_code == 255 and any(marker in result.stderr for marker in SSH_BOOTING_MARKERS)


def direct_ssh_unreachable(confirm: object) -> str:
    """Why plain ``ssh`` cannot reach an instance that ``brev exec`` has just reached (``""``: it can).

    Asked once per check, when a direct attempt of the check failed and the ``brev exec`` probe after it passed:
    ``confirm`` is a direct attempt made right then, so a sshd that was still booting during the direct window
    answers it. ``ssh`` exits 255 on a connection error; any other exit code (or 0) means it reached the instance.

    :param confirm: the confirming attempt's :class:`~airflow_provider_brev.core.protocol.lines.ProcessResult`, or
        anything else when ``ssh`` could not be started.
    """
    if not isinstance(confirm, ProcessResult):
        return "ssh could not be started"
    if confirm.timed_out:
        return f"no answer within {SSH_CONFIRM_SECONDS:.0f} s"
    if confirm.exit_code != 255:
        return ""
    lines = [line.strip() for line in confirm.stderr.splitlines() if line.strip()]
    return lines[0][:200] if lines else "ssh exited with 255"
