"""Test helpers shared by ``core/instances/test_readiness_decisions.py``, ``hooks/test_listing.py`` (one definition,
imported by each)."""

from __future__ import annotations

from airflow_provider_brev.core.protocol.output import BrevInstance


def inst(status: str = "RUNNING", build: str = "COMPLETED", shell: str = "READY") -> BrevInstance:
    return BrevInstance(name="w-1", id="abc", status=status, build_status=build, shell_status=shell)
