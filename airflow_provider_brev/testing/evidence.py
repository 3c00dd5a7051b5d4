"""What a run against the simulator did, measured one way for the integration tests (tests/helpers.py),
``make airflow-smoke`` and ``make deployment-test``.

* :func:`cli_calls`: the real invocations of one ``brev`` command in the simulator's call log (which instance a
  run created, started, deleted);
* :func:`pulled_bytes`: the image bytes the simulated instances' ``docker`` downloaded since a moment;
* :func:`started_warm`: a run started a stopped instance (same id, no ``brev create``) and pulled no image byte;
* :func:`downloads`: per input of a TAO step's S3 staging, how many objects it transferred and how many unchanged
  ones it skipped (from the step's XCom; a warm run transfers none);
* :func:`adds_up_to_the_bill`: a ``cost_report`` (``run_cost``) report puts the bill first, its table's total row
  is the bill, and its tasks' phases add up to it.

Each raises :class:`AssertionError` with the evidence when a check fails; none imports Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_provider_brev.testing.simulator import BrevSimulator


def cli_calls(sim: BrevSimulator, command: str) -> list[dict[str, Any]]:
    """Real invocations of ``brev <command>`` from the simulator's call log (``--help`` probes excluded)."""
    return [
        call
        for call in sim.calls()
        if next((a for a in call["argv"] if not a.startswith("-")), None) == command
        and not {"--help", "-h"} & set(call["argv"])
    ]


def pulled_bytes(sim: BrevSimulator, since: float = 0.0, *, instance: str | None = None) -> int:
    """Image bytes the instances' ``docker`` (``instance``'s alone: its name or id) downloaded since ``since``
    (epoch seconds)."""
    return sum(int(call.get("bytes") or 0) for call in sim.docker_calls(instance) if call["ts"] >= since)


def started_warm(sim: BrevSimulator, name: str, instance_id: str, since: float) -> None:
    """Since ``since``, instance ``name`` was started once (``brev start`` of ``instance_id``), never created
    again, kept its id, and its ``docker`` pulled no image byte (both images were on its kept disk)."""
    starts = [
        c["argv"][-1] for c in cli_calls(sim, "start") if c["ts"] >= since and c["argv"][-1] in (name, instance_id)
    ]
    _require(starts == [instance_id], f"brev start calls since the run began: {starts} (id {instance_id})")
    creates = [c["argv"] for c in cli_calls(sim, "create") if c["ts"] >= since and name in c["argv"]]
    _require(creates == [], f"created again: {creates}")
    _require((sim.instance(name) or {}).get("id") == instance_id, f"{name} is now {sim.instance(name)}")
    pulled = pulled_bytes(sim, since, instance=instance_id)
    _require(pulled == 0, f"{name} pulled {pulled} image bytes")


def downloads(step_result: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(transferred, skipped)`` objects per input a TAO step staged from S3 (its XCom's ``sync.inputs``)."""
    return [(int(entry["transferred"]), int(entry["skipped"])) for entry in step_result["sync"]["inputs"]]


def _require(ok: bool, evidence: object) -> None:
    if not ok:
        raise AssertionError(evidence)


def adds_up_to_the_bill(report: Mapping[str, Any]) -> None:
    """A ``run_cost`` report: every row's phases add up to its seconds, the rows to the bill (within a second:
    milliseconds of rounding per row), the table starts with the bill and its total row is the bill."""
    from airflow_provider_brev.core.bill import TABLE_PHASES
    from airflow_provider_brev.core.cost import money

    for row in report["tasks"]:
        _require(abs(sum(row["seconds"][p] for p in TABLE_PHASES) - row["total_seconds"]) < 0.01, row)
    billed = sum(entry["seconds"] for entry in report["bill"])
    _require(abs(report["total_seconds"] - billed) < 0.001, report["bill"])
    _require(abs(sum(row["total_seconds"] for row in report["tasks"]) - billed) < 1.0, report["table"])
    _require(abs(sum(report["seconds"].values()) - billed) < 1.0, report["table"])
    priced = [entry["dollars"] for entry in report["bill"] if entry["dollars"] is not None]
    _require(abs(report["total_dollars"] - sum(priced)) < 1e-6, report["bill"])
    total_rows = [line.split() for line in report["table"].splitlines() if line.startswith("total ")]
    _require(len(total_rows) == 1 and total_rows[0][-1] == money(report["total_dollars"]), report["table"])
    _require(report["table"].startswith(f"Bill: {money(report['total_dollars'])} for "), report["table"])
