"""What a Lepton step runs: the workload port of the Lepton compute, the plain command and one TAO action.

A :class:`LeptonWorkload` is asked by :class:`~airflow_provider_brev.steps.lepton.LeptonJobCompute`:
:meth:`~LeptonWorkload.check` before anything is submitted, :meth:`~LeptonWorkload.launch` for what the job's agent
runs (:class:`LeptonLaunch`: the image, the command, its environment, files to write, a report script),
:meth:`~LeptonWorkload.submitted` once the job was, and :meth:`~LeptonWorkload.result` once it ended, from the
agent's report. It differs from a Brev workload (:mod:`.workload`) where a job needs other data: its command runs
inside the container, with a plan instead of commands on an instance. What they decide alike is one piece of code:
the command's checks and secrets (:func:`~airflow_provider_brev.steps.workload.command_spec`,
:meth:`~airflow_provider_brev.steps.workload.CommandSpec.mask`) and its exit code's verdict; the TAO action's checks
(:func:`~airflow_provider_brev.steps.tao.tao_spec`, :meth:`~airflow_provider_brev.steps.tao.TaoWorkload.check`
without the registry login), which outputs it resumes from
(:meth:`~airflow_provider_brev.steps.tao.TaoSpec.checkpoints_uri`), which checkpoint it resumed from
(:meth:`~airflow_provider_brev.steps.tao.TaoWorkload.resumed_for`) and its verdict
(:func:`~airflow_provider_brev.steps.tao.judge_tao_report`): ``status.json`` SUCCESS, a new checkpoint for ``train``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_brev.core.lepton.agent import STATE_DIR, container_path
from airflow_provider_brev.core.lepton.tao import tao_job_command
from airflow_provider_brev.core.tao.checkpoints import RESUME_KEY, newest_checkpoint
from airflow_provider_brev.core.tao.command import validate_image
from airflow_provider_brev.core.tao.report import build_report_command, parse_report
from airflow_provider_brev.core.values import named
from airflow_provider_brev.staging.lepton_plan import newest_download
from airflow_provider_brev.steps.tao import TaoFacts, TaoWorkload, judge_tao_report
from airflow_provider_brev.steps.workload import judge_exit_code

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_provider_brev.core.lepton.follower import LeptonOutcome
    from airflow_provider_brev.steps.tao import TaoSpec
    from airflow_provider_brev.steps.workload import CommandSpec
    from airflow_provider_brev.utils.task_memory import TaskMemory


@dataclass(frozen=True)
class LeptonLaunch:
    """What a Lepton job's agent runs.

    :param image: the container image.
    :param command: the shell command (``bash -c``) in the working directory.
    :param env: plain environment variables (in the job spec: not for secrets).
    :param secret_env: secret environment variables (in the job's plan, a workspace secret; redacted in its log).
    :param files: files to write before the command (path below the working directory -> text).
    :param report: a script whose output is the workload's report (``None``: none).
    :param inputs: more downloads for the job besides the step's ``inputs`` (presigned: ``{"url", "path", "size"}``;
        TAO ``train``: the checkpoint it resumes from).
    """

    image: str
    command: str
    env: dict[str, str] | None = None
    secret_env: dict[str, str] | None = None
    files: dict[str, str] = field(default_factory=dict)
    report: str | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)


class LeptonWorkload(Protocol):
    """What a Lepton step runs (see the module docstring)."""

    def check(self) -> None:
        """Pre-submission checks; raise a typed error when the step must not start."""

    def mask(self) -> None:
        """Register the workload's secret values with Airflow's masker (in this process)."""

    def secrets(self) -> dict[str, str]:
        """The secret environment this process knows, name -> value: what the job's output must not show."""

    def launch(self) -> LeptonLaunch:
        """What the job runs."""

    def submitted(self, job: str, memory: TaskMemory, log: Any) -> None:
        """The job was submitted (not when this try found it submitted): tell what the verdict needs."""

    def result(self, job: str, outcome: LeptonOutcome, memory: TaskMemory) -> dict[str, Any]:
        """Judge the ended job from the agent's report (raise on failure) and return the task's result."""


def image_spec(params: Mapping[str, Any]) -> str:
    """The container image: a full reference with a tag or digest."""
    return named("image", validate_image, params.get("image"))


def _base_result(job: str, outcome: LeptonOutcome) -> dict[str, Any]:
    assert outcome.report is not None
    return {
        "exit_code": outcome.report.exit_code,
        "last_line": outcome.last_line,
        "job": job,
        "state": outcome.state,
        "log_tail": outcome.tail[-20:],
    }


class LeptonCommandWorkload:
    """A shell command in a container (:class:`~airflow_provider_brev.operators.lepton.LeptonJobOperator`).

    :param image: the container image.
    :param spec: the command (checked as the exec operator checks it).
    """

    def __init__(self, image: str, spec: CommandSpec) -> None:
        self.image = image
        self.spec = spec

    def check(self) -> None:
        """Nothing beyond the spec's checks."""

    def mask(self) -> None:
        self.spec.mask()

    def secrets(self) -> dict[str, str]:
        return dict(self.spec.secret_env or {})

    def launch(self) -> LeptonLaunch:
        spec = self.spec
        command = f"cd {shlex.quote(spec.cwd)} && {spec.command}" if spec.cwd else spec.command
        return LeptonLaunch(self.image, command, spec.env, spec.secret_env)

    def submitted(self, job: str, memory: TaskMemory, log: Any) -> None:
        """Nothing to tell."""

    def result(self, job: str, outcome: LeptonOutcome, memory: TaskMemory) -> dict[str, Any]:
        result = _base_result(job, outcome)
        judge_exit_code(job, int(result["exit_code"]), outcome.last_line, self.spec.skip_on_exit_code)
        return result


class LeptonTaoWorkload:
    """One TAO action as a Lepton job (:class:`~airflow_provider_brev.operators.lepton.LeptonTaoOperator`).

    The pre-launch checks are the Brev TAO workload's except the NGC key (a Lepton job pulls its image with the
    workspace's ``image_pull_secrets``); bind mounts do not apply (the job's directories are its working
    directory's).

    :param spec: the checked TAO parameters.
    """

    def __init__(self, spec: TaoSpec) -> None:
        self.spec = spec
        #: the Brev TAO workload's checks, secrets and resume point (``resumed``: the checkpoint this launch resumes
        #: from, ``None`` for a fresh run)
        self._tao = TaoWorkload(spec)

    @property
    def resumed(self) -> str | None:
        return self._tao.resumed

    def check(self) -> None:
        """The Brev TAO workload's checks, except the NGC key (the workspace's pull secret pulls the image)."""
        self._tao.check(registry_login=False)

    def mask(self) -> None:
        self._tao.mask()

    def secrets(self) -> dict[str, str]:
        """``container_secret_env``, and the Hugging Face token once the checks found it (not after a deferral)."""
        return {**(self.spec.container_secret_env or {}), **self._tao.secret_env}

    def launch(self) -> LeptonLaunch:
        """The TAO command; for ``train`` whose ``outputs`` hold a checkpoint of this run (an earlier try's job was
        lost or failed), the job downloads the newest one and resumes from it."""
        spec = self.spec
        if not self._tao.spec_text:
            self.check()
        results = spec.results_dir.rstrip("/")
        resume = self.resume_point(results)
        overrides = dict(spec.overrides)
        if resume is not None:
            checkpoint = resume["path"].rsplit("/", 1)[-1]
            overrides[f"{spec.action}.{RESUME_KEY}"] = f"{container_path(results)}/{spec.action}/{checkpoint}"
            self._tao.resumed = checkpoint
        command = tao_job_command(
            task=spec.task,
            action=spec.action,
            spec_file=spec.spec_name,
            results_dir=results,
            overrides=overrides,
            num_gpus=spec.num_gpus,
        )
        report = build_report_command(results_dir=results, action=spec.action, job_log=f"{STATE_DIR}/job.log")
        return LeptonLaunch(
            spec.image,
            command,
            env=spec.container_env,
            secret_env=self._tao.secret_env or None,
            files={f"{results}/specs/{spec.spec_name}": self._tao.spec_text},
            report=report,
            inputs=[resume] if resume is not None else [],
        )

    def resume_point(self, results: str) -> dict[str, Any] | None:
        """The newest checkpoint of this run in the outputs that cover ``<results>/train`` as a presigned download
        into that directory, or ``None`` (not ``train``, no such outputs, or no checkpoint yet)."""
        spec = self.spec
        uri = spec.checkpoints_uri()
        if uri is None:
            return None
        return newest_download(uri, f"{results}/{spec.action}", pick=newest_checkpoint, aws_conn_id=spec.aws_conn_id)

    def submitted(self, job: str, memory: TaskMemory, log: Any) -> None:
        """Tell the checkpoint the job resumes from (the verdict needs it, maybe in another process: a deferral)."""
        if self.resumed:
            TaoFacts(memory).tell_resumed_from(self.resumed)
            log.info("Lepton job %s resumes TAO train from checkpoint %s (in its outputs).", job, self.resumed)

    def result(self, job: str, outcome: LeptonOutcome, memory: TaskMemory) -> dict[str, Any]:
        result = _base_result(job, outcome)
        assert outcome.report is not None
        judged = judge_tao_report(
            self.spec,
            parse_report(outcome.report.report),
            exit_code=int(result["exit_code"]),
            last_line=outcome.last_line,
            resumed=self._tao.resumed_for(memory),
            name=job,
        )
        judged.pop("verdict")
        return {**result, **judged}
