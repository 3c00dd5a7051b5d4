"""Up-front checks of the exec, TAO and preflight operators' rendered parameters (issue 11: bad input costs nothing).

Each ``check_*`` function runs at the start of ``execute`` (and of ``execute_complete``), before any ``brev`` call:
it checks every parameter with the pure checks of :mod:`airflow_provider_brev.cli.validation` and normalises the
task's attributes in place (numbers from rendered text, booleans from ``"true"``, empty text to ``None``), or
raises :class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` (no retry is spent) naming the parameter.
The tasks are passed duck-typed: this layer does not import the operators.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_brev._compat import default_deferrable
from airflow_provider_brev.cli.manifest import validate_inputs, validate_outputs
from airflow_provider_brev.cli.remote_job import MAX_JOB_ID_LENGTH, RemoteJob, build_launch_command
from airflow_provider_brev.cli.shell import secret_file_name
from airflow_provider_brev.cli.tao import validate_image
from airflow_provider_brev.cli.validation import (
    bool_value,
    choice,
    conn_id,
    directory,
    duration_seconds,
    env_mapping,
    exit_codes,
    instance_name,
    integer,
    is_empty,
    named,
    optional,
    positive_int,
    regex,
    s3_uri,
    safe_text,
)
from airflow_provider_brev.exceptions import BrevInvalidInputError
from airflow_provider_brev.utils.provisioning import InstanceRequest, instance_types_list

#: What ``on_kill`` does with a detached job: kill it, or keep it running so a retry can re-attach.
ON_KILL_ACTIONS = ("kill", "keep")

__all__ = ["ON_KILL_ACTIONS", "check_exec_parameters", "check_preflight_parameters", "check_tao_parameters"]


def _text_list(name: str, value: Any, check: Any = safe_text) -> list[str]:
    """A list of texts (one text alone counts as a list of one), each passing ``check``; ``[]`` when empty."""
    if is_empty(value):
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise BrevInvalidInputError(f"{name} must be a list of strings, got {value!r}.")
    return [check(name, item) for item in items]


def _instance_target(task: Any) -> None:
    """``instance_name`` (an existing instance) or ``gpu``/``instance_types`` (ephemeral), exactly one of them;
    an ephemeral request is checked and normalised by :meth:`InstanceRequest.validate`."""
    task.instance_name = optional(instance_name, "instance_name", task.instance_name)
    wants_instance = not is_empty(task.gpu) or bool(instance_types_list(task.instance_types))
    if task.instance_name and wants_instance:
        raise BrevInvalidInputError(
            "Pass either instance_name (run on an existing instance) or gpu/instance_types (ephemeral "
            "instance for this task), not both."
        )
    if not task.instance_name and not wants_instance:
        raise BrevInvalidInputError(
            "No instance: pass instance_name (e.g. create.output), or gpu / instance_types for an ephemeral "
            "instance created and deleted by this task."
        )
    if task.instance_name:
        task.require_docker = bool_value("require_docker", task.require_docker, default=False)
        return
    request = InstanceRequest(
        gpu=task.gpu,
        instance_types=task.instance_types,
        min_vram=task.min_vram,
        max_lifetime=task.max_lifetime,
        require_docker=task.require_docker,
    )
    request.validate()
    task.gpu, task.instance_types, task.min_vram = request.gpu, request.instance_types, request.min_vram
    task.max_lifetime, task.require_docker = request.max_lifetime, request.require_docker


def _command(task: Any) -> None:
    """The command: not empty, no NUL, and short enough for the remote-job builder once wrapped (checked by
    building the launch script for the longest job id, as the launch would)."""
    command = task.command
    if not isinstance(command, str) or not command.strip():
        raise BrevInvalidInputError("The command is empty: pass the shell command to run on the instance.")
    if "\x00" in command:
        raise BrevInvalidInputError("command must not contain NUL characters.")
    job = RemoteJob("j" * MAX_JOB_ID_LENGTH)
    secret_names = sorted(task.secret_env or {})
    try:
        build_launch_command(
            job,
            command,
            env=task.env,
            cwd=task.cwd,
            secret_env_path=secret_file_name(job.job_id) if secret_names else None,
            secret_names=secret_names,
        )
    except ValueError as err:
        size = len(command.encode("utf-8"))
        raise BrevInvalidInputError(f"command ({size} bytes): {err}") from None


def check_exec_parameters(task: Any) -> None:
    """Check and normalise the rendered parameters of a
    :class:`~airflow_provider_brev.operators.exec.BrevExecOperator` (and of its TAO subclasses).

    :param task: the operator.
    """
    optional(conn_id, "brev_conn_id", task.brev_conn_id)
    task.aws_conn_id = optional(conn_id, "aws_conn_id", task.aws_conn_id)
    _instance_target(task)
    task.env = env_mapping("env", task.env)
    task.secret_env = env_mapping("secret_env", task.secret_env)
    task.cwd = optional(safe_text, "cwd", task.cwd)
    _command(task)
    task.timeout = optional(duration_seconds, "timeout", task.timeout)
    task.deferrable = bool_value("deferrable", task.deferrable, default=default_deferrable())
    task.detach = bool_value("detach", task.detach, default=True)
    task.skip_on_exit_code = exit_codes("skip_on_exit_code", task.skip_on_exit_code)
    task.poll_interval = duration_seconds("poll_interval", task.poll_interval)
    task.ready_timeout = duration_seconds("ready_timeout", task.ready_timeout)
    task.output_sync_interval = duration_seconds("output_sync_interval", task.output_sync_interval)
    task.on_kill_action = choice("on_kill_action", task.on_kill_action, ON_KILL_ACTIONS)
    task.log_chunk_bytes = positive_int("log_chunk_bytes", task.log_chunk_bytes)
    # consecutive failed polls tolerated: 0 gives up at the first one
    task.max_poll_failures = integer("max_poll_failures", task.max_poll_failures, minimum=0)
    task.max_instance_recoveries = integer("max_instance_recoveries", task.max_instance_recoveries, minimum=0)
    task.progress_regex = optional(regex, "progress_regex", task.progress_regex)
    task.checkpoint_regex = optional(regex, "checkpoint_regex", task.checkpoint_regex)
    task.create_task_id = optional(safe_text, "create_task_id", task.create_task_id)
    validate_inputs(task.inputs)
    validate_outputs(task.outputs)


def _prelaunch(task: Any) -> None:
    """What the TAO operators and the preflight operator share: the S3 inputs, the paths, the connections."""
    task.s3_inputs = _text_list("s3_inputs", task.s3_inputs, s3_uri)
    task.input_paths = _text_list("input_paths", task.input_paths)
    task.instance_paths = _text_list("instance_paths", task.instance_paths)
    for name in ("aws_conn_id", "ngc_conn_id", "hf_conn_id"):
        setattr(task, name, optional(conn_id, name, getattr(task, name)))
    if not is_empty(task.spec) and not isinstance(task.spec, dict):
        raise BrevInvalidInputError(f"spec must be a dict (the experiment spec), got a {type(task.spec).__name__}.")


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


def check_tao_parameters(task: Any) -> None:
    """Check and normalise the rendered TAO parameters of a
    :class:`~airflow_provider_brev.operators.tao.TaoOperator` (the operator then builds its command, and
    :func:`check_exec_parameters` checks the rest).

    :param task: the operator.
    """
    task.image = named("image", validate_image, task.image)
    task.task = safe_text("task", task.task)
    task.action = safe_text("action", task.action)
    task.spec_file = optional(safe_text, "spec_file", task.spec_file)
    task.spec_s3_uri = optional(s3_uri, "spec_s3_uri", task.spec_s3_uri, object_key=True)
    if not is_empty(task.overrides) and not isinstance(task.overrides, dict):
        raise BrevInvalidInputError(f"overrides must be a dict of key=value overrides, got {task.overrides!r}.")
    task.results_dir = directory("results_dir", task.results_dir)
    task.num_gpus = _num_gpus(task.num_gpus)
    task.shm_size = optional(safe_text, "shm_size", task.shm_size)
    task.ipc = optional(safe_text, "ipc", task.ipc)
    task.mounts = _mounts(task.mounts)
    task.container_env = env_mapping("container_env", task.container_env)
    task.container_secret_env = env_mapping("container_secret_env", task.container_secret_env)
    _prelaunch(task)
    task.pull_timeout = duration_seconds("pull_timeout", task.pull_timeout)
    task.require_new_checkpoint = bool_value(
        "require_new_checkpoint", task.require_new_checkpoint, default=task.action == "train"
    )


def check_preflight_parameters(task: Any) -> None:
    """Check and normalise the rendered parameters of a
    :class:`~airflow_provider_brev.operators.tao.BrevPreflightOperator`.

    :param task: the operator.
    """
    optional(conn_id, "brev_conn_id", task.brev_conn_id)
    task.image = optional(lambda name, value: named(name, validate_image, value), "image", task.image)
    _prelaunch(task)
    task.check_brev = bool_value("check_brev", task.check_brev, default=True)
