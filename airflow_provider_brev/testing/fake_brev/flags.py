"""Command plumbing of the fake ``brev``: CLI errors (incl. the ``1 error occurred:`` wrapping), cobra-style
flag parsing and usage text."""

from __future__ import annotations

import os
import re
import stat

from airflow_provider_brev.testing.fake_brev.catalog import API_URL
from airflow_provider_brev.testing.fake_brev.store import _gonum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")
_GO_SRC = "/home/runner/work/brev-cli/brev-cli/pkg/"
_HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------
class CliError(Exception):
    """An error the real CLI prints (one message on stderr) before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class _Terminated(BaseException):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def traced(msg: str, func: str, file: str, line: int) -> str:
    """The text of ``breverrors.WrapAndTrace(err)``: a trace prefix followed by the inner message."""
    return f"[error] \ngithub.com/brevdev/brev-cli/pkg/{func}\n{_GO_SRC}{file}:{line}\n: {msg}"


def multierror(msgs: list[str]) -> str:
    """hashicorp/go-multierror's list format."""
    if len(msgs) == 1:
        return f"1 error occurred:\n\t* {msgs[0]}\n\n"
    points = "\n\t".join(f"* {m}" for m in msgs)
    return f"{len(msgs)} errors occurred:\n\t{points}\n\n"


def http_error_text(status: int, path: str, body: str | None = None, base: str = API_URL) -> str:
    reason = _HTTP_REASONS.get(status, "Error")
    if body is None:
        body = f"<html>{reason.lower()}</html>" if status >= 500 else '{"message":"' + reason.lower() + '"}'
    return f"{base}/{path}?utm_source=cli {status} {reason} {body}"


UNAUTHORIZED_TEXT = f'{API_URL}/api/me?utm_source=cli 401 Unauthorized {{"message":"invalid token"}}'


# --------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------
class Flag:
    __slots__ = ("default", "help", "hidden", "kind", "name", "short")

    def __init__(
        self,
        name: str,
        short: str = "",
        kind: str = "bool",
        default: Any = None,
        help: str = "",
        hidden: bool = False,
    ) -> None:
        self.name = name
        self.short = short
        self.kind = kind
        if default is None:
            default = {"bool": False, "str": "", "int": 0, "float": 0.0}[kind]
        self.default = default
        self.help = help
        self.hidden = hidden


GLOBAL_FLAGS = [
    Flag("help", "h", "bool", False, "Help for Brev"),
    Flag("user", "", "str", "", "Non root user to use for per user configuration of commands run as root"),
    Flag("version", "", "bool", False, "Print version output"),
    Flag("no-check-latest", "", "bool", False, "Do not check for the latest version when printing version"),
]


def _convert(flag: Flag, raw: str, shown: str) -> Any:
    if flag.kind == "str":
        return raw
    if flag.kind == "int":
        try:
            return int(raw, 10)
        except ValueError:
            raise CliError(
                f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseInt: parsing "{raw}": invalid syntax'
            ) from None
    if flag.kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise CliError(
                f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseFloat: parsing "{raw}": invalid syntax'
            ) from None
    low = raw.lower()
    if low in ("1", "t", "true"):
        return True
    if low in ("0", "f", "false"):
        return False
    raise CliError(f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseBool: parsing "{raw}": invalid syntax')


def _shown(flag: Flag) -> str:
    return f"-{flag.short}, --{flag.name}" if flag.short else f"--{flag.name}"


def parse_flags(args: list[str], flags: list[Flag]) -> tuple[dict, list[str], set[str]]:
    by_long = {f.name: f for f in flags}
    by_short = {f.short: f for f in flags if f.short}
    vals = {f.name: f.default for f in flags}
    changed: set[str] = set()
    pos: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos.extend(args[i + 1 :])
            break
        if a.startswith("--"):
            name, eq, raw = a[2:].partition("=")
            f = by_long.get(name)
            if f is None:
                raise CliError(f"unknown flag: --{name}")
            if f.kind == "bool":
                vals[f.name] = _convert(f, raw, _shown(f)) if eq else True
            else:
                if not eq:
                    if i + 1 >= len(args):
                        raise CliError(f"flag needs an argument: --{name}")
                    i += 1
                    raw = args[i]
                vals[f.name] = _convert(f, raw, _shown(f))
            changed.add(f.name)
        elif a.startswith("-") and len(a) > 1:
            shorts = a[1:]
            j = 0
            while j < len(shorts):
                c = shorts[j]
                f = by_short.get(c)
                if f is None:
                    raise CliError(f"unknown shorthand flag: '{c}' in -{shorts}")
                changed.add(f.name)
                if f.kind == "bool":
                    if shorts[j + 1 : j + 2] == "=":
                        vals[f.name] = _convert(f, shorts[j + 2 :], _shown(f))
                        break
                    vals[f.name] = True
                    j += 1
                    continue
                rest = shorts[j + 1 :]
                if rest.startswith("="):
                    rest = rest[1:]
                elif rest == "":
                    if i + 1 >= len(args):
                        raise CliError(f"flag needs an argument: '{c}' in -{shorts}")
                    i += 1
                    rest = args[i]
                vals[f.name] = _convert(f, rest, _shown(f))
                break
        else:
            pos.append(a)
        i += 1
    return vals, pos, changed


def flag_usages(flags: list[Flag]) -> str:
    lines = []
    for f in sorted((f for f in flags if not f.hidden), key=lambda f: f.name):
        left = f"  -{f.short}, --{f.name}" if f.short else f"      --{f.name}"
        typ = {"str": "string", "int": "int", "float": "float", "bool": ""}[f.kind]
        if typ:
            left += " " + typ
        usage = f.help
        if f.kind == "str" and f.default:
            usage += f' (default "{f.default}")'
        elif f.kind in ("int", "float") and f.default:
            usage += f" (default {_gonum(f.default)})"
        elif f.kind == "bool" and f.default:
            usage += " (default true)"
        lines.append((left, usage))
    width = max((len(left) for left, _ in lines), default=0)
    return "".join(f"{left.ljust(width)}   {usage}\n" for left, usage in lines)


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


# --------------------------------------------------------------------------------------------------
# execution context
# --------------------------------------------------------------------------------------------------
def _is_chr(fd: int) -> bool:
    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return False


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]
