"""NVIDIA TAO Toolkit on Brev: one generic operator, thin presets, and the pre-launch checks.

Built on :class:`~airflow_provider_brev.operators.brev.BrevExecOperator` (detached, exactly once, resumable,
deferrable, ephemeral mode), adding what TAO needs:

* pre-launch checks before anything is created or paid for (S3 inputs readable, NGC key for nvcr.io images,
  ``HF_TOKEN`` when the spec references Hugging Face, local paths refused unless declared on the instance);
* the spec written to the instance, NGC login with the key on stdin (literal user ``$oauthtoken``), and the
  image pulled as its own timed step before the GPU work;
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

import logging
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import mask_secret
from airflow_provider_brev.cli.manifest import validate_outputs
from airflow_provider_brev.cli.tao import (
    CHECKPOINT_LOG_REGEX,
    NOT_VERIFIED,
    PROGRAM_FAULT,
    UNREACHABLE_KPI,
    build_report_command,
    build_tao_command,
    checkpoint_order,
    checkpoints_uri,
    image_registry,
    newest_checkpoint,
    parse_report,
    remote_path,
    resume_overrides,
    validate_image,
    verify_tao_run,
)
from airflow_provider_brev.exceptions import (  # re-exported
    BrevError,
    BrevInvalidInputError,
    BrevTransientError,
    TaoProgramFaultError,
    TaoUnreachableKpiError,
    TaoVerificationError,
)
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.operators.exec import BrevExecOperator
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.parameter_checks import check_preflight_parameters, check_tao_parameters
from airflow_provider_brev.utils.preflight import (
    BrevPreflightError,
    check_hf_token,
    check_input_paths,
    check_ngc_key,
    check_s3_inputs,
    connection_secret,
    split_s3_uri,
)
from airflow_provider_brev.utils.step_data import restore_newest

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_brev.cli.remote_job import RemoteJob

#: The typed error of each failing verdict that carries no exit code (a program fault carries one).
_VERDICT_ERRORS: dict[str, type[TaoVerificationError | TaoUnreachableKpiError]] = {
    NOT_VERIFIED: TaoVerificationError,
    UNREACHABLE_KPI: TaoUnreachableKpiError,
}

#: Epoch lines as TAO prints them ("Epoch 3/10").
EPOCH_PROGRESS_REGEX = r"[Ee]poch[ :]+(\d+)\s*/\s*(\d+)"
#: XCom key: the checkpoint file this try's launch resumed from (``None``: a fresh start).
XCOM_RESUMED_FROM = "tao_resumed_from"


def _load_spec_file(path: str) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise BrevPreflightError(f"The spec file {path} does not hold a mapping.")
    return data


def _load_spec_s3(uri: str, aws_conn_id: str | None) -> dict[str, Any]:
    import yaml
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    bucket, key = split_s3_uri(uri)
    text = S3Hook(aws_conn_id=aws_conn_id).read_key(key, bucket)
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise BrevPreflightError(f"The spec {uri} does not hold a mapping.")
    return data


class TaoOperator(BrevExecOperator):
    """Run one TAO action, ``<task> <action> -e <spec> key=value ...``, in its container on a Brev instance.

    :param image: full image reference with an explicit tag or digest (never a default tag), e.g.
        ``nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt`` or ``...@sha256:<digest>``.
    :param task: the TAO network / entrypoint, e.g. ``visual_changenet``, ``gap_analysis``.
    :param action: ``train``, ``evaluate``, ``inference``, ``export``, ``vcn_aoi`` ...
    :param spec: the experiment spec as a dict (templated), or
    :param spec_file: a YAML spec on the worker, or
    :param spec_s3_uri: a YAML spec in S3 (``s3://bucket/key``, read with ``aws_conn_id``).
    :param overrides: ``key=value`` overrides (dotted keys), applied after the spec.
    :param results_dir: results directory on the instance (absolute, or relative to the remote home); mounted at
        ``/results`` and passed as TAO's ``results_dir``; the action writes to ``<results_dir>/<action>/``.
    :param num_gpus: ``"all"`` or a number (``--gpus N`` and ``<action>.num_gpus=N``).
    :param shm_size: ``--shm-size`` (Visual ChangeNet needs ``8g``); ``None`` to omit.
    :param ipc: ``--ipc`` mode (e.g. ``host``).
    :param mounts: extra ``{instance path: container path}`` bind mounts (e.g. the staged dataset).
    :param container_env: plain environment variables for the container.
    :param container_secret_env: secret environment variables for the container (templated): delivered in a 0600
        file, passed to docker by name only.
    :param ngc_conn_id: connection whose password is the NGC API key (or ``NGC_API_KEY``); used for nvcr.io images.
    :param hf_conn_id: connection whose password is the Hugging Face token (or ``HF_TOKEN``); required only when
        the spec references Hugging Face, then passed to the container as ``HF_TOKEN``.
    :param aws_conn_id: AWS connection for the S3 pre-launch checks, ``spec_s3_uri``, ``inputs`` and ``outputs``.
    :param s3_inputs: S3 URIs that must exist before anything is paid for.
    :param input_paths: paths the job reads that are not staged from S3 (refused unless in ``instance_paths``).
    :param instance_paths: paths declared as already on the instance; verified with ``test -e`` before GPU work.
    :param pull_timeout: seconds for the image pull (its own timed step).
    :param require_new_checkpoint: require a checkpoint written by this run (default: ``action == "train"``).
    :param kwargs: everything :class:`~airflow_provider_brev.operators.brev.BrevExecOperator` takes
        (``instance_name`` or ephemeral ``gpu``, ``timeout``, ``deferrable``, ``on_kill_action``, ``inputs``,
        ``outputs``, ``output_sync_interval``, ``max_instance_recoveries`` ...). For ``train``, put the results
        directory (or ``<results_dir>/train``) in ``outputs`` under a per-run S3 prefix to make it resumable.
    """

    template_fields = tuple(
        sorted(
            {
                *BrevExecOperator.template_fields,
                "image",
                "spec",
                "spec_file",
                "spec_s3_uri",
                "overrides",
                "results_dir",
                "mounts",
                "container_env",
                "container_secret_env",
                "s3_inputs",
                "input_paths",
                "instance_paths",
                "ngc_conn_id",
                "hf_conn_id",
            }
        )
    )
    template_fields_renderers = {**BrevExecOperator.template_fields_renderers, "spec": "json", "overrides": "json"}

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
        shm_size: str | None = "8g",
        ipc: str | None = None,
        mounts: dict[str, str] | None = None,
        container_env: dict[str, str] | None = None,
        container_secret_env: dict[str, str] | None = None,
        ngc_conn_id: str | None = "ngc_default",
        hf_conn_id: str | None = "hf_default",
        aws_conn_id: str | None = "aws_default",
        s3_inputs: list[str] | None = None,
        input_paths: list[str] | None = None,
        instance_paths: list[str] | None = None,
        pull_timeout: float = 1800.0,
        require_new_checkpoint: bool | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("progress_regex", EPOCH_PROGRESS_REGEX)
        if action == "train":
            kwargs.setdefault("checkpoint_regex", CHECKPOINT_LOG_REGEX)
        super().__init__(command=f"{task} {action}", aws_conn_id=aws_conn_id, **kwargs)
        self.image = image
        self.task = task
        self.action = action
        self.spec = spec
        self.spec_file = spec_file
        self.spec_s3_uri = spec_s3_uri
        self.overrides = overrides
        self.results_dir = results_dir
        self.num_gpus = num_gpus
        self.shm_size = shm_size
        self.ipc = ipc
        self.mounts = mounts
        self.container_env = container_env
        self.container_secret_env = container_secret_env
        self.ngc_conn_id = ngc_conn_id
        self.hf_conn_id = hf_conn_id
        self.s3_inputs = s3_inputs
        self.input_paths = input_paths
        self.instance_paths = instance_paths
        self.pull_timeout = pull_timeout
        self.require_new_checkpoint = action == "train" if require_new_checkpoint is None else require_new_checkpoint
        self._spec_text = ""
        self._ngc_key: str | None = None
        self._timings: dict[str, float] = {}
        self._resumed_from: str | None = None

    @property
    def spec_name(self) -> str:
        return f"{self.task}_{self.action}.yaml"

    # -- before anything is paid for ---------------------------------------------------------------
    def _validate(self) -> None:
        """The TAO parameters, the ``docker run`` command built from them (what only its builder checks fails here
        too), then everything the exec operator takes (the command's length among them)."""
        check_tao_parameters(self)
        try:
            self._build_command()
        except ValueError as err:
            raise BrevInvalidInputError(f"The TAO command cannot be built: {err}") from None
        super()._validate()

    def _resolve_spec(self) -> dict[str, Any]:
        given = [x for x in (self.spec, self.spec_file, self.spec_s3_uri) if x]
        if len(given) != 1:
            raise BrevPreflightError("Pass exactly one of spec (dict), spec_file (YAML path) or spec_s3_uri.")
        if self.spec:
            if not isinstance(self.spec, dict):
                raise BrevPreflightError("spec must be a dict (the experiment spec).")
            return self.spec
        if self.spec_file:
            return _load_spec_file(self.spec_file)
        return _load_spec_s3(str(self.spec_s3_uri), self.aws_conn_id)

    def preflight(self) -> dict[str, Any]:
        """All pre-launch checks; returns the resolved spec. Raises :class:`BrevPreflightError`."""
        try:
            validate_image(self.image)
        except ValueError as err:
            raise BrevPreflightError(str(err)) from None
        spec = self._resolve_spec()
        self._ngc_key = check_ngc_key(self.image, ngc_conn_id=self.ngc_conn_id)
        hf_token = check_hf_token(spec, hf_conn_id=self.hf_conn_id)
        check_s3_inputs(self.s3_inputs or [], aws_conn_id=self.aws_conn_id)
        check_input_paths(self.input_paths or [], instance_paths=self.instance_paths or [])
        secrets = dict(self.container_secret_env or {})
        if hf_token:
            secrets.setdefault("HF_TOKEN", hf_token)
        for value in secrets.values():
            mask_secret(value)
        if self._ngc_key:
            mask_secret(self._ngc_key)
        self.secret_env = secrets or None
        return spec

    def _mask_secrets(self) -> None:
        super()._mask_secrets()
        for value in (self.container_secret_env or {}).values():
            mask_secret(str(value))

    def _prepare_command(self) -> None:
        """Pre-launch checks, then the ``docker run`` command (before the first launch and after a recovery)."""
        import yaml

        spec = self.preflight()
        self._spec_text = yaml.safe_dump(spec, sort_keys=False)
        self._build_command()
        super()._prepare_command()

    def _build_command(self, extra_overrides: dict[str, str] | None = None) -> None:
        self.command = build_tao_command(
            image=self.image,
            task=self.task,
            action=self.action,
            spec_file=self.spec_name,
            results_dir=self.results_dir,
            overrides={**(self.overrides or {}), **(extra_overrides or {})},
            mounts=self.mounts,
            env=self.container_env,
            secret_env_names=sorted(self.secret_env or {}),
            num_gpus=self.num_gpus,
            shm_size=self.shm_size,
            ipc=self.ipc,
        )

    # -- once the instance is ready, before the GPU work ------------------------------------------
    def _prepare_instance(self, context: Context, name: str) -> None:
        hook = self.hook
        results = self.results_dir.rstrip("/")
        setup = hook.run_command(
            name, f"mkdir -p {remote_path(results + '/specs')} {remote_path(results + '/' + self.action)}", timeout=300
        )
        if setup.exit_code != 0:
            raise BrevError(f"Could not create {results} on {name}: {setup.last_error}")
        hook.write_file_to_instance(name, self._spec_text, f"{results}/specs/{self.spec_name}", mode=0o644)
        declared = check_input_paths(self.input_paths or [], instance_paths=self.instance_paths or [])
        if declared:
            probe = " && ".join(f"test -e {shlex.quote(path)}" for path in declared)
            if hook.run_command(name, probe, timeout=120).exit_code != 0:
                raise BrevPreflightError(
                    f"Declared instance path(s) {', '.join(declared)} do not exist on {name}: nothing was run."
                )
        if self._ngc_key and image_registry(self.image) == "nvcr.io":
            login = hook.run_command(
                name,
                "printf '%s' \"$NGC_API_KEY\" | docker login nvcr.io -u '$oauthtoken' --password-stdin",
                secret_env={"NGC_API_KEY": self._ngc_key},
                timeout=300,
            )
            if login.exit_code != 0:
                raise BrevError(f"docker login nvcr.io failed on {name}: {login.last_error}")
        started = time.monotonic()
        pulled = hook.run_command(  # a line per layer and state: DEBUG; the outcome and its time are INFO
            name, f"docker pull {shlex.quote(self.image)}", timeout=float(self.pull_timeout), log_level=logging.DEBUG
        )
        self._timings["pull_seconds"] = round(time.monotonic() - started, 3)
        if pulled.exit_code != 0:
            raise BrevTransientError(f"Pulling {self.image} on {name} failed: {pulled.last_error}")
        self.log.info(
            "Pulled %s in %.1f s (its own step: the GPU work has not started).",
            self.image,
            self._timings["pull_seconds"],
        )
        context["ti"].xcom_push(key="tao_pull_seconds", value=self._timings["pull_seconds"])

    def _before_launch(self, context: Context, name: str) -> str:
        """Sync the inputs; for ``train``, restore the run's newest checkpoint from its outputs and resume."""
        command = super()._before_launch(context, name)
        self._resumed_from = self._restore_checkpoint(name)
        # "" for none: Airflow 3.0's XCom API refuses a null value
        context["ti"].xcom_push(key=XCOM_RESUMED_FROM, value=self._resumed_from or "")
        if self._resumed_from is None:
            return command
        self._build_command(resume_overrides(self._resumed_from, action=self.action))
        return self.command

    def _restore_checkpoint(self, name: str) -> str | None:
        """The newest checkpoint of this run in the outputs, placed in ``<results_dir>/train/`` (downloaded only
        when the instance lacks it), or ``None``: no outputs cover the results, or they hold no checkpoint."""
        uri = checkpoints_uri(validate_outputs(self.outputs), results_dir=self.results_dir, action=self.action)
        if self.action != "train" or uri is None:
            return None
        action_dir = f"{self.results_dir.rstrip('/')}/{self.action}"
        present = self.hook.exec_script(name, f"ls -1 {remote_path(action_dir)} 2>/dev/null; exit 0").stdout_lines
        chosen = restore_newest(
            self.hook,
            name,
            uri=uri,
            directory=action_dir,
            pick=newest_checkpoint,
            aws_conn_id=self.aws_conn_id,
            log=self.log,
            present=[line.strip() for line in present],
        )
        if chosen is not None:
            epoch = (checkpoint_order(chosen) or (0, 0))[0]
            self.log.info("TAO train: resuming from epoch %d (checkpoint %s from %s).", epoch + 1, chosen, uri)
        return chosen

    def _resumed_checkpoint(self, context_ti: Any) -> str | None:
        """The checkpoint this try's launch resumed from (kept in XCom across deferrals)."""
        if self._resumed_from is not None or context_ti is None:
            return self._resumed_from
        try:
            value = context_ti.xcom_pull(task_ids=context_ti.task_id, key=XCOM_RESUMED_FROM)
        except Exception:
            return None
        return value if isinstance(value, str) and value else None

    # -- after the container exited ---------------------------------------------------------------
    def _result(self, name: str, job: RemoteJob | None, exit_code: int, last_line: str) -> dict[str, Any]:
        """Collect what TAO left on the instance and judge it with :func:`verify_tao_run`."""
        result = self.hook.exec_script(
            name,
            build_report_command(
                results_dir=self.results_dir, action=self.action, job_log=job.log_path if job else None
            ),
        )
        report = parse_report(result.stdout_lines)
        verdict = verify_tao_run(
            report,
            exit_code=exit_code,
            task=self.task,
            action=self.action,
            results_dir=self.results_dir,
            require_new_checkpoint=self.require_new_checkpoint,
            resumed_from=self._resumed_checkpoint(self._ti),
        )
        if verdict.kind == PROGRAM_FAULT:
            raise TaoProgramFaultError(verdict.message, exit_code=exit_code)
        if verdict.kind in _VERDICT_ERRORS:
            raise _VERDICT_ERRORS[verdict.kind](verdict.message)
        base = super()._result(name, job, exit_code, last_line)  # COMMAND_FAILED raises here (and may retry)
        kpis = report.kpis()
        self.log.info("%s KPIs: %s", verdict.message, kpis)
        return {
            **base,
            "kpis": kpis,
            "status": report.last_status,
            "checkpoints": report.new_checkpoints,
            "results_dir": f"{self.results_dir.rstrip('/')}/{self.action}",
            "resumed_from": self._resumed_checkpoint(self._ti),
            "image": self.image,
            **self._timings,
        }


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


class BrevPreflightOperator(BrevBaseOperator):
    """The seed's pre-launch checks as their own task, run before anything is created or paid for.

    :param s3_inputs: S3 URIs (objects or prefixes) that must exist and be readable with ``aws_conn_id``.
    :param image: a TAO image: must be a full reference; nvcr.io images need an NGC key (``ngc_conn_id``).
    :param spec: a spec to scan for Hugging Face references (then ``HF_TOKEN`` / ``hf_conn_id`` is required).
    :param input_paths: local paths the pipeline uses: refused unless listed in ``instance_paths``.
    :param instance_paths: paths declared as already on the instance (verified there by the TAO operators).
    :param check_brev: also check that the Brev connection works (CLI found, login, listing).
    """

    template_fields = brev_template_fields(
        "s3_inputs", "image", "spec", "input_paths", "instance_paths", "aws_conn_id", "ngc_conn_id", "hf_conn_id"
    )

    def __init__(
        self,
        *,
        s3_inputs: list[str] | None = None,
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
        self.image = image
        self.spec = spec
        self.input_paths = input_paths
        self.instance_paths = instance_paths
        self.aws_conn_id = aws_conn_id
        self.ngc_conn_id = ngc_conn_id
        self.hf_conn_id = hf_conn_id
        self.check_brev = check_brev

    def execute(self, context: Context) -> dict[str, Any]:
        check_preflight_parameters(self)
        report: dict[str, Any] = {}
        if self.check_brev:
            ok, message = self.hook.test_connection()
            if not ok:
                raise BrevPreflightError(f"The Brev connection {self.brev_conn_id!r} does not work: {message}")
            report["brev"] = message
        report["s3_inputs"] = check_s3_inputs(self.s3_inputs or [], aws_conn_id=self.aws_conn_id)
        if self.image:
            report["ngc_key"] = bool(check_ngc_key(self.image, ngc_conn_id=self.ngc_conn_id))
        report["hf_token"] = bool(check_hf_token(self.spec or {}, hf_conn_id=self.hf_conn_id))
        report["instance_paths"] = check_input_paths(self.input_paths or [], instance_paths=self.instance_paths or [])
        inputs = report["s3_inputs"]
        self.log.info(
            "Pre-launch checks passed: %s; %d S3 input(s) readable%s%s.",
            report.get("brev", "Brev not checked (check_brev=False)"),
            len(inputs),
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
