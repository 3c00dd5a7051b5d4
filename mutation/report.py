"""The mutation report: per-module and overall scores, every survivor, the equivalents (Markdown and JSON).

A mutant is *killed* when a test failed (or its module no longer imported), *timeout* when its tests ran past
their time (an endless loop: counted as killed), *survived* when every selected test passed, *no-tests* when no
unit test executes it (counted as survived) and *error* when the harness failed (counted as survived). A mutant
listed in ``mutation/equivalent.txt`` (one line each: id, then the reason) is left out of the score:
score = (killed + timeout) / (all - equivalent).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mutation.execute import ERROR, KILLED, NO_TESTS, SURVIVED, TIMEOUT, Outcome
from mutation.operators import OPERATORS, SHELL_FUNCTIONS, Mutant, module_key

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence
    from pathlib import Path

EQUIVALENT = "equivalent"


@dataclass(frozen=True)
class Thresholds:
    overall: float = 0.90
    module: float = 0.85
    equivalent_share: float = 0.05


def load_equivalents(path: Path) -> dict[str, str]:
    """``id -> reason`` from the equivalents file (``#`` comments and blank lines ignored)."""
    if not path.exists():
        return {}
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        mutant_id, _, reason = line.partition(" ")
        if not reason.strip():
            raise SystemExit(f"{path}:{number}: an equivalent mutant needs a reason")
        found[mutant_id] = reason.strip()
    return found


@dataclass
class Row:
    total: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def scored(self) -> int:
        return self.total - self.counts[EQUIVALENT]

    @property
    def detected(self) -> int:
        return self.counts[KILLED] + self.counts[TIMEOUT]

    @property
    def score(self) -> float:
        return self.detected / self.scored if self.scored else 1.0


@dataclass
class Summary:
    full: bool
    mutants: list[Mutant]
    status: dict[str, str]
    equivalents: dict[str, str]
    modules: dict[str, Row]
    overall: Row
    stale_equivalents: list[str]

    def headline(self, wall: float) -> str:
        o = self.overall
        return (
            f"mutation: {o.detected}/{o.scored} non-equivalent mutants killed ({100 * o.score:.1f} %), "
            f"{o.counts[EQUIVALENT]} equivalent, {o.total} in all, {wall / 60:.1f} min"
        )

    def problems(self, limits: Thresholds) -> list[str]:
        found = []
        if self.overall.score < limits.overall:
            found.append(f"overall {100 * self.overall.score:.1f} % < {100 * limits.overall:.0f} %")
        for name, row in self.modules.items():
            if row.score < limits.module:
                found.append(f"{name} {100 * row.score:.1f} % < {100 * limits.module:.0f} %")
        share = self.overall.counts[EQUIVALENT] / max(1, self.overall.total)
        if share >= limits.equivalent_share:
            found.append(
                f"equivalents are {100 * share:.1f} % of all mutants (limit {100 * limits.equivalent_share:.0f} %)"
            )
        if self.overall.counts[ERROR]:
            found.append(f"{self.overall.counts[ERROR]} mutants ended in a harness error")
        if self.full and self.stale_equivalents:
            found.append(f"equivalent.txt names mutants that no longer exist: {', '.join(self.stale_equivalents)}")
        return found


def summarize(
    mutants: Sequence[Mutant], outcomes: Mapping[str, Outcome], equivalents: Mapping[str, str], *, full: bool
) -> Summary:
    modules: dict[str, Row] = {}
    overall = Row()
    status: dict[str, str] = {}
    for mutant in mutants:
        verdict = outcomes[mutant.id].status
        if mutant.id in equivalents and verdict != KILLED and verdict != TIMEOUT:
            verdict = EQUIVALENT
        status[mutant.id] = verdict
        row = modules.setdefault(module_key(mutant.path), Row())
        for target in (row, overall):
            target.total += 1
            target.counts[verdict] += 1
    known = {m.id for m in mutants}
    stale = sorted(set(equivalents) - known)
    return Summary(full, list(mutants), status, dict(equivalents), dict(sorted(modules.items())), overall, stale)


def _percent(row: Row) -> str:
    return f"{100 * row.score:.1f} %"


def write_reports(
    summary: Summary, args: argparse.Namespace, *, wall: float, jobs: int, tests_of: Mapping[str, Sequence[str]]
) -> None:
    """Write the Markdown report to ``args.report`` and the JSON one to ``args.json``."""
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(_markdown(summary, args, wall=wall, jobs=jobs), encoding="utf-8")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_json(summary, tests_of), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _selection(args: argparse.Namespace) -> str:
    parts = []
    if args.modules:
        parts.append(f"modules {args.modules}")
    if args.ids:
        parts.append("chosen ids")
    if args.sample is not None:
        parts.append(f"a sample of {args.sample} (seed {args.seed})")
    return ", ".join(parts) or "every mutant of every module of airflow_provider_brev/core/"


def _markdown(summary: Summary, args: argparse.Namespace, *, wall: float, jobs: int) -> str:
    o = summary.overall
    lines = [
        "# Mutation report: the pure core (`airflow_provider_brev/core/`)",
        "",
        "Written by `make mutation` (`python -m mutation`, see `mutation/README.md`); do not edit by hand.",
        "",
        f"- Selection: {_selection(args)}.",
        f"- **{o.detected} of {o.scored} non-equivalent mutants killed: {_percent(o)}**; "
        f"{o.counts[EQUIVALENT]} equivalent ({100 * o.counts[EQUIVALENT] / max(1, o.total):.1f} % of {o.total}).",
        f"- Wall time {wall / 60:.1f} min with {jobs} parallel jobs.",
        f"- Operators: {', '.join(OPERATORS)}. String literals and list elements are not mutated in the bash "
        f"script builders ({', '.join(f'{k}: {len(v)}' for k, v in sorted(SHELL_FUNCTIONS.items()))} functions or "
        "constants; see `mutation/operators.py`); nor docstrings, annotations, f-strings or error-message text.",
        "",
        "| module | mutants | killed | timeout | survived | no tests | error | equivalent | score |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in [*summary.modules.items(), ("**all**", o)]:
        c = row.counts
        lines.append(
            f"| {name} | {row.total} | {c[KILLED]} | {c[TIMEOUT]} | {c[SURVIVED]} | {c[NO_TESTS]} | {c[ERROR]} | "
            f"{c[EQUIVALENT]} | {_percent(row)} |"
        )
    survivors = [m for m in summary.mutants if summary.status[m.id] in (SURVIVED, NO_TESTS, ERROR)]
    lines += ["", f"## Survivors ({len(survivors)})", ""]
    if survivors:
        lines += ["| where | status | operator | mutation | id |", "|---|---|---|---|---|"]
        for m in survivors:
            lines.append(
                f"| {m.path}:{m.line} | {summary.status[m.id]} | {m.operator} | `{_cell(m.description)}` | `{m.id}` |"
            )
    else:
        lines.append("None.")
    equivalents = [m for m in summary.mutants if summary.status[m.id] == EQUIVALENT]
    lines += ["", f"## Equivalent mutants ({len(equivalents)}, listed in `mutation/equivalent.txt`)", ""]
    for m in equivalents:
        lines.append(f"- `{m.path}:{m.line}` `{_cell(m.description)}`: {summary.equivalents[m.id]}")
    if summary.stale_equivalents:
        lines += [
            "",
            "Stale entries in `mutation/equivalent.txt` (no such mutant): " + ", ".join(summary.stale_equivalents),
        ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def _json(summary: Summary, tests_of: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    def row(r: Row) -> dict[str, Any]:
        return {"mutants": r.total, "score": round(r.score, 4), **{k: r.counts[k] for k in sorted(r.counts)}}

    return {
        "overall": row(summary.overall),
        "modules": {name: row(r) for name, r in summary.modules.items()},
        "mutants": [
            {
                "id": m.id,
                "where": f"{m.path}:{m.line}",
                "operator": m.operator,
                "mutation": m.description,
                "status": summary.status[m.id],
                "tests": len(tests_of.get(m.id, ())),
            }
            for m in summary.mutants
        ],
    }
