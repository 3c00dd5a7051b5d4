"""The machinery of the system tests: where they run, what they create, what it costs, and the cleanup.

``BREV_SYSTEM_TEST`` selects the target. Unset (inside ``make test``): the bundled simulator, through the
``brev_sim`` fixture of :mod:`airflow_provider_brev.testing.pytest_plugin`. ``real`` (``make system-test``):
real Brev, with the ``brev_default`` connection from ``AIRFLOW_CONN_BREV_DEFAULT`` or, failing that,
``BREV_API_TOKEN`` (the hook's own fallback); the tests are skipped, loudly, when neither is set.

Every instance goes through :func:`provision`: it picks the cheapest instance type matching a small GPU filter
from ``brev search`` (through the hook), prints the estimated cost before anything is created, names the instance
with the owner prefix and an expiry (:func:`airflow_provider_brev.core.protocol.names.managed_instance_name`, so the janitor
sweeps it if everything else fails), and deletes it in a ``finally`` (after a failure or Ctrl-C too, with Ctrl-C
ignored until it is gone).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.protocol.names import managed_instance_name
from airflow_provider_brev.core.protocol.output import STATUS_DELETING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from airflow_provider_brev.core.protocol.output import InstanceTypeOffer
    from airflow_provider_brev.hooks.instances import BrevInstancesHook

MODE_VARIABLE = "BREV_SYSTEM_TEST"
REAL = os.environ.get(MODE_VARIABLE, "").strip().lower() == "real"
#: the whole test's budget: a real GPU cold start, the work and the deletion take minutes
TEST_TIMEOUT = 3600 if REAL else 300
#: the instance expires (for the janitor) this long after the test starts
INSTANCE_TTL = timedelta(hours=3)
#: minutes an instance is expected to live beyond its boot (work, deletion, slack) for the cost estimate
WORK_MINUTES = 10
#: boot time assumed when the catalog gives none (the CLI's own ``--max-boot-time`` default is 7 minutes)
DEFAULT_BOOT_SECONDS = 7 * 60
#: real mode refuses a type above this hourly price unless BREV_SYSTEM_MAX_PRICE says otherwise
DEFAULT_MAX_PRICE = 1.50
#: the slug of every system-test instance name (``afbrev-brev-system-<case>-<hash>-x<expiry>``)
NAME_SLUG = "brev_system"


class SystemTargetUnavailable(Exception):
    """Real mode cannot run here (no credentials, no affordable type); the message is the skip reason."""


@dataclass(frozen=True)
class GpuFilter:
    """The small GPU the tests ask for: one GPU, optionally of a named model, at most ``max_price`` per hour."""

    gpu_name: str | None = None
    gpu_count: int = 1
    max_price: float = DEFAULT_MAX_PRICE

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> GpuFilter:
        """``BREV_SYSTEM_GPU`` (a GPU name such as ``L4``) and ``BREV_SYSTEM_MAX_PRICE`` (USD per hour)."""
        price = environ.get("BREV_SYSTEM_MAX_PRICE", "").strip()
        return cls(
            gpu_name=environ.get("BREV_SYSTEM_GPU", "").strip() or None,
            max_price=float(price) if price else DEFAULT_MAX_PRICE,
        )

    def matches(self, offer: InstanceTypeOffer) -> bool:
        return bool(offer.gpu_name) and offer.gpu_count == self.gpu_count and offer.price_per_hour > 0


@dataclass(frozen=True)
class SystemTarget:
    """Where the tests run.

    :param label: ``simulator`` or ``real Brev`` (printed with the cost).
    :param connection: the ``AIRFLOW_CONN_BREV_DEFAULT`` value to set, or ``None`` to leave the environment
        alone (real mode: the user's connection or ``BREV_API_TOKEN``).
    :param poll_interval: seconds between ``brev ls`` calls while the cleanup waits for the deletion.
    :param deletion_timeout: how long the cleanup waits for the instance to disappear.
    """

    label: str
    connection: str | None
    gpu_filter: GpuFilter = field(default_factory=GpuFilter)
    poll_interval: float = 5.0
    deletion_timeout: float = 900.0

    def hook(self) -> BrevInstancesHook:
        from airflow_provider_brev.hooks.instances import BrevInstancesHook

        return BrevInstancesHook()


def simulator_target(sim: Any) -> SystemTarget:
    """The bundled simulator (``brev_sim`` fixture): the tests set its connection as ``brev_default``."""
    return SystemTarget(label="simulator", connection=sim.connection_json(), poll_interval=0.1, deletion_timeout=60.0)


def real_target(environ: Mapping[str, str]) -> SystemTarget:
    """Real Brev with the credentials in ``environ``, or :class:`SystemTargetUnavailable` saying what is missing.

    A ``brev_default`` connection (``AIRFLOW_CONN_BREV_DEFAULT``) wins over ``BREV_API_TOKEN``, exactly as in the
    hook; either way the environment is used as it is, so the tests run as a worker with those settings would.
    """
    if not (environ.get("AIRFLOW_CONN_BREV_DEFAULT", "").strip() or environ.get("BREV_API_TOKEN", "").strip()):
        raise SystemTargetUnavailable(
            f"REAL BREV SYSTEM TESTS NOT RUN: {MODE_VARIABLE}=real but neither BREV_API_TOKEN nor a brev_default "
            "connection (AIRFLOW_CONN_BREV_DEFAULT) is set. Export one of them to run them (billed)."
        )
    return SystemTarget(label="real Brev", connection=None, gpu_filter=GpuFilter.from_environment(environ))


def cheapest_offer(hook: BrevInstancesHook, gpu_filter: GpuFilter) -> InstanceTypeOffer:
    """The cheapest type from ``brev search`` that matches ``gpu_filter`` (fastest boot breaks ties)."""
    offers = [o for o in hook.search_instance_types(gpu_name=gpu_filter.gpu_name) if gpu_filter.matches(o)]
    if not offers:
        raise SystemTargetUnavailable(
            f"REAL BREV SYSTEM TESTS NOT RUN: `brev search` lists no {gpu_filter.gpu_count}-GPU instance type"
            + (f" with GPU {gpu_filter.gpu_name!r}" if gpu_filter.gpu_name else "")
            + " (BREV_SYSTEM_GPU)."
        )
    offer = min(offers, key=lambda o: (o.price_per_hour, boot_seconds(o), o.type))
    if offer.price_per_hour > gpu_filter.max_price:
        raise SystemTargetUnavailable(
            f"REAL BREV SYSTEM TESTS NOT RUN: the cheapest matching type, {offer.type}, costs "
            f"${offer.price_per_hour:.2f}/h, above BREV_SYSTEM_MAX_PRICE=${gpu_filter.max_price:.2f}/h."
        )
    return offer


def boot_seconds(offer: InstanceTypeOffer) -> float:
    return offer.boot_time_seconds if offer.boot_time_seconds is not None else DEFAULT_BOOT_SECONDS


def expected_minutes(offer: InstanceTypeOffer) -> int:
    """Boot time from the catalog plus :data:`WORK_MINUTES`, in whole minutes."""
    return math.ceil(boot_seconds(offer) / 60) + WORK_MINUTES


def cost_line(target: SystemTarget, case: str, offer: InstanceTypeOffer) -> str:
    """The line printed before anything is created: type, hourly price, expected minutes, estimated cost."""
    minutes = expected_minutes(offer)
    return (
        f"[brev system test] {case} on {target.label}: creating 1 x {offer.type} "
        f"({offer.gpu_count}x {offer.gpu_name}) at ${offer.price_per_hour:.2f}/h for about {minutes} min: "
        f"estimated cost ${offer.price_per_hour * minutes / 60:.2f}"
    )


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C (in the main thread) so a second one cannot interrupt a deletion half-way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class Cleanup:
    """What the ``finally`` of :func:`provision` found: ``absent`` (the DAG had deleted it) or ``deleted``."""

    name: str
    outcome: str | None = None

    def run(self, target: SystemTarget, announce: Callable[[str], None]) -> None:
        hook = target.hook()
        with sigint_ignored():
            try:
                instance = hook.get_instance(self.name)
                if instance is None:
                    self.outcome = "absent"
                    return
                announce(
                    f"[brev system test] deleting leftover instance {self.name} ({instance.status}) on "
                    f"{target.label}; Ctrl-C is ignored until it is gone"
                )
                if instance.status != STATUS_DELETING:
                    hook.delete_instance(self.name)
                hook.wait_until_gone(self.name, timeout=target.deletion_timeout, poll_interval=target.poll_interval)
                self.outcome = "deleted"
            except BaseException:
                announce(
                    f"[brev system test] COULD NOT CONFIRM THE DELETION OF {self.name} on {target.label}: "
                    f"delete it with `brev delete {self.name}` (the janitor would after its expiry)"
                )
                raise


@dataclass
class SystemInstance:
    """One instance a test may create: its name, the chosen type and the cleanup that follows."""

    name: str
    offer: InstanceTypeOffer
    cleanup: Cleanup

    @property
    def conf(self) -> dict[str, str]:
        """The ``run_conf`` of the system DAGs."""
        return {"instance_name": self.name, "instance_types": self.offer.type}


@contextlib.contextmanager
def provision(
    target: SystemTarget,
    case: str,
    *,
    announce: Callable[[str], None],
    offer: InstanceTypeOffer | None = None,
) -> Iterator[SystemInstance]:
    """Print the estimated cost, name the instance, always delete it afterwards.

    :param offer: the instance type (default: :func:`cheapest_offer` for the target's filter).
    """
    hook = target.hook()
    offer = offer or cheapest_offer(hook, target.gpu_filter)
    announce(cost_line(target, case, offer))
    name = managed_instance_name(
        dag_id=NAME_SLUG,
        run_id=uuid.uuid4().hex,
        task_id=case,
        expires_at=datetime.now(UTC) + INSTANCE_TTL,
        prefix=hook.config.name_prefix,
    )
    instance = SystemInstance(name=name, offer=offer, cleanup=Cleanup(name))
    try:
        yield instance
    finally:
        instance.cleanup.run(target, announce)


def same_gpu(catalog_name: str, smi_name: str) -> bool:
    """``L4`` (``brev search``) names the GPU ``nvidia-smi`` calls ``NVIDIA L4``."""
    squash = lambda text: text.lower().replace(" ", "").replace("-", "")  # noqa: E731
    return bool(catalog_name) and squash(catalog_name) in squash(smi_name)
