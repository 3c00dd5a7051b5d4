"""Command plumbing of the fake ``brev`` (also used by the fake ``docker``): CLI errors (incl. the
``1 error occurred:`` wrapping), cobra/pflag-style flag parsing and flag usage text."""

from __future__ import annotations

import os
import re
import stat
import sys

from airflow_provider_brev.testing.fake_brev.catalog import API_URL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")
_HTTP_REASONS = {401: "Unauthorized", 404: "Not Found", 500: "Internal Server Error", 502: "Bad Gateway"}
_HTTP_REASONS.update({503: "Service Unavailable", 504: "Gateway Timeout"})


class CliError(Exception):
    """An error the real CLI prints (one message on stderr) before exiting with ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Terminated(BaseException):
    """A termination signal arrived: exit with ``code`` (128 + signal)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def traced(msg: str, func: str, file: str, line: int) -> str:
    """The text of ``breverrors.WrapAndTrace(err)``: a trace prefix followed by the inner message."""
    return f"[error] \ngithub.com/brevdev/brev-cli/pkg/{func}\n/home/runner/work/brev-cli/brev-cli/pkg/{file}:{line}\n: {msg}"


def multierror(msgs: list[str]) -> str:
    """hashicorp/go-multierror's list format."""
    points = "\n\t".join(f"* {m}" for m in msgs)
    return f"{len(msgs)} error{'s' if len(msgs) > 1 else ''} occurred:\n\t{points}\n\n"


def request_url(version: str, path: str, *, base: str = API_URL, local: bool = True) -> str:
    """A request URL as the CLI's resty client decorates it: ``utm_source``, ``cli_version``, ``os`` on every
    request, ``local=true`` on the authenticated API's when not running on a Brev instance (Go's
    ``url.Values.Encode`` sorts the keys)."""
    goos = "linux" if sys.platform.startswith("linux") else sys.platform
    query = {"cli_version": version, "os": goos, "utm_source": "cli"}
    if local:
        query["local"] = "true"
    return f"{base}/{path}?" + "&".join(f"{key}={query[key]}" for key in sorted(query))


def http_error_text(
    status: int, path: str, body: str | None = None, *, version: str, base: str = API_URL, local: bool = True
) -> str:
    """``HTTPResponseError``'s text: ``<request URL> <status> <body>``."""
    reason = _HTTP_REASONS.get(status, "Error")
    if body is None:
        body = f"<html>{reason.lower()}</html>" if status >= 500 else '{"message":"' + reason.lower() + '"}'
    return f"{request_url(version, path, base=base, local=local)} {status} {reason} {body}"


def unauthorized_text(version: str) -> str:
    """What the API answers a token it does not accept (``GET api/me``)."""
    return http_error_text(401, "api/me", '{"message":"invalid token"}', version=version)


class Flag:
    """One flag: ``kind`` is ``bool``, ``str``, ``int``, ``float`` or ``list`` (repeatable string)."""

    __slots__ = ("default", "help", "kind", "name", "short")

    def __init__(self, name: str, short: str = "", kind: str = "bool", default: Any = None, help: str = "") -> None:
        self.name = name
        self.short = short
        self.kind = kind
        self.default = (
            {"bool": False, "str": "", "int": 0, "float": 0.0, "list": None}[kind] if default is None else default
        )
        self.help = help


GLOBAL_FLAGS = [
    Flag("help", "h", "bool", False, "Help for Brev"),
    Flag("user", "", "str", "", "Non root user to use for per user configuration of commands run as root"),
    Flag("version", "", "bool", False, "Print version output"),
    Flag("no-check-latest", "", "bool", False, "Do not check for the latest version when printing version"),
]


def _convert(flag: Flag, raw: str) -> Any:
    shown = f"-{flag.short}, --{flag.name}" if flag.short else f"--{flag.name}"
    try:
        if flag.kind == "int":
            return int(raw, 10)
        if flag.kind == "float":
            return float(raw)
    except ValueError:
        func = "ParseInt" if flag.kind == "int" else "ParseFloat"
        raise CliError(
            f'invalid argument "{raw}" for "{shown}" flag: strconv.{func}: parsing "{raw}": invalid syntax'
        ) from None
    if flag.kind != "bool":
        return raw
    if raw.lower() in ("1", "t", "true", "0", "f", "false"):
        return raw.lower() in ("1", "t", "true")
    raise CliError(f'invalid argument "{raw}" for "{shown}" flag: strconv.ParseBool: parsing "{raw}": invalid syntax')


def parse_flags(args: list[str], flags: list[Flag], interspersed: bool = True) -> tuple[dict[str, Any], list[str]]:
    """pflag parsing (``--f[=v]``, ``-abc``, ``-fVALUE``, ``--``); ``interspersed=False`` stops at the first
    positional (docker's ``run IMAGE CMD...``). Returns (values by long name, positionals)."""
    by_long = {f.name: f for f in flags}
    by_short = {f.short: f for f in flags if f.short}
    vals: dict[str, Any] = {f.name: [] if f.kind == "list" else f.default for f in flags}
    pos: list[str] = []

    def put(f: Flag, raw: str) -> None:
        if f.kind == "list":
            vals[f.name].append(raw)
        else:
            vals[f.name] = _convert(f, raw)

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
            if not eq and f.kind != "bool":
                if i + 1 >= len(args):
                    raise CliError(f"flag needs an argument: --{name}")
                i += 1
                raw = args[i]
            put(f, raw if eq or f.kind != "bool" else "true")
        elif a.startswith("-") and len(a) > 1:
            shorts = a[1:]
            for j, c in enumerate(shorts):
                f = by_short.get(c)
                if f is None:
                    raise CliError(f"unknown shorthand flag: '{c}' in -{shorts}")
                rest = shorts[j + 1 :]
                if f.kind == "bool" and not rest.startswith("="):
                    put(f, "true")
                    continue
                if not rest:
                    if i + 1 >= len(args):
                        raise CliError(f"flag needs an argument: '{c}' in -{shorts}")
                    i += 1
                    rest = args[i]
                put(f, rest[1:] if rest.startswith("=") else rest)
                break
        elif not interspersed:
            pos.extend(args[i:])
            break
        else:
            pos.append(a)
        i += 1
    return vals, pos


def flag_usages(flags: list[Flag]) -> str:
    """cobra's ``Flags:`` block (what the provider's capability probe reads from ``create --help``)."""
    lines = []
    for f in sorted(flags, key=lambda f: f.name):
        left = f"  -{f.short}, --{f.name}" if f.short else f"      --{f.name}"
        left += {"bool": "", "str": " string"}.get(f.kind, f" {f.kind}")
        default = f' (default "{f.default}")' if f.kind == "str" else f" (default {f.default:g})"
        lines.append((left, f.help + (default if f.default and f.kind != "bool" else "")))
    width = max((len(left) for left, _ in lines), default=0)
    return "".join(f"{left.ljust(width)}   {usage}\n" for left, usage in lines)


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def is_chr(fd: int) -> bool:
    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return False


def write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]
