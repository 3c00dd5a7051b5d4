"""Spec files (PyYAML), Hydra overrides and OmegaConf interpolation of the fake TAO entrypoints, their knobs
(:data:`DEFAULT_TAO_CONFIG`) and the fake parquet files they write."""

from __future__ import annotations

import json
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RUNS_FILE = "tao_runs.jsonl"
CKPT_MAGIC = b"FAKE-TAO-CHECKPOINT\n"
PARQUET_MAGIC = b"PAR1"
MISSING = "???"

#: knobs under ``config.json["tao"]``. Fault knobs take ``True`` (every run), an int (the next N runs),
#: an action name (``"train"``, ``"evaluate"``, ``"vcn_aoi"``) or a list of them.
DEFAULT_TAO_CONFIG: dict = {
    "epoch_seconds": 0.02,  # simulated time per training epoch (and per evaluate pass)
    "gap_analysis_seconds": None,  # simulated time of a gap analysis sweep (None: half of epoch_seconds)
    "silent_pass": False,  # train: exit 0, SUCCESS record, `Execution status: PASS`, no new checkpoint
    "no_success_record": False,  # exit as usual, but the final SUCCESS status.json record is never written
    "oom": False,  # torch.cuda.OutOfMemoryError at epoch `fail_at_epoch` (program fault)
    "cuda_assert": False,  # CUDA device-side assert (program fault)
    "infra_error": False,  # uncorrectable ECC error / Xid 48 (infrastructure fault)
    "killed": False,  # the process is SIGKILLed mid-epoch: no terminal status record, docker exits 137
    "fail_at_epoch": 0,  # epoch (0-based, clamped to the run's range) at which the faults above fire
    "unreachable_kpi": False,  # gap_analysis: no threshold meets min_recall -> unreachable_kpi.txt, exit 1
    "kpis": {},  # {"test_acc": 0.5} overrides matching KPI keys; {"evaluate": {...}} adds per action
    "require_shm": True,  # visual_changenet with dataloader workers needs --shm-size >= 1g or --ipc=host
    "check_images": True,  # dataset CSV rows (first 50) must name files under images_dir
    # a gate, not a fault: the next N runs of an action wait after epoch `hold_after_epoch` (0-based) until an
    # `instance_lost` fault takes their instance, at most `hold_seconds` (then they go on)
    "hold_runs": 0,
    "hold_after_epoch": -1,
    "hold_seconds": 600,
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


class SpecError(Exception):
    """A spec file or override value that is not valid YAML."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_spec(text: str) -> Any:
    """Parse a spec file (YAML, so JSON too) with PyYAML's safe loader; :class:`SpecError` on a syntax error."""
    import yaml  # only the fake TAO entrypoints parse specs (their launcher keeps site-packages)

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SpecError(str(getattr(exc, "problem", None) or exc), mark.line + 1 if mark else None) from None


def parse_inline(raw: str) -> Any:
    """A Hydra override value or ``oc.env`` default: one YAML flow node (``5``, ``[a, b]``, ``'x y'``)."""
    return parse_spec(raw)


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
                    return parse_inline(default)
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


def read_fake_parquet(path: str) -> list[dict]:
    """Rows of a ``kpi_gaps.parquet`` written by the fake ``gap_analysis`` (``PAR1`` + JSON lines + ``PAR1``)."""
    with open(path, "rb") as fh:
        data = fh.read()
    body = data[len(PARQUET_MAGIC) : -len(PARQUET_MAGIC)] if data.startswith(PARQUET_MAGIC) else data
    return [json.loads(line) for line in body.decode().splitlines() if line.strip()]
