"""The run evidence the pytest, smoke and deployment tests share (airflow_provider_brev/testing/evidence.py): what a
warm run pulled, started and staged, and whether a cost report is its bill. The simulator's records are given here
in the shape :class:`~airflow_provider_brev.testing.simulator.BrevSimulator` writes them."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_brev.core.bill import cost_table, run_cost
from airflow_provider_brev.core.cost import lifetime_cost, step_cost
from airflow_provider_brev.testing.evidence import (
    adds_up_to_the_bill,
    cli_calls,
    downloads,
    pulled_bytes,
    started_warm,
)


class Records:
    """The simulator's call logs and instances, as its readers return them."""

    def __init__(self, calls: list[dict[str, Any]], docker: list[dict[str, Any]], instances: dict[str, Any]) -> None:
        self._calls, self._docker, self._instances = calls, docker, instances

    def calls(self) -> list[dict[str, Any]]:
        return self._calls

    def docker_calls(self, instance: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self._docker if instance is None or instance in (r["instance"], r["instance_id"])]

    def instance(self, name: str) -> dict[str, Any] | None:
        return self._instances.get(name)


def pull(ts: float, nbytes: int, instance: str = "warm", instance_id: str = "id1") -> dict[str, Any]:
    return {"ts": ts, "bytes": nbytes, "instance": instance, "instance_id": instance_id, "argv": ["pull", "img"]}


def records(*, calls: list[list[str]], docker: list[dict[str, Any]], instance_id: str = "id1") -> Records:
    logged = [{"ts": float(10 * i), "argv": argv} for i, argv in enumerate(calls)]
    return Records(logged, docker, {"warm": {"id": instance_id, "status": "RUNNING"}})


def test_cli_calls_are_the_real_invocations_of_one_command():
    sim = records(calls=[["create", "warm"], ["start", "--help"], ["--json", "start", "id1"], ["ls"]], docker=[])
    assert [c["argv"] for c in cli_calls(sim, "start")] == [["--json", "start", "id1"]]  # type: ignore[arg-type]


def test_pulled_bytes_counts_since_a_moment_and_per_instance():
    sim = records(calls=[], docker=[pull(5, 3), pull(20, 4), pull(30, 5, "other", "id2")])
    assert pulled_bytes(sim) == 12  # type: ignore[arg-type]
    assert pulled_bytes(sim, 10) == 9  # type: ignore[arg-type]
    assert pulled_bytes(sim, 10, instance="id1") == pulled_bytes(sim, 10, instance="warm") == 4  # type: ignore[arg-type]


def test_a_warm_start_is_one_start_of_the_same_id_no_create_and_no_pull():
    warm = records(calls=[["create", "warm"], ["start", "id1"]], docker=[pull(0, 7)])
    started_warm(warm, "warm", "id1", since=5)  # type: ignore[arg-type]
    created = records(calls=[["create", "warm"], ["create", "warm"]], docker=[])
    with pytest.raises(AssertionError, match="brev start calls"):
        started_warm(created, "warm", "id1", since=5)  # type: ignore[arg-type]
    pulled = records(calls=[["create", "warm"], ["start", "id1"]], docker=[pull(15, 7)])
    with pytest.raises(AssertionError, match="pulled 7 image bytes"):
        started_warm(pulled, "warm", "id1", since=5)  # type: ignore[arg-type]
    replaced = records(calls=[["create", "warm"], ["start", "id1"]], docker=[], instance_id="id9")
    with pytest.raises(AssertionError, match="is now"):
        started_warm(replaced, "warm", "id1", since=5)  # type: ignore[arg-type]


def test_downloads_are_transferred_and_skipped_objects_per_input():
    result = {
        "sync": {"inputs": [{"transferred": 0, "skipped": 101, "prefix": "d/"}, {"transferred": 2, "skipped": 0}]}
    }
    assert downloads(result) == [(0, 101), (2, 0)]


def report() -> dict[str, Any]:
    """A run's report as ``cost_report`` returns it: ``run_cost`` with its ``table``."""
    created = step_cost(
        instance_name="i", instance_type="g6e.xlarge", price_per_hour=3.6, phases={"boot": 60.0},
        billed_seconds=60.0, window=(0.0, 60.0), spans=(("boot", 0.0, 60.0),),
    )  # fmt: skip
    life = lifetime_cost(
        instance_name="i", instance_type="g6e.xlarge", price_per_hour=3.6, created_at=0.0, ended_at=90.0,
        ended_by="delete",
    )  # fmt: skip
    out = run_cost([("create", created)], [("delete", life)])
    return {**out, "table": cost_table(out)}


def test_a_report_adds_up_to_the_bill_and_a_table_that_does_not_is_refused():
    good = report()
    adds_up_to_the_bill(good)
    lines = good["table"].splitlines()
    with pytest.raises(AssertionError):  # the bill not first
        adds_up_to_the_bill({**good, "table": "\n".join(lines[1:] + lines[:1])})
    short = [line.replace("$0.0900", "$0.0600") if line.startswith("total ") else line for line in lines]
    with pytest.raises(AssertionError):  # the total row is not the bill
        adds_up_to_the_bill({**good, "table": "\n".join(short)})
