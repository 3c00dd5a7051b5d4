"""Steps on DGX Cloud Lepton: a command, or one TAO action, as a Lepton job -- in the same DAG as Brev steps.

:class:`LeptonJobOperator` runs a shell command in a container image, :class:`LeptonTaoOperator` one TAO action (and
:class:`LeptonVisualChangeNetTrainOperator` the seed's GPU stage), each as one Lepton job on a resource shape (e.g.
``gpu.8xh100-sxm``) in the workspace of the ``lepton`` connection. ``inputs`` and ``outputs`` are exactly as on a
Brev step (S3 URI prefix -> directory, directory -> S3 URI prefix), the directories relative to the job's working
directory ``/workspace``: the job downloads its inputs and uploads its outputs (while it runs, every
``output_sync_interval``, and when it ends) with presigned requests the worker makes -- no AWS key reaches the job,
and the requests travel in a workspace secret the job references, never in its spec. The flow is
the step service's (:mod:`airflow_provider_brev.steps.service`) on the Lepton compute
(:class:`~airflow_provider_brev.steps.lepton.LeptonJobCompute`): one job per try with a deterministic name (a retry
re-attaches to a running job or collects a finished one; a failed one is submitted again), its log in the task log,
``queue_timeout`` and ``timeout`` enforced (the job is stopped), ``on_kill`` stops it, deferrable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import default_deferrable
from airflow_provider_brev.core.lepton.spec import DEFAULT_QUEUE_TIMEOUT, DEFAULT_TTL_SECONDS
from airflow_provider_brev.hooks.lepton import LeptonHook
from airflow_provider_brev.operators.step import StepOperatorBase
from airflow_provider_brev.utils.mixins import CommandParams, FollowParams, StepDataParams, TaoParams, parameter_names

if TYPE_CHECKING:
    from airflow_provider_brev.steps.lepton_spec import LeptonStepSpec
    from airflow_provider_brev.steps.lepton_workload import LeptonWorkload

#: The parameters every Lepton step operator takes (what :func:`~airflow_provider_brev.steps.lepton_spec.lepton_step_spec`
#: reads).
LEPTON_STEP_PARAMETERS = (
    "lepton_conn_id",
    "resource_shape",
    "node_groups",
    "priority",
    "can_preempt",
    "can_be_preempted",
    "image_pull_secrets",
    "secret_refs",
    "max_failure_retry",
    "ttl_seconds_after_finished",
    "queue_timeout",
    "shared_memory_size",
    "shape_prices",
    *parameter_names(FollowParams),
    *parameter_names(StepDataParams),
)


class LeptonStepOperator(StepOperatorBase):
    """Base of the Lepton step operators: a workload runs exactly once as a Lepton job, durably.

    Besides its own parameters below, a Lepton step takes those of every step, as on Brev: how its job is followed
    (:class:`~airflow_provider_brev.utils.mixins.FollowParams`: ``timeout`` -- from the job's submission --,
    ``deferrable``, ``poll_interval``, ``max_poll_failures``, ``on_kill_action``: ``kill`` stops the job) and its S3
    data (:class:`~airflow_provider_brev.utils.mixins.StepDataParams`: ``inputs`` and ``outputs`` with directories
    below ``/workspace``, ``aws_conn_id``, ``output_sync_interval``).

    :param lepton_conn_id: the Airflow connection of type ``lepton`` (workspace id, token, optional URL).
    :param resource_shape: the job's resource shape, e.g. ``gpu.8xh100-sxm`` (templated).
    :param node_groups: dedicated node groups the job may run on (templated).
    :param priority: ``low``/``mid``/``high``, ``1``-``9`` or a class like ``mid-4000`` (needs ``node_groups``).
    :param can_preempt: the job may preempt lower-priority jobs (node groups only).
    :param can_be_preempted: the job may be preempted by higher-priority ones (node groups only).
    :param image_pull_secrets: workspace registry secrets for a private image (e.g. nvcr.io).
    :param secret_refs: ``{ENV_NAME: workspace secret name}``: existing workspace secrets for the container.
    :param max_failure_retry: Lepton's own restarts of a failed container before the job fails (default 0: the
        task's ``retries`` decide).
    :param ttl_seconds_after_finished: how long Lepton keeps the ended job and its log (the step reads what it needs
        before: status and the log's end are in its result or its error).
    :param queue_timeout: seconds the job may wait for resources; then it is stopped and the task fails with
        :class:`~airflow_provider_brev.exceptions.LeptonResourcesUnavailableError` (``None``: no limit).
    :param shared_memory_size: ``/dev/shm`` in MiB.
    :param shape_prices: US dollars per hour by resource shape, for the step's cost estimate (templated; default:
        the ``lepton`` connection's extra ``shape_prices``, then the provider's default estimates -- Lepton reports
        no price, so ``brev_cost`` is always an estimate; :mod:`~airflow_provider_brev.core.lepton.pricing`).
    """

    template_fields: tuple[str, ...] = (
        "lepton_conn_id",
        "resource_shape",
        "node_groups",
        "priority",
        "image_pull_secrets",
        "secret_refs",
        *StepDataParams.template_fields,
        "shape_prices",
    )
    compute_kind = "lepton"
    step_parameters = LEPTON_STEP_PARAMETERS

    def __init__(
        self,
        *,
        lepton_conn_id: str = LeptonHook.default_conn_name,
        resource_shape: str,
        node_groups: list[str] | str | None = None,
        priority: str | int | None = None,
        can_preempt: bool | None = None,
        can_be_preempted: bool | None = None,
        image_pull_secrets: list[str] | str | None = None,
        secret_refs: dict[str, str] | None = None,
        max_failure_retry: int = 0,
        ttl_seconds_after_finished: int = DEFAULT_TTL_SECONDS,
        queue_timeout: float | None = DEFAULT_QUEUE_TIMEOUT,
        shared_memory_size: int | None = None,
        shape_prices: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lepton_conn_id = lepton_conn_id
        self.resource_shape = resource_shape
        self.node_groups = node_groups
        self.priority = priority
        self.can_preempt = can_preempt
        self.can_be_preempted = can_be_preempted
        self.image_pull_secrets = image_pull_secrets
        self.secret_refs = secret_refs
        self.max_failure_retry = max_failure_retry
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.queue_timeout = queue_timeout
        self.shared_memory_size = shared_memory_size
        self.shape_prices = shape_prices

    def build_spec(self, parameters: dict[str, Any]) -> LeptonStepSpec:
        from airflow_provider_brev.steps.lepton_spec import lepton_step_spec

        return lepton_step_spec(parameters, deferrable_default=default_deferrable())

    def workload(self, parameters: dict[str, Any]) -> LeptonWorkload:
        """What runs (subclasses), from the checked ``parameters``."""
        raise NotImplementedError


class LeptonJobOperator(CommandParams, LeptonStepOperator):
    """Run a shell command in a container image as one Lepton job, exactly once; its log in the task log.

    The result is ``{"exit_code", "last_line", "job", "state", "log_tail"}``, plus ``outputs`` and ``sync`` when the
    step declares data. The command is a :class:`~airflow_provider_brev.utils.mixins.CommandParams` (``command``,
    ``env``, ``secret_env``, ``cwd``, ``skip_on_exit_code``), as on
    :class:`~airflow_provider_brev.operators.exec.BrevExecOperator`.

    :param image: the container image, a full reference with a tag or digest (templated).
    :param kwargs: the command's parameters, and those of :class:`LeptonStepOperator` (``resource_shape``,
        ``inputs``, ``timeout`` ...).
    """

    template_fields = (*LeptonStepOperator.template_fields, "image", *CommandParams.template_fields)
    template_fields_renderers = CommandParams.template_fields_renderers
    workload_parameters = ("image", *parameter_names(CommandParams))

    def __init__(self, *, image: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.image = image

    def workload(self, parameters: dict[str, Any]) -> LeptonWorkload:
        from airflow_provider_brev.steps.lepton_workload import LeptonCommandWorkload, image_spec
        from airflow_provider_brev.steps.workload import command_spec

        return LeptonCommandWorkload(image_spec(parameters), command_spec(parameters))


#: Brev-only TAO parameters, fixed for a Lepton job (it is the container; its image comes with image_pull_secrets).
_TAO_ON_LEPTON: dict[str, Any] = {
    "shm_size": None,
    "ipc": None,
    "mounts": None,
    "ngc_conn_id": None,
    "input_paths": [],
    "instance_paths": [],
    "pull_timeout": 1800.0,
    "prefetch_images": [],
}


class LeptonTaoOperator(TaoParams, LeptonStepOperator):
    """Run one TAO action, ``<task> <action> -e <spec> key=value ...``, as a Lepton job in the TAO image.

    The spec is written below ``results_dir`` in the job, the action's results go to ``<results_dir>/<action>/``
    (put it in ``outputs``), and success is verified as on Brev: exit code 0 **and** a final ``SUCCESS`` record in
    ``status.json`` (and for ``train`` a new checkpoint); program faults fail without retry. Paths in the spec are
    container paths: the inputs are below ``/workspace``.

    Its parameters are the TAO action's (:class:`~airflow_provider_brev.utils.mixins.TaoParams`, as on
    :class:`~airflow_provider_brev.operators.tao.TaoOperator`: ``image``, ``task``, ``action``, ``spec`` ...,
    ``results_dir`` below ``/workspace``) and those of :class:`LeptonStepOperator`.
    """

    template_fields = (*LeptonStepOperator.template_fields, *TaoParams.template_fields)
    template_fields_renderers = TaoParams.template_fields_renderers
    workload_parameters = parameter_names(TaoParams)

    def workload(self, parameters: dict[str, Any]) -> LeptonWorkload:
        from airflow_provider_brev.steps.lepton_workload import LeptonTaoWorkload
        from airflow_provider_brev.steps.tao import tao_spec

        return LeptonTaoWorkload(tao_spec({**_TAO_ON_LEPTON, **parameters}))


class LeptonVisualChangeNetTrainOperator(LeptonTaoOperator):
    """Visual ChangeNet ``train`` as a Lepton job (the seed's GPU stage; requires a new checkpoint)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(task="visual_changenet", action="train", **kwargs)


__all__ = [
    "LeptonJobOperator",
    "LeptonStepOperator",
    "LeptonTaoOperator",
    "LeptonVisualChangeNetTrainOperator",
]
