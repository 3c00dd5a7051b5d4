"""Sensors for NVIDIA Brev."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import PokeReturnValue

from airflow_provider_brev._compat import (
    AirflowRescheduleException,
    conf,
    default_deferrable,
    deferral_settle_seconds,
)
from airflow_provider_brev.core.instances.readiness import DEFAULT_READY_TIMEOUT
from airflow_provider_brev.core.validation import instance_name
from airflow_provider_brev.core.values import bool_value, conn_id, duration_seconds, optional
from airflow_provider_brev.cost.meter import CostMeter
from airflow_provider_brev.exceptions import BrevInstanceFailedError, BrevTimeoutError
from airflow_provider_brev.sensors.base import BrevBaseSensor
from airflow_provider_brev.steps.metering import task_meter
from airflow_provider_brev.utils.events import EVENT_SUCCESS, EVENT_TIMEOUT, raise_for_error_event, validate_event
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.task_memory import TaskMemory

if TYPE_CHECKING:
    from airflow.sdk import Context


class BrevReadySensor(BrevBaseSensor):
    """Wait until a Brev instance is really usable, not just ``RUNNING``.

    Readiness is layered: status ``RUNNING`` → build ``COMPLETED`` / shell ``READY`` → an exec probe that must
    echo back a random nonce → optionally ``docker info``. Cheap status checks run first; the probe only
    runs once the status is good. The sensor fails fast (with Brev's status) when the instance is in
    ``FAILURE``, ``DELETING``, stopped, or vanished.

    Works in ``poke`` and ``reschedule`` modes and deferrable (the default follows Airflow's
    ``[operators] default_deferrable``). Deferred, the trigger enforces an absolute deadline, because
    Airflow 3.3 does not apply ``execution_timeout`` to deferrals.

    Every parameter is checked at the start of ``execute``, before any ``brev`` call: a bad value (an invalid
    name, a NaN or infinite ``timeout``, a zero ``poke_interval``) fails the task at once, without a retry, with
    :class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` naming the parameter.

    :param instance_name: the instance to wait for (templated; e.g. ``create.output``).
    :param require_docker: also require ``docker info`` to succeed (container work such as TAO; templated).
    :param deferrable: wait in the triggerer, holding no worker slot (templated).
    :param poke_interval: seconds between checks (default 1: readiness is noticed within about a second).
    :param timeout: total seconds to wait (default 20 minutes, sized for GPU cold starts).
    """

    template_fields = brev_template_fields("instance_name", "require_docker", "deferrable")

    def __init__(
        self,
        *,
        instance_name: str,
        require_docker: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: float = 1.0,
        timeout: float = DEFAULT_READY_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.instance_name = instance_name
        self.require_docker = require_docker
        self.deferrable = deferrable

    def _checked(self) -> tuple[str, bool, bool]:
        """Check every rendered parameter before any ``brev`` call; returns the instance name, ``require_docker`` and
        ``deferrable``, never writing them back. ``BaseSensorOperator``'s own ``poke_interval`` and ``timeout`` are
        normalised in place: Airflow's poke loop reads them from the task."""
        optional(conn_id, "brev_conn_id", self.brev_conn_id)
        name = instance_name("instance_name", self.instance_name)
        require_docker = bool_value("require_docker", self.require_docker, default=False)
        deferrable = bool_value("deferrable", self.deferrable, default=default_deferrable())
        self.poke_interval = duration_seconds("poke_interval", self.poke_interval)
        self.timeout = duration_seconds("timeout", self.timeout)
        return name, require_docker, deferrable

    def poke(self, context: Context) -> PokeReturnValue:
        name = instance_name("instance_name", self.instance_name)
        require_docker = bool_value("require_docker", self.require_docker, default=False)
        readiness = self.hook.check_readiness(name, require_docker=require_docker)
        self.log.info("%s", readiness.message)
        if readiness.terminal:
            raise BrevInstanceFailedError(readiness.message)
        return PokeReturnValue(is_done=readiness.ready, xcom_value=readiness.instance)

    def execute(self, context: Context) -> Any:
        name, require_docker, deferrable = self._checked()
        # the instance bills while it boots: the wait is its boot
        meter = task_meter(TaskMemory(context, self.log), self.log, self, name, "boot")
        waits_on = False  # the wait goes on in the triggerer, or in a rescheduled poke: the clock is kept
        try:
            if not deferrable:
                return super().execute(context)
            readiness = self.hook.check_readiness(name, require_docker=require_docker)
            if readiness.ready:  # check before deferring: no round trip when already ready
                self.log.info("%s", readiness.message)
                return readiness.instance
            if readiness.terminal:
                raise BrevInstanceFailedError(readiness.message)
            waits_on = True
            return self._defer_until_ready(name, require_docker)
        except AirflowRescheduleException:
            waits_on = True
            raise
        finally:
            if waits_on:
                meter.save()
            else:
                meter.report()

    def _defer_until_ready(self, name: str, require_docker: bool) -> None:
        from airflow_provider_brev.triggers.brev import BrevInstanceReadyTrigger  # triggerer-side code: lazy

        self.defer(
            trigger=BrevInstanceReadyTrigger(
                instance_name=name,
                brev_conn_id=self.brev_conn_id,
                deadline=time.time() + self.timeout,
                poll_interval=self.poke_interval,
                require_docker=require_docker,
                not_before=time.time() + deferral_settle_seconds(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        meter = CostMeter(TaskMemory(context, self.log), self.log)  # ready (or failed) at the event's ended_at;
        meter.resumed("boot", (event or {}).get("ended_at"))  # since then, Airflow was resuming the task
        meter.report()
        event = validate_event(event, "instance_name")
        if event["status"] == EVENT_SUCCESS:
            self.log.info("%s", event["message"])
            return event.get("instance")
        raise_for_error_event(event, "Waiting for the instance failed")
        if event["status"] == EVENT_TIMEOUT:
            raise BrevTimeoutError(event["message"])
        raise BrevInstanceFailedError(event["message"])
