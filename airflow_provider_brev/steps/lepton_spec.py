"""A Lepton step's parameters, checked once and frozen (what :class:`~.lepton.LeptonJobCompute` runs).

:func:`lepton_step_spec` turns a Lepton operator's rendered parameters into a :class:`LeptonStepSpec` or raises
:class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` naming the parameter, before any API call. Its parts:
the job's platform settings (:class:`~airflow_provider_brev.core.lepton.spec.LeptonJobSpec`), how it is followed
(:class:`LeptonFollowSpec`: the settings every compute shares, :func:`~.spec.following`) and its data (a Brev step's
:class:`~.spec.DataSpec`, with directories below the job's working directory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import deferral_settle_seconds
from airflow_provider_brev.core.lepton.agent import job_directory
from airflow_provider_brev.core.lepton.follower import LeptonFollowPolicy, check_ttl
from airflow_provider_brev.core.lepton.pricing import shape_prices
from airflow_provider_brev.core.lepton.spec import LeptonJobSpec, lepton_job_spec
from airflow_provider_brev.core.staging.manifest import validate_inputs, validate_outputs
from airflow_provider_brev.steps.spec import DataSpec, data_spec, following

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True)
class LeptonFollowSpec:
    """How a Lepton job is followed.

    :param deferrable: follow it from the triggerer.
    :param timeout: seconds for the whole job from its submission (``None``: no limit); then it is stopped.
    :param poll_interval: seconds between polls.
    :param max_poll_failures: consecutive transient failures tolerated.
    :param on_kill_action: ``kill`` (stop) the job when the task is killed, or ``keep`` it.
    """

    deferrable: bool
    timeout: float | None
    poll_interval: float
    max_poll_failures: int
    on_kill_action: str

    def policy(self, deadline: float | None, queue_timeout: float | None) -> LeptonFollowPolicy:
        return LeptonFollowPolicy(
            poll_interval=self.poll_interval,
            max_poll_failures=self.max_poll_failures,
            deadline=deadline,
            queue_timeout=queue_timeout,
        )


@dataclass(frozen=True)
class LeptonStepSpec:
    """Everything the Lepton compute needs besides the workload.

    :param job: the job's platform settings.
    :param follow: how it is followed.
    :param data: its inputs and outputs (directories below the job's working directory).
    :param shape_prices: the step's prices by resource shape (US dollars per hour) for its cost estimate.
    """

    job: LeptonJobSpec
    follow: LeptonFollowSpec
    data: DataSpec
    shape_prices: dict[str, float] = field(default_factory=dict)


def lepton_step_spec(params: Mapping[str, Any], *, deferrable_default: bool) -> LeptonStepSpec:
    """A Lepton operator's rendered parameters, checked and frozen: the data as a Brev step's
    (:func:`~.spec.data_spec`), its directories below the job's working directory; a ``ttl_seconds_after_finished``
    below what following the job needs (:func:`~airflow_provider_brev.core.lepton.follower.ttl_floor`) is refused."""
    data = data_spec(params)
    for pair in validate_inputs(data.inputs):
        job_directory("inputs", pair.directory)
    for pair in validate_outputs(data.outputs):
        job_directory("outputs", pair.directory)
    job = lepton_job_spec(params)
    follow = LeptonFollowSpec(**following(params, deferrable_default=deferrable_default))
    settle = deferral_settle_seconds() if follow.deferrable else 0.0
    check_ttl(job.ttl_seconds_after_finished, poll_interval=follow.poll_interval, deferral_settle=settle)
    prices = shape_prices("shape_prices", params.get("shape_prices"))
    return LeptonStepSpec(job=job, follow=follow, data=data, shape_prices=prices)
