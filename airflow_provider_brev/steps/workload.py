"""What a step runs: the workload port of the step service, and the plain command.

A :class:`Workload` is asked by :class:`~airflow_provider_brev.steps.service.StepService`, in this order:

1. :meth:`~Workload.check` -- before anything is created or paid for (pre-launch checks; no ``brev`` call);
2. :meth:`~Workload.prepare` -- once the instance is ready, before the command is launched or re-attached to
   (TAO: the spec file, ``docker login``, the image's pull started in the background);
3. :meth:`~Workload.ready` -- right before a launch, after the inputs synced: wait for what ``prepare`` started in
   the background (TAO: the image's pull, which ran while the inputs synced);
4. :meth:`~Workload.launch` -- then: the command to launch (TAO: resuming from the newest checkpoint when there is
   one);
5. :meth:`~Workload.result` -- once the command ended: judge it and say what the task returns.

:meth:`~Workload.mask` registers the workload's secret values with Airflow's masker in every process that handles
the task (a task resumed after a deferral runs in another one). :class:`CommandWorkload` is the plain command of
:class:`~airflow_provider_brev.operators.exec.BrevExecOperator`; the TAO workload is
:mod:`airflow_provider_brev.steps.tao`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_brev._compat import AirflowSkipException, mask_secret
from airflow_provider_brev.core.jobs.handle import MAX_JOB_ID_LENGTH
from airflow_provider_brev.core.jobs.remote import RemoteJob, build_launch_command
from airflow_provider_brev.core.jobs.shell import secret_file_name
from airflow_provider_brev.core.values import env_mapping, exit_codes, optional, safe_text
from airflow_provider_brev.exceptions import BrevCommandError, BrevInvalidInputError
from airflow_provider_brev.jobs.runner import JobLaunch

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from airflow_provider_brev.core.instances.identity import InstanceRef
    from airflow_provider_brev.hooks.brev import BrevHook
    from airflow_provider_brev.staging.step_data import StepData
    from airflow_provider_brev.utils.task_memory import TaskMemory


@dataclass
class StepRun:
    """What one try of a step shares with its workload: the hook, the log, the memory and the data.

    :param hook: the task's Brev hook.
    :param log: the task's logger.
    :param memory: the task's memory.
    :param data: the step's inputs and outputs.
    :param killed: returns ``True`` once the task was killed.
    """

    hook: BrevHook
    log: Any
    memory: TaskMemory
    data: StepData
    killed: Callable[[], bool]


class Workload(Protocol):
    """What a step runs (see the module docstring)."""

    def check(self) -> None:
        """Pre-launch checks; raise a typed error when the step must not start (nothing is created)."""

    def mask(self) -> None:
        """Register the workload's secret values with Airflow's masker (in this process)."""

    def prepare(self, run: StepRun, ref: InstanceRef) -> None:
        """On the ready instance, before the command is launched or re-attached to."""

    def ready(self, run: StepRun, ref: InstanceRef) -> None:
        """Right before a launch (not a re-attach), after the inputs synced: wait for what ``prepare`` started."""

    def launch(self, run: StepRun, ref: InstanceRef) -> JobLaunch:
        """Right before a launch (not a re-attach), after :meth:`ready`: what to launch."""

    def result(self, run: StepRun, ref: InstanceRef, job: RemoteJob | None, exit_code: int, last_line: str) -> Any:
        """Judge the ended command (raise on failure) and return the task's result."""


@dataclass(frozen=True)
class CommandSpec:
    """A plain command (:func:`command_spec`).

    :param command: the shell command.
    :param env: plain environment variables.
    :param secret_env: secret environment variables.
    :param cwd: remote working directory.
    :param skip_on_exit_code: exit codes that mark the task skipped.
    """

    command: str
    env: dict[str, str] | None
    secret_env: dict[str, str] | None
    cwd: str | None
    skip_on_exit_code: tuple[int, ...]

    def mask(self) -> None:
        """Register the secret values with Airflow's masker (in this process); every compute's command does."""
        for value in (self.secret_env or {}).values():
            mask_secret(value)


def check_command(command: Any, *, env: Any = None, cwd: Any = None, secret_names: list[str] | None = None) -> str:
    """The command: not empty, no NUL, and short enough for the remote-job builder once wrapped (checked by
    building the launch script for the longest job id, as the launch would)."""
    if not isinstance(command, str) or not command.strip():
        raise BrevInvalidInputError("The command is empty: pass the shell command to run on the instance.")
    if "\x00" in command:
        raise BrevInvalidInputError("command must not contain NUL characters.")
    job = RemoteJob("j" * MAX_JOB_ID_LENGTH)
    names = sorted(secret_names or [])
    try:
        build_launch_command(
            job,
            command,
            env=env,
            cwd=cwd,
            secret_env_path=secret_file_name(job.job_id) if names else None,
            secret_names=names,
        )
    except ValueError as err:
        size = len(command.encode("utf-8"))
        raise BrevInvalidInputError(f"command ({size} bytes): {err}") from None
    return command


def command_spec(params: Mapping[str, Any]) -> CommandSpec:
    """The exec operator's command parameters, checked (raises ``BrevInvalidInputError`` naming the parameter)."""
    env = env_mapping("env", params.get("env"))
    secret_env = env_mapping("secret_env", params.get("secret_env"))
    cwd = optional(safe_text, "cwd", params.get("cwd"))
    command = check_command(params.get("command"), env=env, cwd=cwd, secret_names=sorted(secret_env or {}))
    skip = exit_codes("skip_on_exit_code", params.get("skip_on_exit_code"))
    return CommandSpec(command, env, secret_env, cwd, tuple(skip))


def judge_exit_code(name: str, exit_code: int, last_line: str, skip_on_exit_code: tuple[int, ...] = ()) -> None:
    """Skip the task (``skip_on_exit_code``) or fail it (non-zero) for a command's exit code."""
    if exit_code in skip_on_exit_code:
        raise AirflowSkipException(f"The command exited with {exit_code}, listed in skip_on_exit_code.")
    if exit_code != 0:
        raise BrevCommandError(
            f"The command on {name!r} failed with exit code {exit_code}" + (f": {last_line}" if last_line else "."),
            exit_code=exit_code,
        )


def command_result(name: str, job: RemoteJob | None, exit_code: int, last_line: str) -> dict[str, Any]:
    """What a successful command step returns (XCom)."""
    return {
        "exit_code": exit_code,
        "last_line": last_line,
        "instance_name": name,
        "job_id": job.job_id if job else None,
    }


class CommandWorkload:
    """The plain shell command of :class:`~airflow_provider_brev.operators.exec.BrevExecOperator`.

    :param spec: the command.
    """

    def __init__(self, spec: CommandSpec) -> None:
        self.spec = spec

    def check(self) -> None:
        """Nothing beyond the spec's checks."""

    def mask(self) -> None:
        self.spec.mask()

    def prepare(self, run: StepRun, ref: InstanceRef) -> None:
        """Nothing to prepare."""

    def ready(self, run: StepRun, ref: InstanceRef) -> None:
        """Nothing to wait for."""

    def launch(self, run: StepRun, ref: InstanceRef) -> JobLaunch:
        spec = self.spec
        return JobLaunch(spec.command, spec.env, spec.secret_env, spec.cwd)

    def result(
        self, run: StepRun, ref: InstanceRef, job: RemoteJob | None, exit_code: int, last_line: str
    ) -> dict[str, Any]:
        judge_exit_code(ref.name, exit_code, last_line, self.spec.skip_on_exit_code)
        return command_result(ref.name, job, exit_code, last_line)
