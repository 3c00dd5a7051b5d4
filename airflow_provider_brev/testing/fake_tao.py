"""Fake NVIDIA TAO Toolkit entrypoints for the Brev simulator's fake containers (stdlib only).

``BrevSimulator.install()`` writes wrappers for ``visual_changenet`` (``-pyt`` images) and ``gap_analysis``
(data-services images) into ``<root>/tools/container-bin``, which is on the PATH of processes that the
fake ``docker run`` starts (and of nothing else: a provider that forgets ``docker run`` gets
``command not found``). They follow ``nvidia_tao_pytorch/core/entrypoint.py``:

* ``<task> <action> -e <spec> [key=value ...]``; no ``-e`` -> ``ERROR: The subtask `train` requires the
  following argument: -e/--experiment_spec_file`` and exit 1; a missing spec file -> ``ERROR: The
  indicated experiment spec file `...` doesn't exist!`` and exit 1.
* The spec is YAML (a subset: nested maps, lists, flow ``[..]``/``{..}``, scalars, block scalars,
  ``${a.b}`` interpolation, ``???`` = mandatory) or JSON; Hydra-style ``key=value`` overrides (dotted keys,
  ``+key``/``~key``) win over it.
* Results go to ``<action>.results_dir`` or ``<results_dir>/<action>/`` (``gap_analysis``: ``results_dir``
  itself). ``status.json`` there gets JSON lines (``date``, ``time``, ``status`` STARTED / RUNNING /
  SUCCESS / FAILURE, ``verbosity``, ``message``, ``kpi``, training ``epoch``/``max_epoch``...), appended
  across runs like TAO's ``StatusLogger``.
* Output goes to stdout only (the real entrypoint merges the trainer's stderr), ending with
  ``... [TAO Toolkit] [INFO] root: Execution status: PASS`` (exit 0) or ``... [WARNING] ...: Execution
  status: FAIL`` (exit 1). Progress bars are ``\\r`` updates; every epoch ends with a line
  ``Epoch <e+1>/<N> - train_loss: ... - val_loss: ...``.

Knobs (``BrevSimulator.set_tao(...)``, stored under ``config.json["tao"]``): see :data:`DEFAULT_TAO_CONFIG`.
Every run is recorded in ``<root>/tao_runs.jsonl`` (``start`` and ``end`` lines sharing ``run_id``).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import math
import os
import re
import signal
import statistics
import sys
import time

try:
    from airflow_provider_brev.testing import fake_common as _c
except ImportError:  # started as a sandbox tool: testing/ is on sys.path
    import fake_common as _c  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RUNS_FILE = "tao_runs.jsonl"
CKPT_MAGIC = b"FAKE-TAO-CHECKPOINT\n"
PARQUET_MAGIC = b"PAR1"
MISSING = "???"

#: knobs under ``config.json["tao"]``. Fault knobs take ``True`` (every run), an int (the next N runs),
#: an action name (``"train"``, ``"evaluate"``, ``"inference"``, ``"export"``, ``"vcn_aoi"``) or a list of them.
DEFAULT_TAO_CONFIG: dict = {
    "epoch_seconds": 0.02,  # simulated time per training epoch (and per evaluate/inference pass)
    "silent_pass": False,  # train: exit 0, SUCCESS record, `Execution status: PASS`, no new checkpoint
    "oom": False,  # torch.cuda.OutOfMemoryError at epoch `fail_at_epoch` (program fault)
    "cuda_assert": False,  # CUDA device-side assert (program fault)
    "infra_error": False,  # uncorrectable ECC error / Xid 48 (infrastructure fault)
    "killed": False,  # the process is SIGKILLed mid-epoch: no terminal status record, docker exits 137
    "fail_at_epoch": 0,  # epoch (0-based, clamped to the run's range) at which the faults above fire
    "unreachable_kpi": False,  # gap_analysis: no threshold meets min_recall -> unreachable_kpi.txt, exit 1
    "kpis": {},  # {"test_acc": 0.5} overrides matching KPI keys; {"evaluate": {...}} adds per action
    "require_shm": True,  # visual_changenet with dataloader workers needs --shm-size >= 1g or --ipc=host
    "check_images": True,  # dataset CSV rows (first 50) must name files under images_dir
    "fail_pull": False,  # read by the fake docker (same meaning as docker.fail_pull)
}

NETWORK_ACTIONS = {
    "visual_changenet": ["train", "evaluate", "inference", "export", "quantize", "default_specs"],
    "gap_analysis": ["vcn_aoi"],
}
SIMULATED = {"train", "evaluate", "inference", "export", "vcn_aoi"}
_SCRIPTS = {
    "visual_changenet": "/usr/local/lib/python3.12/dist-packages/nvidia_tao_pytorch/cv/visual_changenet/scripts/{action}.py",
    "gap_analysis": "/usr/local/lib/python3.12/dist-packages/nvidia_tao_ds/gap_analysis/scripts/{action}.py",
}


# ================================================================================== YAML subset
class SpecError(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _strip_comment(s: str) -> str:
    quote = ""
    for i, ch in enumerate(s):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in ("'", '"') and (i == 0 or s[i - 1] in " \t[{,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i]
    return s


def _find_colon(s: str) -> int:
    """Index of the mapping ``:`` (followed by space/end) outside quotes and brackets, or -1."""
    quote = ""
    depth = 0
    for i, ch in enumerate(s):
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in ("'", '"') and (i == 0 or s[i - 1] in " \t[{,:"):
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == ":" and depth == 0 and (i + 1 == len(s) or s[i + 1] in " \t"):
            return i
    return -1


def _is_seq_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def parse_scalar(tok: str, line: int | None = None) -> Any:
    t = tok.strip()
    if t.startswith('"'):
        if len(t) < 2 or not t.endswith('"'):
            raise SpecError("while scanning a quoted scalar: found unexpected end of stream", line)
        try:
            return json.loads(t)
        except ValueError:
            return t[1:-1]
    if t.startswith("'"):
        if len(t) < 2 or not t.endswith("'"):
            raise SpecError("while scanning a quoted scalar: found unexpected end of stream", line)
        return t[1:-1].replace("''", "'")
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", t):
        return float(t)
    if t in (".inf", ".Inf", "+.inf"):
        return math.inf
    if t in ("-.inf", "-.Inf"):
        return -math.inf
    if t in (".nan", ".NaN"):
        return math.nan
    if t[:1] in ("[", "{", "]", "}") or t.startswith(("&", "*", "!", "%", "@", "`")):
        raise SpecError(f"found character '{t[0]}' that cannot start any token", line)
    return t


def parse_inline(s: str, line: int | None = None) -> Any:
    s = s.strip()
    if s[:1] in ("[", "{"):
        val, pos = _flow(s, 0, line)
        if s[pos:].strip():
            raise SpecError(f"expected <block end>, but found '{s[pos:].strip()[0]}'", line)
        return val
    return parse_scalar(s, line)


def _flow(s: str, i: int, line: int | None) -> tuple[Any, int]:
    while i < len(s) and s[i] in " \t":
        i += 1
    if i >= len(s):
        raise SpecError("while parsing a flow node: expected the node content, but found end of stream", line)
    ch = s[i]
    if ch in "[{":
        close = "]" if ch == "[" else "}"
        i += 1
        out_l: list = []
        out_d: dict = {}
        while True:
            while i < len(s) and s[i] in " \t":
                i += 1
            if i >= len(s):
                raise SpecError(f"while parsing a flow collection: expected ',' or '{close}'", line)
            if s[i] == close:
                return (out_l if ch == "[" else out_d), i + 1
            if ch == "[":
                val, i = _flow(s, i, line)
                out_l.append(val)
            else:
                key, i = _flow_scalar(s, i, ":,}", line)
                while i < len(s) and s[i] in " \t":
                    i += 1
                if i < len(s) and s[i] == ":":
                    val, i = _flow(s, i + 1, line)
                else:
                    val = None
                out_d[key] = val
            while i < len(s) and s[i] in " \t":
                i += 1
            if i < len(s) and s[i] == ",":
                i += 1
            elif i < len(s) and s[i] != close:
                raise SpecError(f"while parsing a flow collection: expected ',' or '{close}', but got '{s[i]}'", line)
    return _flow_scalar(s, i, ",]}", line)


def _flow_scalar(s: str, i: int, stops: str, line: int | None) -> tuple[Any, int]:
    if s[i] in ("'", '"'):
        q = s[i]
        j = i + 1
        while j < len(s):
            if s[j] == q and not (q == '"' and s[j - 1] == "\\"):
                if q == "'" and j + 1 < len(s) and s[j + 1] == "'":
                    j += 2
                    continue
                break
            j += 1
        return parse_scalar(s[i : j + 1], line), j + 1
    j = i
    while j < len(s) and s[j] not in stops:
        if s[j] == ":" and ":" in stops and (j + 1 < len(s) and s[j + 1] not in " \t"):
            j += 1
            continue
        j += 1
    return parse_scalar(s[i:j], line), j


class _Yaml:
    def __init__(self, text: str) -> None:
        self.lines = text.replace("\r\n", "\n").split("\n")
        self.i = 0

    def peek(self) -> tuple[int, str, int] | None:
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            lead = raw[: len(raw) - len(raw.lstrip(" \t"))]
            if "\t" in lead and raw.strip():
                raise SpecError("found character '\\t' that cannot start any token", self.i + 1)
            content = _strip_comment(raw).rstrip()
            body = content.strip()
            if not body or body in ("---", "...") or body.startswith("%"):
                self.i += 1
                continue
            return len(lead), body, self.i + 1
        return None

    def parse(self) -> Any:
        first = self.peek()
        if first is None:
            return None
        if first[0] == 0 and _find_colon(first[1]) < 0 and not _is_seq_item(first[1]):
            self.i += 1
            val = parse_inline(first[1], first[2])
            if self.peek() is not None:
                raise SpecError("expected '<document start>', but found '<scalar>'", self.i + 1)
            return val
        val = self.block(first[0])
        nxt = self.peek()
        if nxt is not None:
            raise SpecError("expected '<document start>' or <block end>; bad indentation", nxt[2])
        return val

    def block(self, indent: int) -> Any:
        ln = self.peek()
        assert ln is not None
        return self.seq(indent) if _is_seq_item(ln[1]) else self.mapping(indent)

    def mapping(self, indent: int) -> dict:
        out: dict = {}
        while True:
            ln = self.peek()
            if ln is None or ln[0] < indent:
                return out
            if ln[0] > indent:
                raise SpecError("mapping values are not allowed here (bad indentation)", ln[2])
            if _is_seq_item(ln[1]):
                raise SpecError("expected <block end>, but found '-'", ln[2])
            pos = _find_colon(ln[1])
            if pos < 0:
                raise SpecError("could not find expected ':' (while scanning a simple key)", ln[2])
            key_raw = ln[1][:pos].strip()
            key = parse_scalar(key_raw, ln[2]) if key_raw[:1] in ("'", '"') else key_raw
            self.i += 1
            out[key] = self.after_key(ln[1][pos + 1 :].strip(), indent, ln[2])

    def after_key(self, rest: str, indent: int, line: int) -> Any:
        if re.fullmatch(r"[|>][-+]?", rest):
            return self.block_scalar(rest, indent)
        if rest:
            return parse_inline(rest, line)
        nxt = self.peek()
        if nxt is not None and nxt[0] > indent:
            return self.block(nxt[0])
        if nxt is not None and nxt[0] == indent and _is_seq_item(nxt[1]):
            return self.seq(indent)
        return None

    def seq(self, indent: int) -> list:
        out: list = []
        while True:
            ln = self.peek()
            if ln is None or ln[0] != indent or not _is_seq_item(ln[1]):
                if ln is not None and ln[0] > indent:
                    raise SpecError("expected <block end>, but found '<block sequence start>'", ln[2])
                return out
            body = ln[1][1:]
            inner = body.lstrip(" ")
            if not inner:
                self.i += 1
                nxt = self.peek()
                out.append(self.block(nxt[0]) if nxt is not None and nxt[0] > indent else None)
                continue
            sub = indent + 1 + (len(body) - len(inner))
            if _is_seq_item(inner) or (_find_colon(inner) >= 0 and inner[:1] not in ("[", "{")):
                self.lines[self.i] = " " * sub + inner
                out.append(self.block(sub))
            else:
                self.i += 1
                out.append(parse_inline(inner, ln[2]))

    def block_scalar(self, style: str, indent: int) -> str:
        lines: list[str] = []
        block_indent = None
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            if raw.strip():
                ind = len(raw) - len(raw.lstrip(" "))
                if ind <= indent:
                    break
                if block_indent is None:
                    block_indent = ind
                lines.append(raw[block_indent:] if ind >= block_indent else raw.lstrip(" "))
            else:
                lines.append("")
            self.i += 1
        while lines and lines[-1] == "" and not style.endswith("+"):
            lines.pop()
        text = "\n".join(lines) if style[0] == "|" else re.sub(r"(?<!\n)\n(?!\n)", " ", "\n".join(lines))
        return text if style.endswith("-") else text + "\n"


def parse_spec(text: str) -> Any:
    """Parse a spec: JSON when it is JSON, else the YAML subset described in the module doc."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        with contextlib.suppress(ValueError):
            return json.loads(stripped)
    return _Yaml(text).parse()


# ================================================================================== config helpers
class TaoFailure(Exception):
    """The trainer failed: ``error`` is the exception line, ``message`` the status.json message."""

    def __init__(self, error: str, message: str | None = None, extra: list[str] | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.message = message if message is not None else error.split(": ", 1)[-1]
        self.extra = extra or []


def missing_value(key: str) -> TaoFailure:
    return TaoFailure(
        f"omegaconf.errors.MissingMandatoryValue: Missing mandatory value: {key}\n    full_key: {key}\n    object_type=ExperimentConfig",
        f"Missing mandatory value: {key}",
    )


def get(cfg: Any, key: str, default: Any = None) -> Any:
    cur = cfg
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def require(cfg: Any, key: str) -> Any:
    val = get(cfg, key)
    if val is None or val == MISSING or val == "":
        raise missing_value(key)
    return val


def set_dotted(cfg: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    cur = cfg
    for part in parts[:-1]:
        nxt = cur.get(part)
        if nxt is None:
            nxt = cur[part] = {}
        if not isinstance(nxt, dict):
            raise TaoFailure(f"omegaconf.errors.ConfigKeyError: Could not override '{key}': '{part}' is not a mapping")
        cur = nxt
    cur[parts[-1]] = value


def apply_overrides(cfg: dict, overrides: list[str]) -> None:
    for arg in overrides:
        if arg.startswith("~") and "=" not in arg:
            parts = arg[1:].split(".")
            parent = get(cfg, ".".join(parts[:-1])) if len(parts) > 1 else cfg
            if isinstance(parent, dict):
                parent.pop(parts[-1], None)
            continue
        m = re.match(r"^(~|\+\+|\+)?([A-Za-z_][\w.\-]*)=(.*)$", arg, re.S)
        if not m:
            raise TaoFailure(
                f"hydra.errors.OverrideParseException: Error parsing override '{arg}'\nmissing EQUAL at '<EOF>'\n"
                "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details",
                f"Error parsing override '{arg}'",
            )
        prefix, key, raw = m.groups()
        try:
            value = parse_inline(raw) if raw.strip() else ""
        except SpecError as exc:
            raise TaoFailure(
                f"hydra.errors.OverrideParseException: Error parsing override '{arg}': {exc.message}"
            ) from None
        if prefix == "~":
            parent = get(cfg, key.rsplit(".", 1)[0]) if "." in key else cfg
            if isinstance(parent, dict):
                parent.pop(key.rsplit(".", 1)[-1], None)
            continue
        set_dotted(cfg, key, value)


_INTERP = re.compile(r"\$\{([^${}]+)\}")


def resolve_interpolations(cfg: Any) -> Any:
    def resolve_str(s: str, depth: int) -> Any:
        if depth > 20:
            raise TaoFailure(f"omegaconf.errors.InterpolationResolutionError: Recursive interpolation in '{s}'")

        def lookup(expr: str) -> Any:
            expr = expr.strip()
            if expr.startswith("oc.env:"):
                name, _, default = expr[len("oc.env:") :].partition(",")
                val = os.environ.get(name.strip())
                if val is None:
                    if not default:
                        raise TaoFailure(
                            f"omegaconf.errors.InterpolationResolutionError: Environment variable '{name}' not found"
                        )
                    return parse_scalar(default)
                return val
            val = get(cfg, expr.lstrip("."), _MISS)
            if val is _MISS:
                raise TaoFailure(f"omegaconf.errors.InterpolationKeyError: Interpolation key '{expr}' not found")
            return walk(val, depth + 1)

        whole = _INTERP.fullmatch(s)
        if whole:
            return lookup(whole.group(1))
        return _INTERP.sub(lambda m: str(lookup(m.group(1))), s)

    def walk(node: Any, depth: int = 0) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, depth) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, depth) for v in node]
        if isinstance(node, str) and "${" in node:
            return resolve_str(node, depth)
        return node

    return walk(cfg)


_MISS = object()


# ================================================================================== run context
def _now_parts() -> tuple[str, str]:
    t = time.localtime()
    return f"{t.tm_mon}/{t.tm_mday}/{t.tm_year}", f"{t.tm_hour}:{t.tm_min}:{t.tm_sec}"


def _fmt_td(seconds: float) -> str:
    s = max(0.0, seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{int(h)}:{int(m):02d}:{sec:09.6f}"


def _unit(key: str) -> float:
    """Deterministic value in [0, 1) for ``key``."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0x100000000


class StatusLog:
    """TAO's ``StatusLogger``: JSON lines appended to ``<dir>/status.json``."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.last: dict | None = None

    def write(self, status: str, message: str | None = None, **data: Any) -> None:
        date, clock = _now_parts()
        rec: dict[str, Any] = {"date": date, "time": clock, "status": status, "verbosity": "INFO"}
        rec.update({k: v for k, v in data.items() if v is not None})
        if message:
            rec["message"] = message
        self.last = rec
        _c.append_jsonl(self.path, rec)


class Run:
    def __init__(self, prog: str, action: str, spec_arg: str | None, overrides: list[str]) -> None:
        self.prog = prog
        self.action = action
        self.spec_arg = spec_arg
        self.overrides = overrides
        self.root = _c.sim_root()
        self.knobs = _c.load_section(self.root, "tao", DEFAULT_TAO_CONFIG)
        env = os.environ
        self.mounts: list[tuple[str, str, bool]] = [
            tuple(m) for m in json.loads(env.get("BREV_SIM_CONTAINER_MOUNTS") or "[]")
        ]  # type: ignore[misc]
        self.rootfs = env.get("BREV_SIM_CONTAINER_ROOTFS") or "/"
        self.gpus = int(env.get("BREV_SIM_CONTAINER_GPUS") or 0)
        self.vram = int(env.get("BREV_SIM_CONTAINER_VRAM_GB") or 0)
        self.shm = int(env.get("BREV_SIM_CONTAINER_SHM_BYTES") or 64 * 1024**2)
        self.ipc = env.get("BREV_SIM_CONTAINER_IPC") or "private"
        self.user = env.get("BREV_SIM_CONTAINER_USER") or ""
        self.cfg: dict = {}
        self.status: StatusLog | None = None
        self.action_dir: str | None = None
        self.run_id = os.urandom(6).hex()
        # the fake docker rewrote mounted container paths in our argv to host paths: work in container paths
        self.spec_arg = self._container_arg(spec_arg) if spec_arg else spec_arg
        self.overrides = [self._container_arg(o) for o in overrides]
        self.info: dict[str, Any] = {"checkpoints_written": []}
        self.task = "classify"

    # ----------------------------------------------------------------------------------- output
    @staticmethod
    def raw(text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):  # reader gone: keep training, drop the output
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)

    def log(self, message: str, level: str = "INFO", name: str = "root") -> None:
        t = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int((t % 1) * 1000):03d}"
        self.raw(f"{stamp} [TAO Toolkit] [{level}] {name}: {message}\n")

    # ------------------------------------------------------------------------------------ paths
    def resolve(self, path: str) -> str:
        """Container path -> host path (relative paths are relative to the container's cwd, which the
        fake docker already made a host path); paths outside every mount land in the container root."""
        p = str(path)
        if not p.startswith("/"):
            return os.path.normpath(os.path.join(os.getcwd(), p))
        p = os.path.normpath(p)
        best = None
        for src, dst, _rw in self.mounts:
            if (p == dst or p.startswith(dst.rstrip("/") + "/")) and (best is None or len(dst) > len(best[1])):
                best = (src, dst)
        if best is not None:
            return os.path.normpath(best[0] + "/" + p[len(best[1]) :])
        if p == self.rootfs or p.startswith(self.rootfs.rstrip("/") + "/"):
            return p
        return os.path.join(self.rootfs, p.lstrip("/"))

    def _container_arg(self, arg: str) -> str:
        """Undo the fake docker's host-path rewriting of an argument (``/x`` or ``key=/x``)."""
        m = re.match(r"^([~+]*[A-Za-z_][\w.\-]*=)?(/.*)$", arg, re.S)
        if not m:
            return arg
        return (m.group(1) or "") + self.display(os.path.normpath(m.group(2)))

    def display(self, host: str) -> str:
        """Host path -> the path the container sees."""
        best = None
        for src, dst, _rw in self.mounts:
            if (host == src or host.startswith(src.rstrip("/") + "/")) and (best is None or len(src) > len(best[0])):
                best = (src, dst)
        if best is not None:
            return os.path.normpath(best[1] + "/" + host[len(best[0]) :])
        if host.startswith(self.rootfs.rstrip("/") + "/"):
            return "/" + host[len(self.rootfs.rstrip("/")) + 1 :]
        return host

    def writable(self, host: str) -> None:
        best = None
        for src, _dst, rw in self.mounts:
            if (host == src or host.startswith(src.rstrip("/") + "/")) and (best is None or len(src) > len(best[0])):
                best = (src, rw)
        if best is not None and not best[1]:
            raise TaoFailure(f"OSError: [Errno 30] Read-only file system: '{self.display(host)}'")

    def makedirs(self, host: str) -> None:
        self.writable(host)
        try:
            os.makedirs(host, exist_ok=True)
        except OSError as exc:
            raise TaoFailure(f"OSError: [Errno {exc.errno}] {exc.strerror}: '{self.display(host)}'") from None

    def need_file(self, value: str, key: str, directory: bool = False) -> str:
        host = self.resolve(value)
        ok = os.path.isdir(host) if directory else os.path.isfile(host)
        if not ok:
            if not directory and os.path.isdir(host):
                raise TaoFailure(f"IsADirectoryError: [Errno 21] Is a directory: '{value}'")
            raise TaoFailure(
                f"FileNotFoundError: [Errno 2] No such file or directory: '{value}'",
                f"File system error: {key} does not exist: {value}",
            )
        return host

    # ------------------------------------------------------------------------------------ knobs
    def fault(self) -> str | None:
        for key in ("oom", "cuda_assert", "infra_error", "killed"):
            if _c.consume_knob(self.root, "tao", key, self.action):
                return key
        return None

    def raise_fault(self, kind: str) -> None:
        if kind == "killed":
            self.raw("\n")
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "oom":
            free = max(1, self.vram - 2) if self.vram else 1
            raise TaoFailure(
                f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                f"{max(self.vram, 16) - 0.47:.2f} GiB of which {free * 0.05:.2f} GiB is free. Of the allocated memory "
                f"{max(self.vram, 16) * 0.9:.2f} GiB is allocated by PyTorch. See documentation for Memory Management "
                "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            )
        if kind == "cuda_assert":
            raise TaoFailure(
                "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported "
                "at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
                "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
                "CUDA error: device-side assert triggered",
            )
        raise TaoFailure(
            "RuntimeError: CUDA error: uncorrectable ECC error encountered\nCUDA kernel errors might be asynchronously "
            "reported at some other API call, so the stacktrace below might be incorrect.",
            "CUDA error: uncorrectable ECC error encountered",
            extra=[
                "NVRM: Xid (PCI:0000:00:1e): 48, pid=1, name=python, An uncorrectable double bit error (DBE) has been detected on GPU"
            ],
        )

    def apply_kpis(self, kpi: dict) -> dict:
        over = self.knobs.get("kpis") or {}
        out = dict(kpi)
        for key, val in over.items():
            if isinstance(val, dict):
                if key == self.action:
                    out.update(val)
            elif key in out:
                out[key] = val
        return out

    # ------------------------------------------------------------------------------------ checks
    def check_gpu(self, num_gpus: int = 1) -> None:
        if self.gpus <= 0:
            raise TaoFailure(
                "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                "installed a driver from http://www.nvidia.com/Download/index.aspx",
                "CUDA is not available: Found no NVIDIA driver on your system.",
            )
        if num_gpus > self.gpus:
            raise TaoFailure(
                f"lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: {list(range(num_gpus))}\n"
                f" But your machine only has: {list(range(self.gpus))}",
                f"You requested {num_gpus} GPUs but the container only sees {self.gpus}",
            )

    def check_shm(self, workers: int) -> None:
        if self.knobs.get("require_shm") and workers > 0 and self.ipc != "host" and self.shm < 1024**3:
            raise TaoFailure(
                "RuntimeError: DataLoader worker (pid(s) 412) exited unexpectedly",
                "DataLoader worker exited unexpectedly (bus error): insufficient shared memory",
                extra=[
                    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."
                ],
            )

    def read_rows(self, csv_host: str, csv_value: str) -> list[dict]:
        try:
            with open(csv_host, newline="", encoding="utf-8", errors="replace") as fh:
                return [dict(r) for r in csv.DictReader(fh)]
        except (OSError, csv.Error) as exc:
            raise TaoFailure(f"pandas.errors.ParserError: Error tokenizing data in '{csv_value}': {exc}") from None

    def split_dataset(self, split: str, role: str = "train") -> tuple[list[dict], str]:
        base = get(self.cfg, "dataset.classify") or {}
        sub = base.get(split) if isinstance(base, dict) else None
        sub = sub if isinstance(sub, dict) else {}
        prefix = f"dataset.classify.{split}"
        csv_value = sub.get("csv_path")
        if csv_value in (None, "", MISSING):
            raise missing_value(f"{prefix}.csv_path")
        img_value = sub.get("images_dir") or sub.get("image_dir") or base.get("images_dir") or base.get("image_dir")
        if img_value in (None, "", MISSING):
            raise missing_value(f"{prefix}.images_dir")
        csv_host = self.need_file(str(csv_value), f"{prefix}.csv_path")
        img_host = self.need_file(str(img_value), f"{prefix}.images_dir", directory=True)
        rows = self.read_rows(csv_host, str(csv_value))
        if not rows:
            raise TaoFailure(f"ValueError: The {role} dataset '{csv_value}' has no samples")
        if self.knobs.get("check_images"):
            for row in rows[:50]:
                for col in ("input_path", "golden_path"):
                    rel = (row.get(col) or "").strip()
                    if not rel:
                        continue
                    if not self._image_exists(img_host, rel):
                        shown = os.path.join(str(img_value), rel)
                        raise TaoFailure(f"FileNotFoundError: [Errno 2] No such file or directory: '{shown}'")
        return rows, img_host

    @staticmethod
    def _image_exists(img_dir: str, rel: str) -> bool:
        path = os.path.join(img_dir, rel)
        if os.path.exists(path):
            return True
        parent, stem = os.path.split(path)
        try:
            return any(name.startswith(stem) for name in os.listdir(parent or "."))
        except OSError:
            return False

    def checkpoint_info(self, host: str) -> dict:
        info: dict[str, Any] = {}
        try:
            with open(host, "rb") as fh:
                head = fh.read(4096)
            if head.startswith(CKPT_MAGIC):
                info = json.loads(head[len(CKPT_MAGIC) :].split(b"\n", 1)[0])
        except (OSError, ValueError):
            info = {}
        if "epoch" not in info:
            m = re.search(r"epoch_(\d+)_step_(\d+)", os.path.basename(os.path.realpath(host)))
            if m:
                info.update(epoch=int(m.group(1)), step=int(m.group(2)))
        return info

    def write_checkpoint(self, host: str, data: dict) -> None:
        self.writable(host)
        tmp = f"{host}.tmp.{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(CKPT_MAGIC + json.dumps(data).encode() + b"\n" + b"\0" * 256)
        os.replace(tmp, host)

    # ------------------------------------------------------------------------------------ dirs
    def setup_results(self) -> None:
        if self.prog == "gap_analysis":
            rd = get(self.cfg, "results_dir")
            if rd in (None, "", MISSING):
                raise missing_value("results_dir")
            self.action_dir = self.resolve(str(rd))
        else:
            explicit = get(self.cfg, f"{self.action}.results_dir")
            if explicit not in (None, "", MISSING):
                self.action_dir = self.resolve(str(explicit))
            else:
                rd = get(self.cfg, "results_dir")
                if rd in (None, "", MISSING):
                    raise missing_value("results_dir")
                self.action_dir = os.path.join(self.resolve(str(rd)), self.action)
        self.makedirs(self.action_dir)
        self.status = StatusLog(os.path.join(self.action_dir, "status.json"))
        self.info["action_dir"] = self.display(self.action_dir)
        self.info["action_dir_host"] = self.action_dir

    # ------------------------------------------------------------------------------------ actions
    def progress(self, label: str, total: int, seconds: float, extra: str = "") -> None:
        steps = 3
        for k in range(1, steps + 1):
            if seconds > 0:
                time.sleep(seconds / steps)
            done = max(1, round(total * k / steps))
            pct = int(100 * done / total)
            bar = "#" * (pct // 10) + " " * (10 - pct // 10)
            rate = total / max(seconds, 1e-3)
            self.raw(f"\r{label}: {pct:3d}%|{bar}| {done}/{total} [00:00<00:00, {rate:.2f}it/s{extra}]")
        self.raw("\n")

    def train(self) -> dict:
        assert self.status is not None and self.action_dir is not None
        self.status.write("STARTED", "Starting Visual ChangeNet train.")
        num_epochs = int(get(self.cfg, "train.num_epochs", 100))
        ci = int(get(self.cfg, "train.checkpoint_interval", 1))
        vi = int(get(self.cfg, "train.validation_interval", 1))
        if num_epochs < 1:
            raise TaoFailure(f"ValueError: Configuration error: train.num_epochs must be >= 1, got {num_epochs}")
        for key, val in (("checkpoint_interval", ci), ("validation_interval", vi)):
            if val < 1 or val > num_epochs:
                raise TaoFailure(
                    f"ValueError: Configuration error: train.{key} ({val}) must be between 1 and train.num_epochs ({num_epochs})"
                )
        num_gpus = int(get(self.cfg, "train.num_gpus", 1))
        gpu_ids = get(self.cfg, "train.gpu_ids")
        if isinstance(gpu_ids, list) and len(gpu_ids) > num_gpus:
            num_gpus = len(gpu_ids)
        self.check_gpu(num_gpus)
        if self.task == "segment":
            root = require(self.cfg, "dataset.segment.root_dir")
            self.need_file(str(root), "dataset.segment.root_dir", directory=True)
            n_rows = 64
            batch = int(get(self.cfg, "dataset.segment.batch_size", 8))
            workers = int(get(self.cfg, "dataset.segment.workers", 2))
        else:
            rows, _img = self.split_dataset("train_dataset")
            self.split_dataset("validation_dataset", "validation")
            labels = {(r.get("label") or "").strip() for r in rows if "label" in r}
            if len(labels) == 1:
                raise TaoFailure(
                    f"ValueError: The training dataset contains a single class ({labels.pop()!r}); "
                    "Visual ChangeNet classify needs PASS and NO_PASS samples"
                )
            n_rows = len(rows)
            batch = int(get(self.cfg, "dataset.classify.batch_size", 16))
            workers = int(get(self.cfg, "dataset.classify.workers", 2))
        if batch <= 1:
            raise TaoFailure(
                f"ValueError: Configuration error: dataset.{self.task}.batch_size must be greater than 1, got {batch}"
            )
        backbone = get(self.cfg, "model.backbone.pretrained_backbone_path")
        if backbone not in (None, ""):
            if "://" in str(backbone):
                raise TaoFailure(f"FileNotFoundError: [Errno 2] No such file or directory: '{backbone}'")
            self.need_file(str(backbone), "model.backbone.pretrained_backbone_path")
        pretrained = get(self.cfg, "train.pretrained_model_path")
        if pretrained not in (None, ""):
            self.need_file(str(pretrained), "train.pretrained_model_path")
            self.log(f"Loading pretrained weights from {pretrained}")
        start = 0
        resume = get(self.cfg, "train.resume_training_checkpoint_path")
        if resume not in (None, ""):
            info = self.checkpoint_info(self.need_file(str(resume), "train.resume_training_checkpoint_path"))
            start = int(info.get("epoch", -1)) + 1
            self.log(f"Resuming training from checkpoint {resume} (epoch {start})")
        self.info.update(num_epochs=num_epochs, start_epoch=start)
        steps_per_epoch = max(1, math.ceil(n_rows / (batch * max(1, num_gpus))))
        silent = start >= num_epochs
        if not silent and _c.consume_knob(self.root, "tao", "silent_pass", "train"):
            silent = True
        if silent:
            self.raw(f"`Trainer.fit` stopped: `max_epochs={num_epochs}` reached.\n")
            self.status.write("SUCCESS", "Train finished successfully.")
            self.info.update(outcome="silent_pass", epochs_run=0)
            self.raw("Train finished successfully.\n")
            return {}
        fault = self.fault()
        fail_epoch = min(max(int(self.knobs.get("fail_at_epoch") or 0), start), num_epochs - 1)
        epoch_seconds = float(self.knobs.get("epoch_seconds") or 0.0)
        latest = os.path.join(self.action_dir, f"changenet_model_{self.task}_latest.pth")
        seed = f"{self.display(self.action_dir)}:{self.spec_arg}"
        kpi: dict[str, Any] = {}
        last_saved: str | None = None
        t0 = time.monotonic()
        self.check_shm(workers)
        for e in range(start, num_epochs):
            if fault and e == fail_epoch:
                self.progress(f"Epoch {e}", steps_per_epoch, epoch_seconds / 2)
                self.raise_fault(fault)
            t_epoch = time.monotonic()
            train_loss = round(0.9 * math.exp(-0.35 * (e + 1)) + 0.05 + 0.02 * _unit(f"t{e}{seed}"), 4)
            val_loss = round(0.95 * math.exp(-0.3 * (e + 1)) + 0.08 + 0.03 * _unit(f"v{e}{seed}"), 4)
            self.progress(f"Epoch {e}", steps_per_epoch, epoch_seconds, f", loss={train_loss}, v_num=0")
            step = (e + 1) * steps_per_epoch
            validated = (e + 1) % vi == 0
            if validated:
                kpi = {"val_loss": val_loss, "val_acc": round(min(0.995, 0.7 + 0.3 * (1 - val_loss)), 4)}
            elapsed = time.monotonic() - t_epoch
            self.status.write(
                "RUNNING",
                None,
                epoch=e,
                max_epoch=num_epochs,
                time_per_epoch=_fmt_td(elapsed),
                eta=_fmt_td(elapsed * (num_epochs - e - 1)),
                kpi=self.apply_kpis(kpi) if validated else None,
                graphical={"train_loss": train_loss, **({"val_loss": val_loss} if validated else {})},
            )
            line = f"Epoch {e + 1}/{num_epochs} - train_loss: {train_loss:.4f}"
            self.raw(line + (f" - val_loss: {val_loss:.4f}" if validated else "") + "\n")
            if (e + 1) % ci == 0:
                name = f"model_epoch_{e:03d}_step_{step:05d}.pth"
                host = os.path.join(self.action_dir, name)
                self.write_checkpoint(
                    host,
                    {
                        "network": "visual_changenet",
                        "task": self.task,
                        "epoch": e,
                        "step": step,
                        "num_epochs": num_epochs,
                        "val_loss": val_loss,
                    },
                )
                last_saved = name
                self.info["checkpoints_written"].append(name)
                self.log(f"Saved checkpoint: {self.display(host)}", name="lightning")
        if last_saved is not None:
            with contextlib.suppress(OSError):
                if os.path.lexists(latest):
                    os.unlink(latest)
                os.symlink(last_saved, latest)
        self.info.update(
            outcome="success", epochs_run=num_epochs - start, train_seconds=round(time.monotonic() - t0, 3)
        )
        final = self.apply_kpis(kpi)
        self.status.write("SUCCESS", "Train finished successfully.", kpi=final or None)
        self.raw("Train finished successfully.\n")
        return final

    def _checkpoint(self) -> dict:
        ckpt = require(self.cfg, f"{self.action}.checkpoint")
        host = self.need_file(str(ckpt), f"{self.action}.checkpoint")
        info = self.checkpoint_info(host)
        self.log(f"Loading checkpoint {ckpt}")
        return info

    def evaluate(self) -> dict:
        assert self.status is not None
        self.status.write("STARTED", "Starting Visual ChangeNet evaluation.")
        self.check_gpu(int(get(self.cfg, "evaluate.num_gpus", 1)))
        info = self._checkpoint()
        epochs = int(info.get("epoch", 4)) + 1
        if self.task == "segment":
            self.need_file(
                str(require(self.cfg, "dataset.segment.root_dir")), "dataset.segment.root_dir", directory=True
            )
            n = 32
        else:
            rows, _ = self.split_dataset("test_dataset", "test")
            n = len(rows)
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        batch = max(2, int(get(self.cfg, f"dataset.{self.task}.batch_size", 16)))
        self.progress("Testing DataLoader 0", max(1, math.ceil(n / batch)), float(self.knobs.get("epoch_seconds") or 0))
        quality = 1 - math.exp(-epochs / 5)
        if self.task == "segment":
            kpi = {"mIoU": round(0.6 + 0.3 * quality, 4), "F1": round(0.65 + 0.3 * quality, 4)}
        else:
            acc = round(0.8 + 0.19 * quality, 4)
            kpi = {
                "test_acc": acc,
                "test_fpr": round((1 - acc) * 0.6, 4),
                "test_fnr": round((1 - acc) * 0.4, 4),
                "defect_acc": round(acc - 0.02, 4),
            }
        kpi = self.apply_kpis(kpi)
        rule = "\u2500" * 62
        self.raw(f"{rule}\n{'Test metric':>24}{'DataLoader 0':>30}\n{rule}\n")
        for key, val in kpi.items():
            self.raw(f"{key:>24}{val!s:>30}\n")
        self.raw(f"{rule}\n")
        self.status.write("SUCCESS", "Evaluation finished successfully.", kpi=kpi)
        self.info["outcome"] = "success"
        return kpi

    def inference(self) -> dict:
        assert self.status is not None and self.action_dir is not None
        self.status.write("STARTED", "Starting Visual ChangeNet inference.")
        self.check_gpu(int(get(self.cfg, "inference.num_gpus", 1)))
        self._checkpoint()
        rows, _ = self.split_dataset("infer_dataset", "inference")
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        batch = max(2, int(get(self.cfg, "dataset.classify.batch_size", 16)))
        self.progress(
            "Predicting DataLoader 0", max(1, math.ceil(len(rows) / batch)), float(self.knobs.get("epoch_seconds") or 0)
        )
        out_host = os.path.join(self.action_dir, "inference.csv")
        self.writable(out_host)
        with open(out_host, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["input_path", "object_name", "label", "siamese_score"])
            for row in rows:
                path = (row.get("input_path") or "").strip()
                label = (row.get("label") or "").strip()
                u = _unit("score:" + path + (row.get("object_name") or ""))
                defect = label.upper() not in ("PASS", "")
                score = 0.45 + 0.55 * u if defect else 0.6 * u
                if not label:
                    label = "NO_PASS" if score >= 0.5 else "PASS"
                w.writerow([path, (row.get("object_name") or "").strip(), label, f"{score:.6f}"])
        self.log(f"Inference results written to {self.display(out_host)}")
        self.status.write("SUCCESS", "Inference finished successfully.")
        self.info.update(outcome="success", rows=len(rows))
        return {}

    def export(self) -> dict:
        assert self.status is not None and self.action_dir is not None
        self.status.write("STARTED", "Starting Visual ChangeNet export.")
        self.check_gpu()
        info = self._checkpoint()
        onnx = get(self.cfg, "export.onnx_file")
        host = (
            self.resolve(str(onnx))
            if onnx not in (None, "", MISSING)
            else os.path.join(self.action_dir, "changenet.onnx")
        )
        self.makedirs(os.path.dirname(host))
        self.writable(host)
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        with open(host, "wb") as fh:
            fh.write(b"\x08\x08\x12\x07pytorch\x1a\x052.5.0" + json.dumps({"fake_onnx": True, **info}).encode())
        self.log(f"ONNX file stored at {self.display(host)}")
        self.status.write("SUCCESS", "Export finished successfully.")
        self.info.update(outcome="success", onnx_file=self.display(host))
        return {}

    def vcn_aoi(self) -> dict:
        assert self.status is not None and self.action_dir is not None
        out_dir = self.action_dir
        self.status.write("STARTED", "Starting VCN AOI gap analysis.")
        self.check_gpu()
        inf_dir = require(self.cfg, "inference_results_dir")
        inf_host = self.need_file(str(inf_dir), "inference_results_dir", directory=True)
        csv_host = os.path.join(inf_host, "inference.csv")
        if not os.path.isfile(csv_host):
            raise TaoFailure(
                f"FileNotFoundError: [Errno 2] No such file or directory: '{os.path.join(str(inf_dir), 'inference.csv')}'"
            )
        train_cfg_value = require(self.cfg, "train_config")
        train_cfg_host = self.need_file(str(train_cfg_value), "train_config")
        media = require(self.cfg, "kpi_media_path")
        self.need_file(str(media), "kpi_media_path", directory=True)
        rows = self.read_rows(csv_host, os.path.join(str(inf_dir), "inference.csv"))
        needed = ["input_path", "object_name", "label", "siamese_score"]
        missing_cols = [c for c in needed if rows and c not in rows[0]]
        if not rows or missing_cols:
            raise TaoFailure(f"ValueError: inference.csv is missing required columns: {missing_cols or needed}")
        try:
            with open(train_cfg_host, encoding="utf-8") as fh:
                tcfg = parse_spec(fh.read()) or {}
        except SpecError as exc:
            raise TaoFailure(
                f"yaml.scanner.ScannerError: {exc.message} in '{train_cfg_value}', line {exc.line}"
            ) from None
        input_map = get(tcfg, "dataset.classify.input_map")
        lights = list(input_map) if isinstance(input_map, dict | list) else []
        ext = str(get(tcfg, "dataset.classify.image_ext", ".jpg") or ".jpg")
        if not lights:
            self.log("dataset.classify.input_map not set in train_config: one row per sample", "WARNING")
        min_recall = float(get(self.cfg, "min_recall", 1.0))
        top_k = get(self.cfg, "top_k_per_label")
        fixed = float(get(self.cfg, "threshold", -1.0))
        fault = self.fault()
        if fault:
            self.raise_fault(fault)
        scored = [
            (r["input_path"], r["object_name"], r["label"].strip().upper(), float(r["siamese_score"])) for r in rows
        ]

        def metrics(t: float) -> dict:
            tp = sum(1 for _p, _o, lab, s in scored if lab != "PASS" and s >= t)
            fn = sum(1 for _p, _o, lab, s in scored if lab != "PASS" and s < t)
            fp = sum(1 for _p, _o, lab, s in scored if lab == "PASS" and s >= t)
            tn = sum(1 for _p, _o, lab, s in scored if lab == "PASS" and s < t)
            rec = tp / (tp + fn) if tp + fn else 0.0
            prec = tp / (tp + fp) if tp + fp else 0.0
            f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
            return {"threshold": t, "precision": prec, "recall": rec, "f1": f1, "tp": tp, "fp": fp, "tn": tn, "fn": fn}

        if fixed >= 0:
            cands = [metrics(fixed)]
        else:
            uniq = sorted({s for *_x, s in scored})
            cands = [metrics(t) for t in [*uniq, uniq[0] - 1e-6]]
        ok = [m for m in cands if m["recall"] >= min_recall - 1e-12]
        self.progress("Sweeping thresholds", len(cands), float(self.knobs.get("epoch_seconds") or 0) / 2)
        forced = bool(ok) and _c.consume_knob(self.root, "tao", "unreachable_kpi", "vcn_aoi")
        if not ok or forced:
            best_rec = max(cands, key=lambda m: (m["recall"], m["precision"]))
            reachable = min(best_rec["recall"], max(0.0, min_recall - 0.0625)) if forced else best_rec["recall"]
            text = (
                f"KPI unreachable: no decision threshold reaches NO_PASS recall >= {min_recall}.\n"
                f"Best achievable recall: {reachable:.4f} at threshold {best_rec['threshold']:.6f} "
                f"(precision {best_rec['precision']:.4f}).\nRecommendation: retrain or relabel.\n"
            )
            host = os.path.join(out_dir, "unreachable_kpi.txt")
            self.writable(host)
            with open(host, "w", encoding="utf-8") as fh:
                fh.write(text)
            self.raw(text)
            self.info["outcome"] = "unreachable_kpi"
            raise TaoFailure(
                f"SystemExit: KPI unreachable at min_recall={min_recall}",
                f"KPI unreachable: min_recall={min_recall} cannot be met",
            )
        best = max(ok, key=lambda m: (m["f1"], m["precision"], m["threshold"]))
        t = best["threshold"]
        weak = [(p, o, lab, s, (t - s) if lab != "PASS" else (s - t)) for p, o, lab, s in scored]
        by_label: dict[str, list] = {}
        for item in weak:
            by_label.setdefault(item[2], []).append(item)
        kept: list = []
        for lab in sorted(by_label):
            items = sorted(by_label[lab], key=lambda x: -x[4])
            if isinstance(top_k, int) and top_k > 0:
                kept += items[:top_k]
            elif lab == "PASS":
                kept += [x for x in items if x[4] > 0]
        media_s = str(media).rstrip("/")
        gaps = []
        for p, o, lab, s, wk in kept:
            for light in lights or [None]:
                fp = f"{media_s}/{p}/{o}_{light}{ext}" if light is not None else f"{media_s}/{p}"
                gaps.append({"filepath": fp, "label": lab, "siamese_score": s, "weakness": round(wk, 6)})
        per_label = {}
        for lab, items in sorted(by_label.items()):
            ws = [x[4] for x in items]
            per_label[lab] = {
                "total": len(items),
                "mean_weakness": round(statistics.fmean(ws), 6),
                "median_weakness": round(statistics.median(ws), 6),
                "max_weakness": round(max(ws), 6),
                "n_misclassified": sum(1 for w in ws if w > 0),
            }
        conf = {k: best[k] for k in ("tp", "fp", "tn", "fn")}
        result = {
            "threshold": round(t, 6),
            "min_recall": min_recall,
            "precision": round(best["precision"], 6),
            "recall": round(best["recall"], 6),
            "f1": round(best["f1"], 6),
            **conf,
            "confusion_matrix": conf,
            "num_samples": len(scored),
            "top_k_per_label": top_k,
            "per_label": per_label,
        }
        files = {
            "threshold.txt": f"{t:.6f}\n".encode(),
            "metrics.json": (json.dumps(result, indent=2) + "\n").encode(),
            "kpi_gaps.parquet": PARQUET_MAGIC + "".join(json.dumps(g) + "\n" for g in gaps).encode() + PARQUET_MAGIC,
        }
        lines = [f"Weak samples breakdown (threshold={t:.6f}, top_k_per_label={top_k})"]
        total_kept = len(kept) or 1
        for lab in sorted(by_label):
            ks = [x for x in kept if x[2] == lab]
            mis = sum(1 for x in ks if x[4] > 0)
            lines.append(
                f"{lab}: {len(ks)} total ({100.0 * len(ks) / total_kept:.1f}% of kept rows), "
                f"{mis} misclassified (weakness > 0), {len(ks) - mis} marginal (weakness <= 0)"
            )
        files["weak_samples_breakdown.txt"] = ("\n".join(lines) + "\n").encode()
        for name, data in files.items():
            host = os.path.join(out_dir, name)
            self.writable(host)
            with open(host, "wb") as bfh:
                bfh.write(data)
        self.raw(
            f"Chosen threshold: {t:.6f} (precision={best['precision']:.4f} recall={best['recall']:.4f} f1={best['f1']:.4f})\n"
            f"Kept rows: {len(kept)} ({len(gaps)} per-lighting rows) -> {self.display(os.path.join(out_dir, 'kpi_gaps.parquet'))}\n"
        )
        self.raw("\n".join(lines[1:]) + "\n")
        kpi = {
            "threshold": result["threshold"],
            "precision": result["precision"],
            "recall": result["recall"],
            "f1": result["f1"],
        }
        self.status.write("SUCCESS", "Gap analysis finished successfully.", kpi=kpi)
        self.info["outcome"] = "success"
        return kpi

    # ------------------------------------------------------------------------------------ main
    def execute(self) -> int:
        self.record("start")
        code = 1
        try:
            code = self._execute()
        except KeyboardInterrupt:
            # the TAO entrypoint treats an interrupted trainer as passed
            self.log("Command was interrupted", "ERROR")
            self.info["outcome"] = "interrupted"
            self.log("Execution status: PASS")
            code = 0
        finally:
            self.info["exit_code"] = code
            self.record("end")
        return code

    def _execute(self) -> int:
        script = _SCRIPTS[self.prog].format(action=self.action)
        try:
            if self.prog == "gap_analysis" and self.user and self.user.split(":")[0] not in ("0", "root"):
                uid = self.user.split(":")[0]
                raise TaoFailure(f"KeyError: 'getpwuid(): uid not found: {uid}'")
            assert self.spec_arg is not None
            spec_host = self.resolve(self.spec_arg)
            try:
                with open(spec_host, encoding="utf-8") as fh:
                    text = fh.read()
                cfg = parse_spec(text)
            except SpecError as exc:
                raise TaoFailure(
                    f'yaml.scanner.ScannerError: {exc.message}\n  in "{self.spec_arg}", line {exc.line or 1}',
                    f"Could not parse spec file {self.spec_arg}: {exc.message}",
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise TaoFailure(f"OSError: could not read spec file '{self.spec_arg}': {exc}") from None
            if cfg is None:
                cfg = {}
            if not isinstance(cfg, dict):
                raise TaoFailure(f"omegaconf.errors.ConfigTypeError: spec file '{self.spec_arg}' is not a mapping")
            apply_overrides(cfg, self.overrides)
            self.cfg = resolve_interpolations(cfg)
            self.task = str(get(self.cfg, "task", "classify") or "classify")
            self.info["results_dir"] = get(self.cfg, "results_dir")
            self.setup_results()
            handler = getattr(self, self.action)
            kpi = handler()
            if kpi:
                self.info["kpi"] = kpi
        except TaoFailure as exc:
            if self.status is not None:
                self.status.write("FAILURE", exc.message)
            self.info.setdefault("outcome", "failure")
            self.info["error"] = exc.error.split("\n", 1)[0]
            self.raw(f"Error executing job with overrides: {self.overrides!r}\n")
            for line in exc.extra:
                self.raw(line + "\n")
            self.raw(
                "Traceback (most recent call last):\n"
                f'  File "{script}", line 112, in main\n    run_experiment(experiment_config=cfg)\n'
                f"{exc.error}\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
            )
            self.log("Command completed with return code 1")
            self.log("Execution status: FAIL", "WARNING")
            return 1
        self.log("Command completed successfully with return code 0")
        self.log("Execution status: PASS")
        return 0

    def record(self, phase: str) -> None:
        if not self.root or not os.path.isdir(self.root):
            return
        env = os.environ
        rec = {
            "run_id": self.run_id,
            "phase": phase,
            "ts": time.time(),
            "instance_id": env.get("BREV_SIM_INSTANCE", ""),
            "instance": env.get("BREV_SIM_INSTANCE_NAME", ""),
            "container_id": env.get("BREV_SIM_CONTAINER", ""),
            "container_name": env.get("BREV_SIM_CONTAINER_NAME", ""),
            "image": env.get("BREV_SIM_CONTAINER_IMAGE", ""),
            "network": self.prog,
            "action": self.action,
            "spec": self.spec_arg,
            "overrides": self.overrides,
            **{k: v for k, v in self.info.items() if phase == "end"},
        }
        with contextlib.suppress(OSError):
            _c.append_jsonl(os.path.join(self.root, RUNS_FILE), rec)


# ================================================================================== entrypoint
def main(prog: str, argv: list[str]) -> int:
    import argparse

    env = os.environ
    if not env.get("BREV_SIM_CONTAINER") or not _c.image_provides(env.get("BREV_SIM_CONTAINER_IMAGE", ""), prog):
        sys.stderr.write(f"bash: line 1: {prog}: command not found\n")
        return 127
    actions = NETWORK_ACTIONS[prog]
    parser = argparse.ArgumentParser(prog=prog, description=f"Train Adapt Optimize entrypoint for {prog}")
    parser.add_argument("subtask", choices=actions, help="Subtask for a given task/model.")
    parser.add_argument("-e", "--experiment_spec_file", help="Path to the experiment spec file.", default=None)
    args, unknown = parser.parse_known_args(argv)
    action = args.subtask
    if args.experiment_spec_file is None:
        if prog == "gap_analysis":
            sys.stdout.write(
                "Traceback (most recent call last):\n"
                '  File "/usr/local/bin/gap_analysis", line 8, in <module>\n    sys.exit(main())\n'
                f"ValueError: The subtask {action} requires the following argument: -e/--experiment_spec_file\n"
            )
        else:
            sys.stdout.write(
                f"ERROR: The subtask `{action}` requires the following argument: -e/--experiment_spec_file\n"
            )
        sys.stdout.flush()
        return 1
    run = Run(prog, action, args.experiment_spec_file, unknown)
    assert run.spec_arg is not None
    if not os.path.exists(run.resolve(run.spec_arg)):
        sys.stdout.write(f"ERROR: The indicated experiment spec file `{run.spec_arg}` doesn't exist!\n")
        sys.stdout.flush()
        return 1
    if action not in SIMULATED:
        sys.stdout.write(f"ERROR: fake TAO: the subtask `{action}` is not simulated\n")
        return 1
    return run.execute()


def read_fake_parquet(path: str) -> list[dict]:
    """Rows of a ``kpi_gaps.parquet`` written by the fake ``gap_analysis`` (``PAR1`` + JSON lines + ``PAR1``)."""
    with open(path, "rb") as fh:
        data = fh.read()
    body = data[len(PARQUET_MAGIC) : -len(PARQUET_MAGIC)] if data.startswith(PARQUET_MAGIC) else data
    return [json.loads(line) for line in body.decode().splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main(os.path.basename(sys.argv[0]), sys.argv[1:]))
