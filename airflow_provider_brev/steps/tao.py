"""NVIDIA TAO as a step's workload: ``<task> <action> -e <spec> key=value ...`` in its container, verified.

:class:`TaoWorkload` is what :class:`~airflow_provider_brev.operators.tao.TaoOperator` runs through the step
service (:mod:`airflow_provider_brev.steps.service`):

* **check** (before anything is created or paid for): the image is a full reference; the spec resolves (a dict, a
  YAML file on the worker, or a YAML object in S3); an nvcr.io image has an NGC key; a spec that references
  Hugging Face has a token; the declared S3 inputs are readable; local paths are refused unless declared on the
  instance;
* **prepare** (on the ready instance): the results directories, the spec file, the declared instance paths
  (``test -e``), ``docker login nvcr.io`` with the key on stdin (literal user ``$oauthtoken``), and the image's
  pull started in the background (:mod:`airflow_provider_brev.jobs.pulls`; at most one pull per image and
  instance), so that it runs while the inputs sync;
* **ready** (after the inputs synced): wait for that pull (nothing to wait for when an earlier step pulled the
  image), then start the background pulls of the images later steps on this instance declare
  (``prefetch_images``, found in the DAG by the operator);
* **launch**: for ``train`` whose ``outputs`` cover its results, the run's newest checkpoint is restored from S3
  when the instance lacks it, and TAO resumes from it (``train.resume_training_checkpoint_path``);
* **result**: exit code 0 **and** a final ``SUCCESS`` record in ``status.json`` (and for ``train`` a new
  checkpoint), judged by :func:`~airflow_provider_brev.core.tao.command.verify_tao_run`; KPIs go to the result.

:func:`tao_spec` checks the TAO parameters (before any ``brev`` call).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import mask_secret
from airflow_provider_brev.core.staging.manifest import validate_outputs
from airflow_provider_brev.core.tao.checkpoints import (
    checkpoint_order,
    checkpoints_uri,
    newest_checkpoint,
    resume_overrides,
)
from airflow_provider_brev.core.tao.command import (
    build_tao_command,
    image_registry,
    images_to_prefetch,
    remote_path,
    validate_image,
)
from airflow_provider_brev.core.tao.report import (
    NOT_VERIFIED,
    PROGRAM_FAULT,
    UNREACHABLE_KPI,
    build_report_command,
    parse_report,
    verify_tao_run,
)
from airflow_provider_brev.core.validation import directory, s3_uri
from airflow_provider_brev.core.values import (
    bool_value,
    conn_id,
    duration_seconds,
    env_mapping,
    is_empty,
    named,
    optional,
    positive_int,
    safe_text,
)
from airflow_provider_brev.exceptions import (
    BrevError,
    BrevInvalidInputError,
    BrevPreflightError,
    TaoProgramFaultError,
    TaoUnreachableKpiError,
    TaoVerificationError,
)
from airflow_provider_brev.jobs.pulls import await_pull, start_pull
from airflow_provider_brev.jobs.runner import JobLaunch
from airflow_provider_brev.staging.step_data import restore_newest
from airflow_provider_brev.steps.preflight import (
    check_hf_token,
    check_input_paths,
    check_ngc_key,
    check_s3_inputs,
    split_s3_uri,
)
from airflow_provider_brev.steps.workload import check_command, command_result, judge_exit_code
from airflow_provider_brev.utils.task_memory import MemoryAccessor

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_provider_brev.core.instances.identity import InstanceRef
    from airflow_provider_brev.core.jobs.remote import RemoteJob
    from airflow_provider_brev.core.tao.report import TaoReport
    from airflow_provider_brev.steps.workload import StepRun
    from airflow_provider_brev.utils.task_memory import TaskMemory

#: The typed error of each failing verdict that carries no exit code (a program fault carries one).
_VERDICT_ERRORS: dict[str, type[TaoVerificationError | TaoUnreachableKpiError]] = {
    NOT_VERIFIED: TaoVerificationError,
    UNREACHABLE_KPI: TaoUnreachableKpiError,
}


@dataclass(frozen=True)
class TaoSpec:
    """One TAO action's parameters, checked (:func:`tao_spec`); see
    :class:`~airflow_provider_brev.operators.tao.TaoOperator` for their meaning."""

    image: str
    task: str
    action: str
    spec: dict[str, Any] | None
    spec_file: str | None
    spec_s3_uri: str | None
    overrides: dict[str, Any]
    results_dir: str
    num_gpus: int | str
    shm_size: str | None
    ipc: str | None
    mounts: dict[str, str] | None
    container_env: dict[str, str] | None
    container_secret_env: dict[str, str] | None
    ngc_conn_id: str | None
    hf_conn_id: str | None
    aws_conn_id: str | None
    s3_inputs: list[str] = field(default_factory=list)
    input_paths: list[str] = field(default_factory=list)
    instance_paths: list[str] = field(default_factory=list)
    pull_timeout: float = 1800.0
    require_new_checkpoint: bool = False
    outputs: dict[str, str] = field(default_factory=dict)
    prefetch_images: list[str] = field(default_factory=list)

    @property
    def spec_name(self) -> str:
        return f"{self.task}_{self.action}.yaml"

    def checkpoints_uri(self) -> str | None:
        """Where this run's ``train`` checkpoints are in S3: the ``outputs`` covering ``<results_dir>/train``, or
        ``None`` (not ``train``, or no such outputs: nothing to resume from). Both TAO workloads resume by it."""
        uri = checkpoints_uri(validate_outputs(self.outputs), results_dir=self.results_dir, action=self.action)
        return uri if self.action == "train" else None

    def command(self, *, secret_names: list[str], extra_overrides: Mapping[str, str] | None = None) -> str:
        """The ``docker run`` command (raises ``ValueError`` on a parameter its builder refuses)."""
        return build_tao_command(
            image=self.image,
            task=self.task,
            action=self.action,
            spec_file=self.spec_name,
            results_dir=self.results_dir,
            overrides={**self.overrides, **(extra_overrides or {})},
            mounts=self.mounts,
            env=self.container_env,
            secret_env_names=sorted(secret_names),
            num_gpus=self.num_gpus,
            shm_size=self.shm_size,
            ipc=self.ipc,
        )


def text_list(name: str, value: Any, check: Any = safe_text) -> list[str]:
    """A list of texts (one text alone counts as a list of one), each passing ``check``; ``[]`` when empty."""
    if is_empty(value):
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise BrevInvalidInputError(f"{name} must be a list of strings, got {value!r}.")
    return [check(name, item) for item in items]


def _num_gpus(value: Any) -> int | str:
    if isinstance(value, str) and value.strip() == "all":
        return "all"
    try:
        return positive_int("num_gpus", value)
    except BrevInvalidInputError:
        raise BrevInvalidInputError(f"num_gpus must be 'all' or a whole number >= 1, got {value!r}.") from None


def _mounts(value: Any) -> dict[str, str] | None:
    if is_empty(value) or value == {}:
        return None
    if not isinstance(value, dict):
        raise BrevInvalidInputError(f"mounts must be a dict {{instance path: container path}}, got {value!r}.")
    mounts = {safe_text("mounts key", key): safe_text(f"mounts[{key!r}]", path) for key, path in value.items()}
    for key, path in mounts.items():
        if not path.startswith("/"):
            raise BrevInvalidInputError(f"mounts[{key!r}] must be an absolute container path, got {path!r}.")
    return mounts


def tao_spec(params: Mapping[str, Any]) -> TaoSpec:
    """The TAO operator's rendered parameters, checked (raises ``BrevInvalidInputError`` naming the parameter), and
    the ``docker run`` command built once from them: what only its builder checks fails here too."""
    action = safe_text("action", params["action"])
    overrides = params.get("overrides")
    if not is_empty(overrides) and not isinstance(overrides, dict):
        raise BrevInvalidInputError(f"overrides must be a dict of key=value overrides, got {overrides!r}.")
    spec = params.get("spec")
    if not is_empty(spec) and not isinstance(spec, dict):
        raise BrevInvalidInputError(f"spec must be a dict (the experiment spec), got a {type(spec).__name__}.")
    require_new = params.get("require_new_checkpoint")
    image = named("image", validate_image, params["image"])
    checked = TaoSpec(
        image=image,
        task=safe_text("task", params["task"]),
        action=action,
        spec=spec or None,
        spec_file=optional(safe_text, "spec_file", params.get("spec_file")),
        spec_s3_uri=optional(s3_uri, "spec_s3_uri", params.get("spec_s3_uri"), object_key=True),
        overrides=dict(overrides or {}),
        results_dir=directory("results_dir", params["results_dir"]),
        num_gpus=_num_gpus(params["num_gpus"]),
        shm_size=optional(safe_text, "shm_size", params.get("shm_size")),
        ipc=optional(safe_text, "ipc", params.get("ipc")),
        mounts=_mounts(params.get("mounts")),
        container_env=env_mapping("container_env", params.get("container_env")),
        container_secret_env=env_mapping("container_secret_env", params.get("container_secret_env")),
        ngc_conn_id=optional(conn_id, "ngc_conn_id", params.get("ngc_conn_id")),
        hf_conn_id=optional(conn_id, "hf_conn_id", params.get("hf_conn_id")),
        aws_conn_id=optional(conn_id, "aws_conn_id", params.get("aws_conn_id")),
        s3_inputs=text_list("s3_inputs", params.get("s3_inputs"), s3_uri),
        input_paths=text_list("input_paths", params.get("input_paths")),
        instance_paths=text_list("instance_paths", params.get("instance_paths")),
        pull_timeout=duration_seconds("pull_timeout", params["pull_timeout"]),
        require_new_checkpoint=bool_value("require_new_checkpoint", require_new, default=action == "train"),
        outputs=dict(params.get("outputs") or {}),
        prefetch_images=images_to_prefetch(image, params.get("prefetch_images") or ()),
    )
    try:
        command = checked.command(secret_names=sorted(checked.container_secret_env or {}))
    except ValueError as err:
        raise BrevInvalidInputError(f"The TAO command cannot be built: {err}") from None
    check_command(command, secret_names=sorted(checked.container_secret_env or {}))
    return checked


#: XCom key of the checkpoint a TAO ``train`` launch resumed from ("" for a fresh start).
XCOM_RESUMED_FROM = "tao_resumed_from"
#: XCom key of a TAO step's image pull time.
XCOM_PULL_SECONDS = "tao_pull_seconds"


class TaoFacts(MemoryAccessor):
    """What a TAO step tells its task's memory (XCom: it lasts the try and its deferrals)."""

    def resumed_from(self) -> str | None:
        """The checkpoint this try's launch resumed from (``None``: a fresh start, or no launch yet)."""
        return self.memory.read(XCOM_RESUMED_FROM, str) or None

    def tell_resumed_from(self, checkpoint: str | None) -> None:
        self.memory.tell(XCOM_RESUMED_FROM, checkpoint or "")  # "" for none: Airflow 3.0's XCom API refuses a null

    def tell_pull_seconds(self, seconds: float) -> None:
        self.memory.tell(XCOM_PULL_SECONDS, seconds)


def load_spec_file(path: str) -> dict[str, Any]:
    """A YAML spec on the worker."""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise BrevPreflightError(f"The spec file {path} does not hold a mapping.")
    return data


def load_spec_s3(uri: str, aws_conn_id: str | None) -> dict[str, Any]:
    """A YAML spec in S3 (read with ``aws_conn_id``)."""
    import yaml
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    bucket, key = split_s3_uri(uri)
    data = yaml.safe_load(S3Hook(aws_conn_id=aws_conn_id).read_key(key, bucket))
    if not isinstance(data, dict):
        raise BrevPreflightError(f"The spec {uri} does not hold a mapping.")
    return data


class TaoWorkload:
    """One TAO action (see the module docstring).

    :param spec: the checked TAO parameters.
    """

    def __init__(self, spec: TaoSpec) -> None:
        self.spec = spec
        self.spec_text = ""
        self.secret_env: dict[str, str] = {}
        self.ngc_key: str | None = None
        self.timings: dict[str, float] = {}
        self.resumed: str | None = None

    # -- check -------------------------------------------------------------------------------------
    def resolve_spec(self) -> dict[str, Any]:
        spec = self.spec
        given = [x for x in (spec.spec, spec.spec_file, spec.spec_s3_uri) if x]
        if len(given) != 1:
            raise BrevPreflightError("Pass exactly one of spec (dict), spec_file (YAML path) or spec_s3_uri.")
        if spec.spec:
            return spec.spec
        if spec.spec_file:
            return load_spec_file(spec.spec_file)
        return load_spec_s3(str(spec.spec_s3_uri), spec.aws_conn_id)

    def check(self, *, registry_login: bool = True) -> None:
        """All pre-launch checks (raises :class:`BrevPreflightError`); resolves the spec and the secrets.

        :param registry_login: the step logs in to the image's registry with the NGC key (Brev); a Lepton job pulls
            with its workspace's ``image_pull_secrets`` instead, and the worker needs no key.
        """
        import yaml

        spec = self.spec
        resolved = self.resolve_spec()
        self.ngc_key = check_ngc_key(spec.image, ngc_conn_id=spec.ngc_conn_id) if registry_login else None
        hf_token = check_hf_token(resolved, hf_conn_id=spec.hf_conn_id)
        check_s3_inputs(spec.s3_inputs, aws_conn_id=spec.aws_conn_id)
        check_input_paths(spec.input_paths, instance_paths=spec.instance_paths)
        secrets = dict(spec.container_secret_env or {})
        if hf_token:
            secrets.setdefault("HF_TOKEN", hf_token)
        self.secret_env = secrets
        self.spec_text = yaml.safe_dump(resolved, sort_keys=False)
        self.mask()

    def mask(self) -> None:
        for value in [*(self.spec.container_secret_env or {}).values(), *self.secret_env.values(), self.ngc_key]:
            mask_secret(value)

    # -- prepare -----------------------------------------------------------------------------------
    def prepare(self, run: StepRun, ref: InstanceRef) -> None:
        hook, spec, name = run.hook, self.spec, ref.name
        if not self.spec_text:  # resumed after a deferral: the spec is written again only after a recovery
            self.check()
        results = spec.results_dir.rstrip("/")
        setup = hook.run_command(
            name, f"mkdir -p {remote_path(results + '/specs')} {remote_path(results + '/' + spec.action)}", timeout=300
        )
        if setup.exit_code != 0:
            raise BrevError(f"Could not create {results} on {name}: {setup.last_error}")
        hook.write_file_to_instance(name, self.spec_text, f"{results}/specs/{spec.spec_name}", mode=0o644)
        declared = check_input_paths(spec.input_paths, instance_paths=spec.instance_paths)
        if declared:
            probe = " && ".join(f"test -e {shlex.quote(path)}" for path in declared)
            if hook.run_command(name, probe, timeout=120).exit_code != 0:
                raise BrevPreflightError(
                    f"Declared instance path(s) {', '.join(declared)} do not exist on {name}: nothing was run."
                )
        if self.ngc_key and image_registry(spec.image) == "nvcr.io":
            login = hook.run_command(
                name,
                "printf '%s' \"$NGC_API_KEY\" | docker login nvcr.io -u '$oauthtoken' --password-stdin",
                secret_env={"NGC_API_KEY": self.ngc_key},
                timeout=300,
            )
            if login.exit_code != 0:
                raise BrevError(f"docker login nvcr.io failed on {name}: {login.last_error}")
        start_pull(hook, name, spec.image, run.log)  # in the background: the inputs sync meanwhile

    def ready(self, run: StepRun, ref: InstanceRef) -> None:
        """After the inputs synced: wait for the image's pull (only for what is not there yet), then start the
        pulls of the images later steps on this instance declare (they run while this step works)."""
        spec = self.spec
        waited = await_pull(run.hook, ref.name, spec.image, timeout=spec.pull_timeout, log=run.log, killed=run.killed)
        self.timings["pull_seconds"] = waited
        run.log.info("Image %s is on %s (waited %.1f s for it after the inputs synced).", spec.image, ref.name, waited)
        TaoFacts(run.memory).tell_pull_seconds(waited)
        for image in spec.prefetch_images:
            start_pull(run.hook, ref.name, image, run.log)

    # -- launch ------------------------------------------------------------------------------------
    def launch(self, run: StepRun, ref: InstanceRef) -> JobLaunch:
        """For ``train``: restore the run's newest checkpoint from its outputs and resume from it."""
        self.resumed = self.restore_checkpoint(run, ref.name)
        TaoFacts(run.memory).tell_resumed_from(self.resumed)
        extra = resume_overrides(self.resumed, action=self.spec.action) if self.resumed else None
        command = self.spec.command(secret_names=sorted(self.secret_env), extra_overrides=extra)
        return JobLaunch(command, secret_env=self.secret_env or None)

    def restore_checkpoint(self, run: StepRun, name: str) -> str | None:
        """The newest checkpoint of this run in the outputs, placed in ``<results_dir>/train/`` (downloaded only
        when the instance lacks it), or ``None``: no outputs cover the results, or they hold no checkpoint."""
        spec = self.spec
        uri = spec.checkpoints_uri()
        if uri is None:
            return None
        action_dir = f"{spec.results_dir.rstrip('/')}/{spec.action}"
        present = run.hook.exec_script(name, f"ls -1 {remote_path(action_dir)} 2>/dev/null; exit 0").stdout_lines
        chosen = restore_newest(
            run.hook,
            name,
            uri=uri,
            directory=action_dir,
            pick=newest_checkpoint,
            s3=run.data.s3,
            log=run.log,
            present=[line.strip() for line in present],
        )
        if chosen is not None:
            epoch = (checkpoint_order(chosen) or (0, 0))[0]
            run.log.info("TAO train: resuming from epoch %d (checkpoint %s from %s).", epoch + 1, chosen, uri)
        return chosen

    # -- result ------------------------------------------------------------------------------------
    def resumed_for(self, memory: TaskMemory) -> str | None:
        """The checkpoint this try's launch resumed from: this process's, else what the launch told the task's memory
        (the verdict may run in another process: after a deferral, or a re-attach)."""
        return self.resumed if self.resumed is not None else TaoFacts(memory).resumed_from()

    def result(self, run: StepRun, ref: InstanceRef, job: RemoteJob | None, exit_code: int, last_line: str) -> Any:
        """Collect what TAO left on the instance and judge it with :func:`verify_tao_run`."""
        spec, name = self.spec, ref.name
        output = run.hook.exec_script(
            name,
            build_report_command(
                results_dir=spec.results_dir, action=spec.action, job_log=job.log_path if job else None
            ),
        )
        judged = judge_tao_report(
            spec,
            parse_report(output.stdout_lines),
            exit_code=exit_code,
            last_line=last_line,
            resumed=self.resumed_for(run.memory),
            name=name,
        )
        run.log.info("%s KPIs: %s", judged.pop("verdict"), judged["kpis"])
        return {**command_result(name, job, exit_code, last_line), **judged, **self.timings}


def judge_tao_report(
    spec: TaoSpec, report: TaoReport, *, exit_code: int, last_line: str, resumed: str | None, name: str
) -> dict[str, Any]:
    """Judge what a TAO action left (:func:`verify_tao_run`): raise its typed error, or return what the step
    reports (``kpis``, ``status``, ``checkpoints``, ``results_dir``, ``resumed_from``, ``image`` and ``verdict``,
    the verdict's message). Shared by the Brev and the Lepton TAO workloads."""
    verdict = verify_tao_run(
        report,
        exit_code=exit_code,
        task=spec.task,
        action=spec.action,
        results_dir=spec.results_dir,
        require_new_checkpoint=spec.require_new_checkpoint,
        resumed_from=resumed,
    )
    if verdict.kind == PROGRAM_FAULT:
        raise TaoProgramFaultError(verdict.message, exit_code=exit_code)
    if verdict.kind in _VERDICT_ERRORS:
        raise _VERDICT_ERRORS[verdict.kind](verdict.message)
    judge_exit_code(name, exit_code, last_line)  # COMMAND_FAILED raises here (and may retry)
    return {
        "kpis": report.kpis(),
        "status": report.last_status,
        "checkpoints": report.new_checkpoints,
        "results_dir": f"{spec.results_dir.rstrip('/')}/{spec.action}",
        "resumed_from": resumed,
        "image": spec.image,
        "verdict": verdict.message,
    }


@dataclass(frozen=True)
class PreflightSpec:
    """The pre-launch checks of :class:`~airflow_provider_brev.operators.tao.BrevPreflightOperator`, checked."""

    image: str | None
    spec: dict[str, Any] | None
    s3_inputs: list[str]
    s3_outputs: list[str]
    input_paths: list[str]
    instance_paths: list[str]
    aws_conn_id: str | None
    ngc_conn_id: str | None
    hf_conn_id: str | None
    check_brev: bool


def preflight_spec(params: Mapping[str, Any]) -> PreflightSpec:
    """The preflight operator's rendered parameters, checked (raises ``BrevInvalidInputError`` naming one)."""
    optional(conn_id, "brev_conn_id", params.get("brev_conn_id"))
    spec = params.get("spec")
    if not is_empty(spec) and not isinstance(spec, dict):
        raise BrevInvalidInputError(f"spec must be a dict (the experiment spec), got a {type(spec).__name__}.")
    return PreflightSpec(
        image=optional(lambda name, value: named(name, validate_image, value), "image", params.get("image")),
        spec=spec or None,
        s3_inputs=text_list("s3_inputs", params.get("s3_inputs"), s3_uri),
        s3_outputs=text_list("s3_outputs", params.get("s3_outputs"), s3_uri),
        input_paths=text_list("input_paths", params.get("input_paths")),
        instance_paths=text_list("instance_paths", params.get("instance_paths")),
        aws_conn_id=optional(conn_id, "aws_conn_id", params.get("aws_conn_id")),
        ngc_conn_id=optional(conn_id, "ngc_conn_id", params.get("ngc_conn_id")),
        hf_conn_id=optional(conn_id, "hf_conn_id", params.get("hf_conn_id")),
        check_brev=bool_value("check_brev", params.get("check_brev"), default=True),
    )
