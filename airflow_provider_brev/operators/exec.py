"""The exec operator: run a shell command on a Brev instance exactly once, as a detached job or in the foreground.

A step operator (:class:`~airflow_provider_brev.operators.step.BrevStepOperator`) whose workload is the command
(:class:`~airflow_provider_brev.steps.workload.CommandWorkload`); the step service
(:mod:`airflow_provider_brev.steps.service`) runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.instances.records import XCOM_INSTANCE_NAME
from airflow_provider_brev.instances.release import ON_KILL_TIMEOUT
from airflow_provider_brev.jobs.handle import XCOM_JOB
from airflow_provider_brev.operators.step import BrevStepOperator
from airflow_provider_brev.utils.mixins import DEFAULT_OUTPUT_SYNC_INTERVAL, CommandParams, parameter_names

if TYPE_CHECKING:
    from airflow_provider_brev.steps.workload import Workload

__all__ = ["DEFAULT_OUTPUT_SYNC_INTERVAL", "ON_KILL_TIMEOUT", "XCOM_INSTANCE_NAME", "XCOM_JOB", "BrevExecOperator"]


class BrevExecOperator(CommandParams, BrevStepOperator):
    """Run a command on a Brev instance exactly once, stream its output into the task log, survive the worker.

    By default (``detach=True``) the command runs as a **detached remote job** with a durable handle: a per-try
    job id and directory on the instance, a launch guard so the same try can never start it twice, the exit
    code written atomically, and the log read incrementally by byte offset (one ``brev exec`` per poll, status
    and log together). Remote output appears in the task log as it is produced, prefixed with the instance
    name, and the whole remaining log is drained at the end. ``detach=False`` runs a short command in the
    foreground, still exactly once and with its real exit code.

    **Resume instead of relaunch.** The handle goes to XCom (key ``brev_job``) before any wait and, on Airflow
    3.3+, to the task state store. A retry re-attaches to an earlier try's job if it still runs, or collects its
    result if it finished successfully, whatever Airflow lost in between; a job that failed or was lost is
    relaunched with a new job id. A task cleared by a user runs its command again.

    **Secrets.** ``secret_env`` values never appear on any command line (the real CLI hands exec's command
    string to ``ssh``, visible in ``ps``), log, XCom or trigger payload: they travel in a 0600 file copied with
    ``brev copy`` that the job sources and deletes, and output that prints them leaves the instance redacted.

    Where it runs (an existing instance or an ephemeral one), its ``inputs``/``outputs`` and the recovery of a lost
    instance are those of every step operator (:class:`~airflow_provider_brev.operators.step.BrevStepOperator`,
    whose parameters it takes). The result is ``{"exit_code", "last_line", "instance_name", "job_id"}``, plus
    ``outputs`` (``{directory: uri}``) and ``sync`` (reports) when the step declares data.

    The command is a :class:`~airflow_provider_brev.utils.mixins.CommandParams` (``command``, ``env``,
    ``secret_env``, ``cwd``, ``skip_on_exit_code``), as on :class:`~airflow_provider_brev.operators.lepton.LeptonJobOperator`.

    :param detach: run as a detached job (default) or in the foreground.
    :param kwargs: the command's parameters, and the step parameters of
        :class:`~airflow_provider_brev.operators.step.BrevStepOperator` (``instance_name`` or ``gpu``, ``timeout``,
        ``deferrable``, ``inputs``, ``outputs`` ...).
    """

    template_fields = tuple(sorted({*BrevStepOperator.template_fields, *CommandParams.template_fields}))
    template_ext = (".sh", ".bash")
    template_fields_renderers = CommandParams.template_fields_renderers
    workload_parameters = (*parameter_names(CommandParams), "detach")

    def __init__(self, *, detach: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.detach = detach

    def workload(self, parameters: dict[str, Any]) -> Workload:
        from airflow_provider_brev.steps.workload import CommandWorkload, command_spec

        return CommandWorkload(command_spec(parameters))
