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

from airflow_provider_brev._compat import conf, default_deferrable
from airflow_provider_brev.core.lepton.spec import DEFAULT_QUEUE_TIMEOUT, DEFAULT_TTL_SECONDS
from airflow_provider_brev.hooks.lepton import LeptonHook
from airflow_provider_brev.operators.step import DEFAULT_OUTPUT_SYNC_INTERVAL, StepOperatorBase

if TYPE_CHECKING:
    from datetime import timedelta

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
    "timeout",
    "deferrable",
    "poll_interval",
    "max_poll_failures",
    "on_kill_action",
    "inputs",
    "outputs",
    "aws_conn_id",
    "output_sync_interval",
    "shape_prices",
)


class LeptonStepOperator(StepOperatorBase):
    """Base of the Lepton step operators: a workload runs exactly once as a Lepton job, durably.

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
    :param timeout: seconds (or timedelta) for the job from its submission: an absolute deadline, across deferrals.
    :param deferrable: follow the job from the triggerer, holding no worker slot.
    :param poll_interval: seconds between polls of the job's state and log.
    :param max_poll_failures: consecutive transient API failures tolerated while following.
    :param on_kill_action: ``kill`` (stop) the job when the task is killed (default) or ``keep`` it running.
    :param inputs: S3 URI prefix -> directory below ``/workspace`` (templated).
    :param outputs: directory below ``/workspace`` -> S3 URI prefix (templated).
    :param aws_conn_id: the Amazon connection that lists and presigns (its keys never reach the job).
    :param output_sync_interval: seconds between the job's output uploads while it runs.
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
        "inputs",
        "outputs",
        "aws_conn_id",
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
        timeout: float | timedelta | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        max_poll_failures: int = 30,
        on_kill_action: str = "kill",
        inputs: dict[str, str] | None = None,
        outputs: dict[str, str] | None = None,
        aws_conn_id: str | None = "aws_default",
        output_sync_interval: float | timedelta = DEFAULT_OUTPUT_SYNC_INTERVAL,
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
        self.timeout = timeout
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.max_poll_failures = max_poll_failures
        self.on_kill_action = on_kill_action
        self.inputs = inputs
        self.outputs = outputs
        self.aws_conn_id = aws_conn_id
        self.output_sync_interval = output_sync_interval
        self.shape_prices = shape_prices

    def build_spec(self, parameters: dict[str, Any]) -> LeptonStepSpec:
        from airflow_provider_brev.steps.lepton_spec import lepton_step_spec

        return lepton_step_spec(parameters, deferrable_default=default_deferrable())

    def workload(self, parameters: dict[str, Any]) -> LeptonWorkload:
        """What runs (subclasses), from the checked ``parameters``."""
        raise NotImplementedError


class LeptonJobOperator(LeptonStepOperator):
    """Run a shell command in a container image as one Lepton job, exactly once; its log in the task log.

    The result is ``{"exit_code", "last_line", "job", "state", "log_tail"}``, plus ``outputs`` and ``sync`` when the
    step declares data.

    :param image: the container image, a full reference with a tag or digest (templated).
    :param command: the shell command (templated), run with ``bash -c`` in ``/workspace``.
    :param env: plain environment variables (in the job spec: not for secrets).
    :param secret_env: secret environment variables (templated): in the job's plan (a workspace secret), never in
        the job spec; printed, they are redacted from the job's output as on Brev (the value, each line of a
        multi-line value: :mod:`airflow_provider_brev.core.secrets`).
    :param cwd: working directory of the command (relative to ``/workspace``, or absolute).
    :param skip_on_exit_code: exit code(s) that mark the task skipped instead of failed.
    :param kwargs: the parameters of :class:`LeptonStepOperator` (``resource_shape``, ``inputs``, ``timeout`` ...).
    """

    template_fields = (*LeptonStepOperator.template_fields, "image", "command", "env", "secret_env", "cwd")
    template_fields_renderers = {"command": "bash", "env": "json"}
    workload_parameters = ("image", "command", "env", "secret_env", "cwd", "skip_on_exit_code")

    def __init__(
        self,
        *,
        image: str,
        command: str,
        env: dict[str, str] | None = None,
        secret_env: dict[str, str] | None = None,
        cwd: str | None = None,
        skip_on_exit_code: int | list[int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image = image
        self.command = command
        self.env = env
        self.secret_env = secret_env
        self.cwd = cwd
        self.skip_on_exit_code = skip_on_exit_code

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


class LeptonTaoOperator(LeptonStepOperator):
    """Run one TAO action, ``<task> <action> -e <spec> key=value ...``, as a Lepton job in the TAO image.

    The spec is written below ``results_dir`` in the job, the action's results go to ``<results_dir>/<action>/``
    (put it in ``outputs``), and success is verified as on Brev: exit code 0 **and** a final ``SUCCESS`` record in
    ``status.json`` (and for ``train`` a new checkpoint); program faults fail without retry. Paths in the spec are
    container paths: the inputs are below ``/workspace``.

    :param image: the TAO image with an explicit tag (e.g. ``nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt``); an
        nvcr.io image needs ``image_pull_secrets`` naming the workspace's NGC registry secret.
    :param task: the TAO network / entrypoint (``visual_changenet``, ``gap_analysis`` ...).
    :param action: ``train``, ``evaluate``, ``inference``, ``export`` ...
    :param spec: the experiment spec as a dict (templated), or ``spec_file`` (YAML on the worker) or
        ``spec_s3_uri`` (YAML in S3).
    :param overrides: ``key=value`` overrides (dotted keys).
    :param results_dir: the results directory below ``/workspace``.
    :param num_gpus: ``"all"`` (the shape's) or a number (``<action>.num_gpus``).
    :param container_env: plain environment variables.
    :param container_secret_env: secret environment variables (as ``secret_env`` of :class:`LeptonJobOperator`).
    :param hf_conn_id: connection of the Hugging Face token, needed only when the spec references Hugging Face.
    :param s3_inputs: S3 URIs that must exist before anything is submitted.
    :param require_new_checkpoint: require a checkpoint written by this run (default: ``action == "train"``).
    :param kwargs: the parameters of :class:`LeptonStepOperator`.
    """

    template_fields = (
        *LeptonStepOperator.template_fields,
        "image",
        "spec",
        "spec_file",
        "spec_s3_uri",
        "overrides",
        "results_dir",
        "container_env",
        "container_secret_env",
        "s3_inputs",
        "hf_conn_id",
    )
    template_fields_renderers = {"spec": "json", "overrides": "json"}
    workload_parameters = (
        "image",
        "task",
        "action",
        "spec",
        "spec_file",
        "spec_s3_uri",
        "overrides",
        "results_dir",
        "num_gpus",
        "container_env",
        "container_secret_env",
        "hf_conn_id",
        "s3_inputs",
        "require_new_checkpoint",
    )

    def __init__(
        self,
        *,
        image: str,
        task: str,
        action: str,
        spec: dict[str, Any] | None = None,
        spec_file: str | None = None,
        spec_s3_uri: str | None = None,
        overrides: dict[str, Any] | None = None,
        results_dir: str = "tao-results",
        num_gpus: int | str = "all",
        container_env: dict[str, str] | None = None,
        container_secret_env: dict[str, str] | None = None,
        hf_conn_id: str | None = "hf_default",
        s3_inputs: list[str] | None = None,
        require_new_checkpoint: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image = image
        self.task = task
        self.action = action
        self.spec = spec
        self.spec_file = spec_file
        self.spec_s3_uri = spec_s3_uri
        self.overrides = overrides
        self.results_dir = results_dir
        self.num_gpus = num_gpus
        self.container_env = container_env
        self.container_secret_env = container_secret_env
        self.hf_conn_id = hf_conn_id
        self.s3_inputs = s3_inputs
        self.require_new_checkpoint = action == "train" if require_new_checkpoint is None else require_new_checkpoint

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
