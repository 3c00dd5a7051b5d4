"""NVIDIA TAO Toolkit on Brev: one generic operator, thin presets, and the pre-launch checks as a task.

:class:`TaoOperator` is a step operator (:class:`~airflow_provider_brev.operators.step.BrevStepOperator`: detached,
exactly once, resumable, deferrable, ephemeral mode, durable data) whose workload is one TAO action
(:class:`~airflow_provider_brev.steps.tao.TaoWorkload`):

* pre-launch checks before anything is created or paid for (S3 inputs readable, NGC key for nvcr.io images,
  ``HF_TOKEN`` when the spec references Hugging Face, local paths refused unless declared on the instance);
* the spec written to the instance, NGC login with the key on stdin (literal user ``$oauthtoken``), and the
  image pulled in the background while the inputs sync (at most once per image and instance); once its image is
  there, a step starts the pulls of the images later TAO steps on the same instance declare
  (:func:`later_images`), so they are there, or on their way, when those steps start;
* ``docker run --gpus ... <image> <task> <action> -e <spec> key=value ...``;
* success requires exit code 0 **and** a final ``SUCCESS`` record in ``status.json`` -- and for ``train`` a new
  checkpoint (TAO can report PASS without training); program faults (out of memory, CUDA assert, bad spec) and
  gap analysis's ``unreachable_kpi.txt`` fail without retry; infrastructure faults may retry.
* KPIs (``status.json``, ``metrics.json``, ``threshold.txt``) go to XCom; epochs are logged as a percentage;
* ``train`` with ``outputs`` covering its results: checkpoints are uploaded as soon as the log shows them (and every
  ``output_sync_interval``), and a launch on an instance without the run's newest checkpoint (after a recovery,
  or a retry) restores it from those outputs and resumes with ``train.resume_training_checkpoint_path``. A run
  whose outputs hold no checkpoint (a new recurring run: the outputs prefix is per run) never resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.staging.lineage import listed
from airflow_provider_brev.core.tao.checkpoints import CHECKPOINT_LOG_REGEX
from airflow_provider_brev.exceptions import (  # re-exported
    BrevPreflightError,
    TaoProgramFaultError,
    TaoUnreachableKpiError,
    TaoVerificationError,
)
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.operators.step import BrevStepOperator
from airflow_provider_brev.steps.preflight import (
    check_hf_token,
    check_input_paths,
    check_ngc_key,
    check_s3_inputs,
    check_s3_outputs,
    connection_secret,
)
from airflow_provider_brev.utils.mixins import TaoParams, brev_template_fields, parameter_names

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_brev.steps.workload import Workload

#: Epoch lines as TAO prints them ("Epoch 3/10").
EPOCH_PROGRESS_REGEX = r"[Ee]poch[ :]+(\d+)\s*/\s*(\d+)"
#: The Brev-only TAO parameters, beside the TAO action's (:class:`~airflow_provider_brev.utils.mixins.TaoParams`).
BREV_TAO_PARAMETERS = ("shm_size", "ipc", "mounts", "ngc_conn_id", "input_paths", "instance_paths", "pull_timeout")
#: The TAO parameters (what :func:`~airflow_provider_brev.steps.tao.tao_spec` reads besides the step's).
TAO_PARAMETERS = (*parameter_names(TaoParams), *BREV_TAO_PARAMETERS)


class TaoOperator(TaoParams, BrevStepOperator):
    """Run one TAO action, ``<task> <action> -e <spec> key=value ...``, in its container on a Brev instance.

    What runs is :class:`~airflow_provider_brev.steps.tao.TaoWorkload`: pre-launch checks before anything is paid
    for, the spec written and the image pulled in the background while the inputs sync, ``train`` resumed from the
    run's newest checkpoint in S3, and success verified beyond the exit code (``status.json`` SUCCESS, a new
    checkpoint). Where it runs, its data and its recovery are those of every step operator
    (:class:`~airflow_provider_brev.operators.step.BrevStepOperator`).

    Its parameters are the TAO action's (:class:`~airflow_provider_brev.utils.mixins.TaoParams`, as on
    :class:`~airflow_provider_brev.operators.lepton.LeptonTaoOperator`: ``image``, ``task``, ``action``, ``spec``,
    ``spec_file``, ``spec_s3_uri``, ``overrides``, ``results_dir``, ``num_gpus``, ``container_env``,
    ``container_secret_env``, ``hf_conn_id``, ``s3_inputs``, ``require_new_checkpoint``), the Brev-only ones below,
    and the step parameters of :class:`~airflow_provider_brev.operators.step.BrevStepOperator` (``instance_name`` or
    ``gpu``, ``timeout``, ``deferrable``, ``inputs``, ``outputs``, ``aws_conn_id`` ...). For ``train``, put the
    results directory (or ``<results_dir>/train``) in ``outputs`` under a per-run S3 prefix to make it resumable.

    :param shm_size: ``--shm-size`` (Visual ChangeNet needs ``8g``); ``None`` to omit.
    :param ipc: ``--ipc`` mode (e.g. ``host``).
    :param mounts: extra ``{instance path: container path}`` bind mounts (e.g. the staged dataset; templated).
    :param ngc_conn_id: connection whose password is the NGC API key (or ``NGC_API_KEY``); used for nvcr.io images
        (templated).
    :param input_paths: paths the job reads that are not staged from S3 (refused unless in ``instance_paths``).
    :param instance_paths: paths declared as already on the instance; verified with ``test -e`` before GPU work.
    :param pull_timeout: seconds the step waits, once its inputs synced, for its image's background pull (then
        :class:`~airflow_provider_brev.exceptions.BrevImagePullError`, and the pull is stopped).
    """

    template_fields = brev_template_fields(
        *BrevStepOperator.template_fields,
        *TaoParams.template_fields,
        "mounts",
        "input_paths",
        "instance_paths",
        "ngc_conn_id",
    )
    template_fields_renderers = TaoParams.template_fields_renderers
    workload_parameters = TAO_PARAMETERS

    def __init__(
        self,
        *,
        shm_size: str | None = "8g",
        ipc: str | None = None,
        mounts: dict[str, str] | None = None,
        ngc_conn_id: str | None = "ngc_default",
        input_paths: list[str] | None = None,
        instance_paths: list[str] | None = None,
        pull_timeout: float = 1800.0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("progress_regex", EPOCH_PROGRESS_REGEX)
        if kwargs.get("action") == "train":
            kwargs.setdefault("checkpoint_regex", CHECKPOINT_LOG_REGEX)
        super().__init__(**kwargs)
        self.shm_size = shm_size
        self.ipc = ipc
        self.mounts = mounts
        self.ngc_conn_id = ngc_conn_id
        self.input_paths = input_paths
        self.instance_paths = instance_paths
        self.pull_timeout = pull_timeout

    def parameters(self) -> dict[str, Any]:
        return {**super().parameters(), "prefetch_images": later_images(self)}

    def lineage_uris(self) -> tuple[list[Any], list[Any]]:
        """Also read: the spec in S3 (``spec_s3_uri``) and the URIs checked before launch (``s3_inputs``)."""
        inputs, outputs = super().lineage_uris()
        return [*inputs, *listed(self.spec_s3_uri), *listed(self.s3_inputs)], outputs

    def workload(self, parameters: dict[str, Any]) -> Workload:
        from airflow_provider_brev.steps.tao import TaoWorkload, tao_spec

        return TaoWorkload(tao_spec(parameters))


def _instance_key(value: Any) -> tuple[str, ...] | None:
    """What names a step's instance in the DAG as written: the create task's output (an ``XComArg``: its task and
    key) or a text; ``None`` for an ephemeral step (it has an instance of its own)."""
    operator = getattr(value, "operator", None)
    if operator is not None:
        return ("xcom", str(getattr(operator, "task_id", "")), str(getattr(value, "key", "")))
    return ("text", value) if isinstance(value, str) and value else None


def later_images(task: Any) -> list[Any]:
    """The ``image`` (as written in the DAG) of every TAO step downstream of ``task`` that runs on the same instance
    (the same ``instance_name`` as written), nearest first; none outside a DAG. Which of them are pulled ahead is
    :func:`~airflow_provider_brev.core.tao.command.images_to_prefetch`'s rule."""
    try:
        written = task.dag.get_task(task.task_id)  # the DAG's own copy: its fields are not rendered
        relatives = task.get_flat_relatives(upstream=False)
    except Exception:  # not in a DAG (yet)
        return []
    mine = _instance_key(getattr(written, "instance_name", None))
    if mine is None:
        return []
    later = [t for t in relatives if isinstance(t, TaoOperator) and _instance_key(t.instance_name) == mine]
    later.sort(key=lambda t: (len(t.get_flat_relative_ids(upstream=True)), t.task_id))
    return [t.image for t in later]


class VisualChangeNetTrainOperator(TaoOperator):
    """Visual ChangeNet ``train`` (requires a new checkpoint; warm-start with ``train.pretrained_model_path``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(task="visual_changenet", action="train", **kwargs)


class VisualChangeNetEvaluateOperator(TaoOperator):
    """Visual ChangeNet ``evaluate`` (KPIs such as ``test_acc``, ``test_fpr``, ``test_fnr`` go to XCom)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(task="visual_changenet", action="evaluate", **kwargs)


class VisualChangeNetInferenceOperator(TaoOperator):
    """Visual ChangeNet ``inference`` (writes ``inference.csv``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(task="visual_changenet", action="inference", **kwargs)


class VisualChangeNetExportOperator(TaoOperator):
    """Visual ChangeNet ``export`` (ONNX)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(task="visual_changenet", action="export", **kwargs)


class VisualChangeNetGapAnalysisOperator(TaoOperator):
    """Gap analysis ``gap_analysis vcn_aoi`` (data-services image): ``metrics.json`` and ``threshold.txt`` to XCom;
    ``unreachable_kpi.txt`` fails without retry."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("shm_size", None)
        super().__init__(task="gap_analysis", action="vcn_aoi", **kwargs)


#: The preflight operator's parameters (what :func:`~airflow_provider_brev.steps.tao.preflight_spec` reads).
PREFLIGHT_PARAMETERS = (
    "brev_conn_id",
    "s3_inputs",
    "s3_outputs",
    "image",
    "spec",
    "input_paths",
    "instance_paths",
    "aws_conn_id",
    "ngc_conn_id",
    "hf_conn_id",
    "check_brev",
)


class BrevPreflightOperator(BrevBaseOperator):
    """The seed's pre-launch checks as their own task, run before anything is created or paid for.

    :param s3_inputs: S3 URIs (objects or prefixes) that must exist and be readable with ``aws_conn_id``.
    :param s3_outputs: S3 URI prefixes the pipeline will write: each bucket must exist and be listable with
        ``aws_conn_id`` (else :class:`~airflow_provider_brev.exceptions.BrevS3LocationError` naming it).
    :param image: a TAO image: must be a full reference; nvcr.io images need an NGC key (``ngc_conn_id``).
    :param spec: a spec to scan for Hugging Face references (then ``HF_TOKEN`` / ``hf_conn_id`` is required).
    :param input_paths: local paths the pipeline uses: refused unless listed in ``instance_paths``.
    :param instance_paths: paths declared as already on the instance (verified there by the TAO operators).
    :param aws_conn_id: the Amazon connection that reads ``s3_inputs`` and lists the buckets of ``s3_outputs``.
    :param ngc_conn_id: connection whose password is the NGC API key (or ``NGC_API_KEY``), checked for an nvcr.io
        ``image``.
    :param hf_conn_id: connection whose password is the Hugging Face token (or ``HF_TOKEN``), checked when ``spec``
        references Hugging Face.
    :param check_brev: also check that the Brev connection works (CLI found, login, listing).
    """

    template_fields = brev_template_fields(*(name for name in PREFLIGHT_PARAMETERS if name != "check_brev"))

    def __init__(
        self,
        *,
        s3_inputs: list[str] | None = None,
        s3_outputs: list[str] | None = None,
        image: str | None = None,
        spec: dict[str, Any] | None = None,
        input_paths: list[str] | None = None,
        instance_paths: list[str] | None = None,
        aws_conn_id: str | None = "aws_default",
        ngc_conn_id: str | None = "ngc_default",
        hf_conn_id: str | None = "hf_default",
        check_brev: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.s3_inputs = s3_inputs
        self.s3_outputs = s3_outputs
        self.image = image
        self.spec = spec
        self.input_paths = input_paths
        self.instance_paths = instance_paths
        self.aws_conn_id = aws_conn_id
        self.ngc_conn_id = ngc_conn_id
        self.hf_conn_id = hf_conn_id
        self.check_brev = check_brev

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_brev.steps.tao import preflight_spec

        spec = preflight_spec({name: getattr(self, name) for name in PREFLIGHT_PARAMETERS})
        report: dict[str, Any] = {}
        if spec.check_brev:
            ok, message = self.hook.test_connection()
            if not ok:
                raise BrevPreflightError(f"The Brev connection {self.brev_conn_id!r} does not work: {message}")
            report["brev"] = message
        report["s3_inputs"] = check_s3_inputs(spec.s3_inputs, aws_conn_id=spec.aws_conn_id)
        report["s3_outputs"] = check_s3_outputs(spec.s3_outputs, aws_conn_id=spec.aws_conn_id)
        if spec.image:
            report["ngc_key"] = bool(check_ngc_key(spec.image, ngc_conn_id=spec.ngc_conn_id))
        report["hf_token"] = bool(check_hf_token(spec.spec or {}, hf_conn_id=spec.hf_conn_id))
        report["instance_paths"] = check_input_paths(spec.input_paths, instance_paths=spec.instance_paths)
        inputs = report["s3_inputs"]
        self.log.info(
            "Pre-launch checks passed: %s; %d S3 input(s) readable; %d S3 output location(s) in reachable buckets%s%s.",
            report.get("brev", "Brev not checked (check_brev=False)"),
            len(inputs),
            len(report["s3_outputs"]),
            "; NGC key present" if report.get("ngc_key") else "",
            "; Hugging Face token present" if report["hf_token"] else "",
        )
        self.log.debug("Pre-launch report: %s", report)
        return report


__all__ = [
    "BrevPreflightOperator",
    "TaoOperator",
    "TaoProgramFaultError",
    "TaoUnreachableKpiError",
    "TaoVerificationError",
    "VisualChangeNetEvaluateOperator",
    "VisualChangeNetExportOperator",
    "VisualChangeNetGapAnalysisOperator",
    "VisualChangeNetInferenceOperator",
    "VisualChangeNetTrainOperator",
    "connection_secret",
]
