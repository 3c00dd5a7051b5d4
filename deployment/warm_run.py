"""The flagship's warm second run, checked through the REST API and the Brev simulator by ``make airflow-smoke``
and ``make deployment-test``.

The flagship (``tao_visual_changenet_retrain``) is warm by default (``reuse_key``, ``release="stop"``): its first
run's teardown stops the instance, and a second trigger with the default params starts it again. What the checks
measure is :mod:`airflow_provider_brev.testing.evidence` (shared with the pytest test of the same promise,
tests/integration/test_warm_flagship.py); this module reads the runs' XComs through the REST API
(:class:`airflow_api.AirflowApi`) and waits on the simulator's state.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.testing.evidence import adds_up_to_the_bill, downloads, pulled_bytes, started_warm

if TYPE_CHECKING:
    from airflow_api import AirflowApi

    from airflow_provider_brev.testing.simulator import BrevSimulator

FLAGSHIP = "tao_visual_changenet_retrain"
#: The flagship's TAO steps, each staging the dataset from S3.
TAO_STEPS = ("gap_analysis", "train", "evaluate")
#: What each of the flagship's two images downloads on a cold pull (``BrevSimulator.set_docker(image_bytes=...)``;
#: the simulator's docker pulls at once): the warm run must download none of it.
IMAGE_BYTES = 3 * 10**9


def until_instance(sim: BrevSimulator, name: str, status: str, *, timeout: float) -> dict[str, Any]:
    """Until the simulator lists ``name`` with ``status`` (it runs in real time here); returns its record."""
    deadline = time.monotonic() + timeout
    while (instance := sim.instance(name)) is None or instance["status"] != status:
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} is not {status} after {timeout:.0f} s: {instance}")
        time.sleep(0.5)
    return instance


def kept_instance(api: AirflowApi, sim: BrevSimulator, run_id: str, *, timeout: float = 180.0) -> tuple[str, str]:
    """The instance the flagship's cold run ``run_id`` created (its ``create_instance`` XCom) once its teardown
    stopped it, having pulled both images: ``(name, id)``."""
    name = str(api.xcom(FLAGSHIP, run_id, "create_instance", native=True))
    instance_id = str(until_instance(sim, name, "STOPPED", timeout=timeout)["id"])
    cold = pulled_bytes(sim, instance=instance_id)
    if cold != 2 * IMAGE_BYTES:
        raise AssertionError(f"the cold run's {name} pulled {cold} image bytes, not both images")
    return name, instance_id


def check_warm_run(
    api: AirflowApi, sim: BrevSimulator, run_id: str, *, kept: tuple[str, str], since: float, objects: int
) -> str:
    """The flagship's run ``run_id`` (triggered at ``since``, epoch seconds) started the ``kept`` instance (name,
    id) without pulling an image byte, each TAO step downloaded none of the dataset's ``objects`` (all unchanged),
    and its cost report puts the bill first with a total equal to it."""
    name, instance_id = kept
    second = str(api.xcom(FLAGSHIP, run_id, "create_instance", native=True))
    if second != name:
        raise AssertionError(f"the second run used {second}, not the first run's {name}")
    started_warm(sim, name, instance_id, since)
    staged = {step: downloads(api.xcom(FLAGSHIP, run_id, step, native=True))[0] for step in TAO_STEPS}
    if any(got != (0, objects) for got in staged.values()):
        raise AssertionError(f"dataset (transferred, skipped) per step, of {objects} unchanged objects: {staged}")
    report = api.xcom(FLAGSHIP, run_id, "cost_report", native=True)
    adds_up_to_the_bill(report)
    return (
        f"started {name} (id {instance_id}), 0 image bytes pulled, 0 of {objects} unchanged dataset objects "
        f"downloaded per step; cost report begins {report['table'].splitlines()[0]!r}"
    )
