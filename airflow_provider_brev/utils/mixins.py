"""The parameter groups of the provider's operators and sensors, each declared once, and the Brev hook they build.

Modelled on the Amazon provider's ``AwsHookParams`` / ``aws_template_fields`` / ``AwsBaseHookMixin``: a group is a
base class whose ``__init__`` takes the group's keyword arguments and stores them, and whose ``template_fields`` the
operators that take the group add to their own. The Brev and the Lepton operators reuse the same groups:

* :class:`BrevConnectionParams` -- ``brev_conn_id`` (every Brev operator and sensor) and the lazily built hook
  (:class:`BrevBaseHookMixin`);
* :class:`InstanceParams` -- the Brev instance a task creates (the create operator, and a step's ephemeral instance);
* :class:`FollowParams` -- how a step's job is followed (every step operator, Brev or Lepton);
* :class:`StepDataParams` -- a step's S3 inputs and outputs (every step operator);
* :class:`CommandParams` -- a shell command (:class:`~airflow_provider_brev.operators.exec.BrevExecOperator` and
  :class:`~airflow_provider_brev.operators.lepton.LeptonJobOperator`);
* :class:`TaoParams` -- one TAO action (:class:`~airflow_provider_brev.operators.tao.TaoOperator` and
  :class:`~airflow_provider_brev.operators.lepton.LeptonTaoOperator`).

A group is a ``BaseOperator`` subclass, not a plain mixin: Airflow accepts in ``.partial()``/``.expand()`` only the
arguments of ``BaseOperator`` subclasses' ``__init__`` (the Amazon provider's ``AwsBaseOperator`` declares its
connection arguments for the same reason). Rendered values are checked where the task builds its spec, never here.
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import BaseOperator, conf
from airflow_provider_brev.core.instances.readiness import DEFAULT_READY_TIMEOUT
from airflow_provider_brev.core.instances.warm_pool import DEFAULT_MAX_IDLE
from airflow_provider_brev.core.protocol.config import DEFAULT_BREV_CONN_ID
from airflow_provider_brev.core.protocol.names import DEFAULT_MAX_LIFETIME

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import timedelta

    from airflow_provider_brev.hooks.brev import BrevHook

#: Default seconds between a step's output syncs while its command runs.
DEFAULT_OUTPUT_SYNC_INTERVAL = 300.0


def brev_template_fields(*template_fields: str) -> tuple[str, ...]:
    """Template fields of a Brev operator: always ``brev_conn_id``, plus the given ones (sorted, unique)."""
    return tuple(sorted({*BrevConnectionParams.template_fields, *template_fields}))


def parameter_names(group: type) -> tuple[str, ...]:
    """The keyword arguments a parameter group's own ``__init__`` declares (what a spec reads of it)."""
    parameters = inspect.signature(group.__init__).parameters.values()  # type: ignore[misc]
    return tuple(parameter.name for parameter in parameters if parameter.kind is parameter.KEYWORD_ONLY)


class BrevBaseHookMixin:
    """Mixin giving an operator/sensor a lazily built ``hook`` from its ``brev_conn_id``.

    The hook is never built in ``__init__`` (DAG parsing must not touch connections or run ``brev``). The
    ``brev_conn_id`` argument itself is declared by :class:`BrevConnectionParams`, a ``BaseOperator`` subclass.
    """

    #: The hook's class; ``None``: :class:`~airflow_provider_brev.hooks.brev.BrevHook`, imported when the hook is
    #: first built (parsing a DAG imports no hook).
    hook_class: type[BrevHook] | None = None
    template_fields: Sequence[str] = ("brev_conn_id",)
    brev_conn_id: str

    @property
    def _hook_parameters(self) -> dict[str, Any]:
        """Keyword arguments of the hook; subclasses extend it."""
        return {"brev_conn_id": self.brev_conn_id}

    @cached_property
    def hook(self) -> BrevHook:
        hook_class = self.hook_class
        if hook_class is None:
            from airflow_provider_brev.hooks.brev import BrevHook

            hook_class = BrevHook
        return hook_class(**self._hook_parameters)


class BrevConnectionParams(BrevBaseHookMixin, BaseOperator):
    """The Brev connection of every Brev operator and sensor, and the ``hook`` built from it.

    :param brev_conn_id: the Airflow connection id of type ``brev`` (default ``brev_default``; templated).
    """

    template_fields: Sequence[str] = ("brev_conn_id",)

    def __init__(self, *, brev_conn_id: str = DEFAULT_BREV_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.brev_conn_id = brev_conn_id


class InstanceParams(BaseOperator):
    """The Brev instance a task creates: what
    :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator` creates, and a step's **ephemeral**
    instance (:class:`~airflow_provider_brev.operators.step.BrevStepOperator` with ``gpu`` or ``instance_types``
    instead of ``instance_name``). Every one is templated and checked into a frozen
    :class:`~airflow_provider_brev.core.instances.request.InstanceRequest` before any ``brev`` call.

    :param gpu: GPU request in the form ``"L40S:1"`` (name and count).
    :param instance_types: explicit instance types, tried in order (``brev create --type a,b,c``).
    :param min_vram: minimum VRAM per GPU in GB.
    :param ready_timeout: seconds to wait until a created, started or re-created instance is usable (default 20
        minutes, sized for cold starts).
    :param require_docker: readiness also requires ``docker info`` (container work).
    :param max_lifetime: how long after the run the janitor may consider the instance expired (written into its
        name; default 24 hours).
    :param max_price_per_hour: the highest price (dollars per hour, ``brev search``) of the instance to create or
        start; no candidate type within it fails with :class:`~airflow_provider_brev.exceptions.BrevPriceCapError`
        before ``brev create``.
    :param reuse_key: warm reuse across DAG runs: first look for a STOPPED instance this provider created and recorded
        under this key (identity by id) whose type is one the request allows, within the price cap, and ``brev
        start`` it -- its image cache and synced inputs are still there; otherwise create as usual and record the
        instance under the key. Two runs never share an instance: only one ``brev start`` of it succeeds. Each
        instance's record is the Airflow Variable ``brev_warm_instance.<instance id>``
        (:mod:`airflow_provider_brev.instances.warm_pool`); only a record that proves the provider created the
        instance is ever acted on (docs/howto/warm-reuse.md).
    :param max_idle: with ``reuse_key``: how long the instance may stay stopped before the janitor
        (:class:`~airflow_provider_brev.operators.janitor.BrevSweepInstancesOperator`) deletes it (``timedelta`` or
        seconds; default 24 h); also the expected idle time of the stop-or-delete break-even when the DAG has no
        schedule.
    """

    template_fields: Sequence[str] = (
        "gpu",
        "instance_types",
        "min_vram",
        "ready_timeout",
        "require_docker",
        "max_lifetime",
        "max_price_per_hour",
        "reuse_key",
        "max_idle",
    )

    def __init__(
        self,
        *,
        gpu: str | None = None,
        instance_types: list[str] | str | None = None,
        min_vram: float | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        require_docker: bool = False,
        max_lifetime: timedelta | float = DEFAULT_MAX_LIFETIME,
        max_price_per_hour: float | str | None = None,
        reuse_key: str | None = None,
        max_idle: timedelta | float | str = DEFAULT_MAX_IDLE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.gpu = gpu
        self.instance_types = instance_types
        self.min_vram = min_vram
        self.ready_timeout = ready_timeout
        self.require_docker = require_docker
        self.max_lifetime = max_lifetime
        self.max_price_per_hour = max_price_per_hour
        self.reuse_key = reuse_key
        self.max_idle = max_idle


class FollowParams(BaseOperator):
    """How a step's job is followed, on a Brev instance or as a Lepton job (every step operator takes these).

    :param timeout: seconds (or timedelta) for the whole command -- a Lepton job's from its submission: an absolute
        deadline that also holds across deferrals; on expiry the job is killed (a Lepton job stopped) and the task
        fails.
    :param deferrable: follow the job from the triggerer, holding no worker slot.
    :param poll_interval: seconds between polls of the job (its state and log) while it prints nothing new.
    :param max_poll_failures: consecutive failed polls (connection drops, transient API errors) tolerated before
        the task fails.
    :param on_kill_action: ``kill`` the job when the task is killed (default; a Lepton job is stopped) or ``keep``
        it running.
    """

    template_fields: Sequence[str] = ()

    def __init__(
        self,
        *,
        timeout: float | timedelta | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        max_poll_failures: int = 30,
        on_kill_action: str = "kill",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.timeout = timeout
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.max_poll_failures = max_poll_failures
        self.on_kill_action = on_kill_action


class StepDataParams(BaseOperator):
    """A step's S3 data, on a Brev instance or in a Lepton job alike (every step operator takes these).

    :param inputs: S3 URI prefix -> directory (templated): on the instance (relative = under the remote home), or
        below a Lepton job's working directory ``/workspace``.
    :param outputs: directory on the instance, or below ``/workspace`` in a Lepton job -> S3 URI prefix (templated).
    :param aws_conn_id: the Amazon connection that lists and presigns the step's S3 data (templated; its keys never
        reach the instance or the job).
    :param output_sync_interval: seconds (or timedelta) between output syncs while the command runs.
    """

    template_fields: Sequence[str] = ("inputs", "outputs", "aws_conn_id")

    def __init__(
        self,
        *,
        inputs: dict[str, str] | None = None,
        outputs: dict[str, str] | None = None,
        aws_conn_id: str | None = "aws_default",
        output_sync_interval: float | timedelta = DEFAULT_OUTPUT_SYNC_INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.inputs = inputs
        self.outputs = outputs
        self.aws_conn_id = aws_conn_id
        self.output_sync_interval = output_sync_interval


class CommandParams(BaseOperator):
    """A shell command, run on a Brev instance or as a Lepton job.

    :param command: the shell command (templated; on Brev a path ending in ``.sh``/``.bash`` is read as a template);
        a Lepton job runs it with ``bash -c`` in ``/workspace``.
    :param env: plain environment variables (on the remote command line, or in a Lepton job's spec: not for
        secrets).
    :param secret_env: secret environment variables (templated): never on a command line, in a log or in a job spec
        (a 0600 file on Brev, a workspace secret on Lepton); printed, they are redacted from the job's output (the
        value, each line of a multi-line value: :mod:`airflow_provider_brev.core.secrets`).
    :param cwd: working directory of the command (on Lepton relative to ``/workspace``, or absolute).
    :param skip_on_exit_code: exit code(s) that mark the task skipped instead of failed.
    """

    template_fields: Sequence[str] = ("command", "env", "secret_env", "cwd")
    template_fields_renderers = {"command": "bash", "env": "json"}

    def __init__(
        self,
        *,
        command: str,
        env: dict[str, str] | None = None,
        secret_env: dict[str, str] | None = None,
        cwd: str | None = None,
        skip_on_exit_code: int | list[int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.command = command
        self.env = env
        self.secret_env = secret_env
        self.cwd = cwd
        self.skip_on_exit_code = skip_on_exit_code


class TaoParams(BaseOperator):
    """One TAO action, ``<task> <action> -e <spec> key=value ...``, on a Brev instance or as a Lepton job.

    :param image: the TAO image, a full reference with an explicit tag or digest (never a default tag), e.g.
        ``nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt`` or ``...@sha256:<digest>``; on Lepton an nvcr.io image needs
        ``image_pull_secrets`` naming the workspace's NGC registry secret.
    :param task: the TAO network / entrypoint, e.g. ``visual_changenet``, ``gap_analysis``.
    :param action: ``train``, ``evaluate``, ``inference``, ``export``, ``vcn_aoi`` ...
    :param spec: the experiment spec as a dict (templated), or
    :param spec_file: a YAML spec on the worker, or
    :param spec_s3_uri: a YAML spec in S3 (``s3://bucket/key``, read with ``aws_conn_id``).
    :param overrides: ``key=value`` overrides (dotted keys), applied after the spec.
    :param results_dir: the results directory: on the instance (absolute, or relative to the remote home; mounted at
        ``/results`` and passed as TAO's ``results_dir``), or below ``/workspace`` in a Lepton job; the action writes
        to ``<results_dir>/<action>/``.
    :param num_gpus: ``"all"`` (the instance's GPUs, or the Lepton shape's) or a number (``--gpus N`` on Brev, and
        ``<action>.num_gpus=N``).
    :param container_env: plain environment variables for the container.
    :param container_secret_env: secret environment variables for the container (templated): never on a command line
        or in a job spec (a 0600 file on Brev, passed to docker by name only; a workspace secret on Lepton).
    :param hf_conn_id: connection whose password is the Hugging Face token (or ``HF_TOKEN``); required only when
        the spec references Hugging Face, then passed to the container as ``HF_TOKEN``.
    :param s3_inputs: S3 URIs that must exist before anything is paid for.
    :param require_new_checkpoint: require a checkpoint written by this run (default: ``action == "train"``).
    """

    template_fields: Sequence[str] = (
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
