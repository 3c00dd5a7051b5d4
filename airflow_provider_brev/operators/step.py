"""The bases of the GPU step operators: template fields, a spec, ``defer`` -- the step service does the rest.

:class:`StepOperatorBase` is what every step operator shares, on any compute: its rendered parameters, the spec and
workload it builds from them, and the step service (:mod:`airflow_provider_brev.steps.service`) it hands them to,
naming its compute (``compute_kind``). :class:`~airflow_provider_brev.operators.exec.BrevExecOperator` (a shell
command) and the TAO operators (:mod:`airflow_provider_brev.operators.tao`) are :class:`BrevStepOperator` subclasses
(compute ``brev``) that say what runs (their workload, :mod:`airflow_provider_brev.steps.workload`); the Lepton
operators (:mod:`airflow_provider_brev.operators.lepton`) are ``LeptonStepOperator`` subclasses (compute ``lepton``).
Where it runs, how it is followed, its data, its recovery and its cleanup are the step service's and its compute's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from airflow_provider_brev._compat import default_deferrable
from airflow_provider_brev.core.cost import unset_cap_warnings
from airflow_provider_brev.core.instances.recovery import DEFAULT_MAX_INSTANCE_RECOVERIES
from airflow_provider_brev.core.instances.release import RELEASE_DELETE
from airflow_provider_brev.core.jobs.remote import DEFAULT_MAX_BYTES
from airflow_provider_brev.core.staging.lineage import mapping_keys, mapping_values
from airflow_provider_brev.operators.base import BrevBaseOperator, ProviderBaseOperator
from airflow_provider_brev.utils.lineage import BrevLineageMixin
from airflow_provider_brev.utils.mixins import (
    FollowParams,
    InstanceParams,
    StepDataParams,
    brev_template_fields,
    parameter_names,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

    from airflow_provider_brev.steps.service import StepService
    from airflow_provider_brev.steps.spec import StepSpec


#: The parameters every step operator takes (what :func:`~airflow_provider_brev.steps.spec.step_spec` reads).
STEP_PARAMETERS = (
    "brev_conn_id",
    "instance_name",
    *parameter_names(InstanceParams),
    "log_chunk_bytes",
    "progress_regex",
    "checkpoint_regex",
    "max_instance_recoveries",
    "create_task_id",
    "max_run_cost",
    "release",
    *parameter_names(FollowParams),
    *parameter_names(StepDataParams),
)


class StepOperatorBase(FollowParams, StepDataParams, ProviderBaseOperator):
    """What every step operator shares, on any compute (see the module docstring): how its job is followed
    (:class:`~airflow_provider_brev.utils.mixins.FollowParams`) and its S3 data
    (:class:`~airflow_provider_brev.utils.mixins.StepDataParams`), their parameters declared once for Brev and Lepton.

    A subclass names its compute (``compute_kind``, a key of :data:`~airflow_provider_brev.steps.service.COMPUTES`)
    and its parameters (``step_parameters``, and ``workload_parameters`` for what its workload reads), and builds
    the spec (:meth:`build_spec`) and the workload (:meth:`workload`) from them; the rest is the step service's.
    """

    template_fields: Sequence[str] = (*FollowParams.template_fields, *StepDataParams.template_fields)
    #: The compute the step runs on (a key of :data:`~airflow_provider_brev.steps.service.COMPUTES`).
    compute_kind: str = ""
    #: The parameters every step of this kind takes (what :meth:`build_spec` reads).
    step_parameters: tuple[str, ...] = ()
    #: Parameters of the subclass that its workload reads.
    workload_parameters: tuple[str, ...] = ()
    _service: StepService | None = None

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        """Also render the keys of ``inputs`` (S3 URIs) and ``outputs`` (directories): Airflow renders values only."""
        from airflow_provider_brev.staging.step_data import render_keys  # when a task runs, not when a DAG is parsed

        super().render_template_fields(context, jinja_env)
        render_keys(self, context, jinja_env, "inputs", "outputs")

    def parameters(self) -> dict[str, Any]:
        """The rendered parameters by name (read, never changed: a resumed task builds the same spec)."""
        return {name: getattr(self, name) for name in (*self.step_parameters, *self.workload_parameters)}

    def build_spec(self, parameters: dict[str, Any]) -> Any:
        """The checked, frozen spec of the compute (subclasses), from the rendered ``parameters``."""
        raise NotImplementedError

    def workload(self, parameters: dict[str, Any]) -> Any:
        """What runs (subclasses), from the checked ``parameters``."""
        raise NotImplementedError

    def service(self, context: Context) -> StepService:
        """The step service of this try (every parameter checked first: bad input costs nothing)."""
        from airflow_provider_brev.steps.compute import StepTask  # the engine: imported when a task runs
        from airflow_provider_brev.steps.service import StepService
        from airflow_provider_brev.utils.task_memory import TaskMemory

        parameters = self.parameters()
        spec = self.build_spec(parameters)
        self._service = StepService(
            self.compute_kind,
            spec=spec,
            workload=self.workload(parameters),
            task=StepTask(self, self.log, TaskMemory(context, self.log), killed=lambda: self._killed),
            retries=getattr(self, "retries", None),
            defer=self._defer,
        )
        return self._service

    def _defer(self, trigger: BaseTrigger) -> NoReturn:
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute(self, context: Context) -> Any:
        try:
            service = self.service(context)
            for warning in unset_cap_warnings(self.parameters()):  # once per try, not again on resuming
                self.log.warning("%s", warning)
            return service.execute()
        finally:
            self.wait_for_kill_cleanup()

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        try:
            return self.service(context).execute_complete(event)
        finally:
            self.wait_for_kill_cleanup()

    def _cleanup_on_kill(self) -> None:
        """What the step's compute undoes on a kill (the service's ``on_kill``)."""
        if self._service is not None:
            self._service.on_kill()


class BrevStepOperator(BrevLineageMixin, InstanceParams, StepOperatorBase, BrevBaseOperator):
    """Base of the GPU step operators: a workload runs exactly once on a Brev instance, durably.

    **Where.** On an existing instance (``instance_name``, e.g. ``create.output``), which must be ready and -- when
    a create task recorded it -- the same instance (its Brev id): an instance someone created under a freed name is
    never used. Or, with ``gpu`` / ``instance_types`` instead, on an **ephemeral** instance the step creates (the
    create operator's idempotent rules), and deletes when it ends -- on success, failure, timeout and kill.

    **Exactly once.** The command runs as a detached job with a per-try job id, a launch guard and an atomic exit
    code. A retry re-attaches to an earlier try's job that still runs, or collects one that succeeded; one that
    failed or was lost is launched again. Remote output streams into the task log; the whole log is drained.

    **The step owns its data.** ``inputs`` sync incrementally before a launch; ``outputs`` upload every
    ``output_sync_interval`` while the command runs (and at a log line matching ``checkpoint_regex``) and when it
    ends, success or failure. **A lost instance is recovered**: re-created from its create task's record (or the
    ephemeral request), inputs re-synced, the command run again, within ``max_instance_recoveries``.

    **What it costs.** Every step pushes XCom ``brev_cost`` (instance type, ``price_per_hour``, seconds and dollars
    per phase -- boot, pull, stage, work, upload, idle -- and the total) and logs one line with it; an ephemeral
    step bills its boot, a step on a create task's instance its own time. ``max_price_per_hour`` (ephemeral) drops
    instance types above it; ``max_run_cost`` refuses a step whose estimate -- price x (``ready_timeout`` for an
    instance it creates + ``timeout``) -- exceeds it, before any ``brev create`` and any launch.

    **Lineage.** With the OpenLineage provider installed, the S3 prefixes of ``inputs`` are the task's input datasets
    and those of ``outputs`` its output datasets (:mod:`airflow_provider_brev.utils.lineage`).

    Every parameter is checked at the start of ``execute``, before any ``brev`` call
    (:mod:`airflow_provider_brev.steps.spec`); the flow is :class:`~airflow_provider_brev.steps.service.StepService`.

    Besides its own parameters below, a step takes those of every step, Brev or Lepton: how its job is followed
    (:class:`~airflow_provider_brev.utils.mixins.FollowParams`: ``timeout``, ``deferrable``, ``poll_interval``,
    ``max_poll_failures``, ``on_kill_action``), its S3 data (:class:`~airflow_provider_brev.utils.mixins.StepDataParams`:
    ``inputs``, ``outputs``, ``aws_conn_id``, ``output_sync_interval``) and its Brev connection
    (:class:`~airflow_provider_brev.utils.mixins.BrevConnectionParams`: ``brev_conn_id``).

    In ephemeral mode the instance it creates is described by the parameters of
    :class:`~airflow_provider_brev.utils.mixins.InstanceParams` (``gpu``, ``instance_types``, ``min_vram``,
    ``ready_timeout``, ``require_docker``, ``max_lifetime``, ``max_price_per_hour``, ``reuse_key``, ``max_idle``),
    as on :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator`; ``ready_timeout`` and
    ``require_docker`` also apply to an instance re-created after a loss.

    :param instance_name: the instance (templated). Omit it for ephemeral mode.
    :param log_chunk_bytes: maximum log bytes fetched per poll.
    :param progress_regex: a regex with two groups ``(done, total)``; matching lines are logged as a percentage.
    :param checkpoint_regex: a log line matching it makes an output sync due at once.
    :param max_instance_recoveries: how often this task instance may re-create its lost instance (all tries).
    :param create_task_id: the task that created the instance (default: the upstream record naming it).
    :param max_run_cost: the highest estimated cost of the step in dollars (templated; needs ``timeout``): price x
        (``ready_timeout`` for an ephemeral instance + ``timeout``). Exceeding it fails with
        :class:`~airflow_provider_brev.exceptions.BrevCostCapError` before any ``brev create`` and any launch.
    :param release: ephemeral mode: ``"delete"`` (default) or ``"stop"`` the instance when the step ends -- stopped
        only with a ``reuse_key``, a stoppable type and a break-even in favour (logged with both numbers).
    """

    compute_kind = "brev"
    step_parameters = STEP_PARAMETERS
    template_fields = brev_template_fields(
        *StepOperatorBase.template_fields,
        *InstanceParams.template_fields,
        "instance_name",
        "max_run_cost",
        "release",
    )

    def __init__(
        self,
        *,
        instance_name: str | None = None,
        log_chunk_bytes: int = DEFAULT_MAX_BYTES,
        progress_regex: str | None = None,
        checkpoint_regex: str | None = None,
        max_instance_recoveries: int = DEFAULT_MAX_INSTANCE_RECOVERIES,
        create_task_id: str | None = None,
        max_run_cost: float | str | None = None,
        release: str = RELEASE_DELETE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance_name = instance_name
        self.log_chunk_bytes = log_chunk_bytes
        self.progress_regex = progress_regex
        self.checkpoint_regex = checkpoint_regex
        self.max_instance_recoveries = max_instance_recoveries
        self.create_task_id = create_task_id
        self.max_run_cost = max_run_cost
        self.release = release

    def lineage_uris(self) -> tuple[list[Any], list[Any]]:
        """The S3 URIs of ``inputs`` (read) and ``outputs`` (written)."""
        return mapping_keys(self.inputs), mapping_values(self.outputs)

    def build_spec(self, parameters: dict[str, Any]) -> StepSpec:
        from airflow_provider_brev.steps.spec import step_spec

        return step_spec(parameters, deferrable_default=default_deferrable())
