"""The fake OpenSSH client: plain ``ssh [options] <alias> <command>`` against a simulated instance.

The simulator installs it as ``bin/ssh`` next to ``bin/brev`` (the client side only: sandboxes do not see it). It
does what ``ssh`` does with the host entries ``brev refresh`` writes (:mod:`.ssh`): the alias is looked up in the
config given with ``-F`` (else ``~/.ssh/config`` and the files it ``Include``\\ s); an unknown alias fails like an
unresolvable host name, an instance whose sshd is not up yet refuses the connection, and an answering one runs the
command in its sandbox exactly as the CLI's own ``ssh`` does (``runs.jsonl``). Every invocation is recorded in
``ssh_calls.jsonl`` of the simulator root. Exit codes are ssh's: 255 for a connection error, else the remote one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
import time

from airflow_provider_brev.testing.fake_common import append_jsonl

TYPE_CHECKING = False

#: ssh options that take a value (``-o X=Y``, ``-F file``, ...); the other single letters are flags.
_WITH_VALUE = set("BbcDEeFIiJLlmOopQRSWw")
CALLS_FILE = "ssh_calls.jsonl"


class UsageError(Exception):
    """ssh's own usage error (exit 255)."""


def parse_argv(argv: list[str]) -> tuple[str | None, str, str]:
    """``(config file or None, destination, remote command)`` of an ssh command line."""
    config: str | None = None
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        arg = argv[i]
        letters = arg[1:]
        for pos, letter in enumerate(letters):
            if letter in _WITH_VALUE:
                value = letters[pos + 1 :]
                if not value:
                    i += 1
                    if i >= len(argv):
                        raise UsageError(f"option requires an argument -- {letter}")
                    value = argv[i]
                if letter == "F":
                    config = value
                break
        i += 1
    if i >= len(argv):
        raise UsageError("usage: ssh [options] destination [command [argument ...]]")
    destination = argv[i]
    command = " ".join(argv[i + 1 :])
    if not command:
        raise UsageError("fake ssh: a remote command is required (no interactive sessions)")
    return config, destination.split("@", 1)[-1], command


def config_files(config: str | None, home: str) -> list[str]:
    """The files ssh reads host entries from: ``-F``'s, else ``~/.ssh/config`` and what it includes."""
    if config is not None:
        return [os.path.expanduser(config)]
    main = os.path.join(home, ".ssh", "config")
    files = [main]
    try:
        with open(main, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return files
    for line in lines:
        words = line.strip().split()
        if len(words) >= 2 and words[0].lower() == "include":
            for pattern in words[1:]:
                path = pattern.strip('"').replace("~", home, 1)
                path = path if os.path.isabs(path) else os.path.join(home, ".ssh", path)
                files.extend(sorted(glob.glob(path)))
    return files


def main(argv: list[str] | None = None, root: str | None = None) -> int:
    from airflow_provider_brev.testing.fake_brev.cmd_exec import run_remote
    from airflow_provider_brev.testing.fake_brev.context import Ctx
    from airflow_provider_brev.testing.fake_brev.ssh import read_ssh_aliases, ssh_check
    from airflow_provider_brev.testing.fake_brev.ssh_proxy import unreachable_line

    argv = list(sys.argv[1:] if argv is None else argv)
    root = os.path.abspath(root or os.environ.get("FAKE_BREV_STATE", ""))
    started = time.time()
    record: dict = {"ts": started, "argv": argv, "exit_code": None, "home": os.environ.get("HOME", "")}
    code = 255
    ctx = None
    try:
        config, alias, command = parse_argv(argv)
        ctx = Ctx(root, record)
        aliases: dict[str, str] = {}
        for path in config_files(config, ctx.home):
            aliases.update(read_ssh_aliases(ctx, path))
        inst, line = ssh_check(ctx, alias, aliases)
        record["alias"] = alias
        blocked = unreachable_line(ctx, aliases[alias]) if alias in aliases else None
        if blocked is not None:
            inst, line = None, blocked
        if inst is None:
            ctx.err(line + "\n")
        else:
            code = run_remote(ctx, inst, alias, command, alias != inst["name"])
    except UsageError as exc:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"{exc}\n")
    finally:
        record["exit_code"] = code
        record["duration"] = round(time.time() - started, 4)
        with contextlib.suppress(OSError):
            append_jsonl(os.path.join(root, CALLS_FILE), record)
        if ctx is not None:
            ctx.store.close()
    return code
