"""Entry point of the fake ``brev``: dispatch and the per-invocation call record."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from airflow_provider_brev.testing.fake_brev.catalog import STATE_ENV
from airflow_provider_brev.testing.fake_brev.commands import COMMANDS, command_help, handler, root_help
from airflow_provider_brev.testing.fake_brev.context import Ctx, startup_auth_noise
from airflow_provider_brev.testing.fake_brev.flags import (
    GLOBAL_FLAGS,
    CliError,
    Terminated,
    levenshtein,
    parse_flags,
    write_fd,
)
from airflow_provider_brev.testing.fake_brev.instance_loss import lose_due_instances
from airflow_provider_brev.testing.fake_common import append_jsonl

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _resolve_command(ctx: Ctx, word: str) -> tuple[str, dict] | None:
    for name, spec in COMMANDS.items():
        if spec.get("documented_only") and not ctx.documented:
            continue
        if word == name or word in spec.get("aliases", []):
            return name, spec
    return None


def _unknown_command(ctx: Ctx, word: str) -> CliError:
    cands = [n for n, s in COMMANDS.items() if not s.get("documented_only") or ctx.documented]
    sugg = [n for n in sorted(cands) if levenshtein(word, n) <= 2 or n.startswith(word)]
    msg = f'unknown command "{word}" for "brev"'
    if sugg:
        msg += "\n\nDid you mean this?\n" + "".join(f"\t{s}\n" for s in sugg)
    return CliError(msg)


def dispatch(ctx: Ctx, argv: list[str]) -> int:
    # cobra: the first non-flag word (skipping global flags and their values) names the command
    idx = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            break
        if not a.startswith("-") or a == "-":
            idx = i
            break
        if a == "--user":
            i += 1
        i += 1
    if idx is None:
        vals, _pos = parse_flags(argv, GLOBAL_FLAGS)
        ctx.record["command"] = ""
        ctx.out(f"Current Version: {ctx.version}\n" if vals["version"] else root_help(ctx))
        return 0
    word = argv[idx]
    rest = argv[:idx] + argv[idx + 1 :]
    if word == "help":
        ctx.record["command"] = "help"
        _, pos = parse_flags(rest, GLOBAL_FLAGS)
        found = _resolve_command(ctx, pos[0]) if pos else None
        ctx.out(command_help(ctx, found[0], found[1]) if found else root_help(ctx))
        return 0
    found = _resolve_command(ctx, word)
    ctx.record["command"] = found[0] if found else word
    if found is None:
        raise _unknown_command(ctx, word)
    name, spec = found
    vals, pos = parse_flags(rest, spec["flags"](ctx) + GLOBAL_FLAGS)
    if vals["help"]:
        ctx.out(command_help(ctx, name, spec))
        return 0
    startup_auth_noise(ctx)
    return handler(spec)(ctx, vals, pos)


def _on_signal(signum: int, _frame: Any) -> None:
    raise Terminated(128 + signum)


def analytics_enabled(environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether this call would send its event -- the command and its flags -- to the CLI's analytics service: on by
    default from v0.6.323 (``pkg/analytics``), off when ``DO_NOT_TRACK`` or ``BREV_NO_ANALYTICS`` is ``1``."""
    return "1" not in (environ.get("DO_NOT_TRACK"), environ.get("BREV_NO_ANALYTICS"))


def main(argv: list[str] | None = None, root: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    started = time.time()
    root = root or os.environ.get(STATE_ENV)
    if not root:
        sys.stderr.write(f"fake brev: ${STATE_ENV} is not set (point it at a BrevSimulator root)\n")
        return 1
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    record = {"ts": started, "argv": argv, "exit_code": None, "home": os.environ.get("HOME", ""), "pid": os.getpid()}
    record.update(duration=None, stdin_read=False, analytics=analytics_enabled(os.environ))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, _on_signal)
    code = 1
    ctx = None
    try:
        ctx = Ctx(root, record)
        record["profile"] = ctx.profile
        lose_due_instances(root)
        code = dispatch(ctx, argv)
    except CliError as exc:
        with contextlib.suppress(OSError):
            write_fd(2, (exc.message + "\n").encode("utf-8", "replace"))
        code = exc.code
    except Terminated as exc:
        code = exc.code
    except Exception:  # a simulator bug: show it, but exit like the CLI does on any error
        import traceback

        with contextlib.suppress(OSError):
            write_fd(2, ("fake brev internal error:\n" + traceback.format_exc()).encode("utf-8", "replace"))
        code = 1
    finally:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        record["exit_code"] = code
        record["duration"] = round(time.time() - started, 4)
        with contextlib.suppress(OSError):
            append_jsonl(os.path.join(root, "calls.jsonl"), record)
        if ctx is not None:
            ctx.store.close()
    return code
