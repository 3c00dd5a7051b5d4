"""The exec operator: run a command on a Brev instance exactly once, as a detached job or in the foreground.

The operator is templating, validation, XCom, the task state store and ``defer``; launching, re-attaching and
following the job is :mod:`airflow_provider_brev.utils.job_runner`, shared with the TAO operators and
:class:`~airflow_provider_brev.triggers.brev.BrevRemoteJobTrigger`.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import (
    AirflowSkipException,
    conf,
    deferral_settle_seconds,
    mask_secret,
)
from airflow_provider_brev.cli.identity import InstanceRef
from airflow_provider_brev.cli.job_attempts import EarlierJob, earlier_jobs, generation_start
from airflow_provider_brev.cli.job_follower import SYNC_DUE, TIMED_OUT, FollowPolicy, JobOutcome, outcome_error
from airflow_provider_brev.cli.job_handle import generate_job_id
from airflow_provider_brev.cli.recovery import DEFAULT_MAX_INSTANCE_RECOVERIES, EVENT_INSTANCE_LOST
from airflow_provider_brev.cli.remote_job import DEFAULT_MAX_BYTES, RemoteJob
from airflow_provider_brev.exceptions import (
    BrevCommandError,
    BrevError,
    error_from_event,
)
from airflow_provider_brev.operators.base import BrevBaseOperator
from airflow_provider_brev.sensors.brev import DEFAULT_READY_TIMEOUT
from airflow_provider_brev.utils.events import raise_for_error_event, validate_event
from airflow_provider_brev.utils.job_runner import JobRunner, attach_or_launch, cleanup_job
from airflow_provider_brev.utils.mixins import brev_template_fields
from airflow_provider_brev.utils.parameter_checks import check_exec_parameters
from airflow_provider_brev.utils.provisioning import (
    DEFAULT_MAX_LIFETIME,
    InstanceRequest,
)
from airflow_provider_brev.utils.recovery import upstream_task_ids
from airflow_provider_brev.utils.release import ON_KILL_TIMEOUT
from airflow_provider_brev.utils.step_data import StepData, render_keys, sync_seconds
from airflow_provider_brev.utils.step_instance import XCOM_INSTANCE_NAME, StepInstance

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.sdk import Context

__all__ = ["ON_KILL_TIMEOUT", "XCOM_INSTANCE_NAME", "XCOM_JOB", "BrevExecOperator"]

XCOM_JOB = "brev_job"
STATE_STORE_JOB_KEY = "brev_job"
#: Default seconds between output syncs while the command runs.
DEFAULT_OUTPUT_SYNC_INTERVAL = 300.0


class BrevExecOperator(BrevBaseOperator):
    """Run a command on a Brev instance exactly once, stream its output into the task log, survive the worker.

    By default (``detach=True``) the command runs as a **detached remote job** with a durable handle: a per-try
    job id and directory on the instance, a launch guard so the same try can never start it twice, the exit
    code written atomically, and the log read incrementally by byte offset (one ``brev exec`` per poll, status
    and log together). Remote output appears in the task log as it is produced, prefixed with the instance
    name, and the whole remaining log is drained at the end.

    **Resume instead of relaunch.** The handle goes to XCom (key ``brev_job``) before any wait and, on Airflow
    3.3+, to the task state store. A retry after the worker died re-attaches to the previous try's job if it
    still runs, or collects its result if it finished successfully; a job that failed or was lost is relaunched
    with a new job id.

    **Secrets.** ``secret_env`` values never appear on any command line (the real CLI hands exec's command
    string to ``ssh``, visible in ``ps``), log, XCom or trigger payload: they travel in a 0600 file copied with
    ``brev copy`` that the job sources and deletes.

    **Ephemeral mode.** With no ``instance_name`` but a ``gpu`` (or ``instance_types``), the operator creates
    an instance (the same idempotent rules as
    :class:`~airflow_provider_brev.operators.brev.BrevCreateInstanceOperator`), waits until it is ready, runs the
    job and deletes the instance in a ``finally`` -- on success, failure and timeout.

    ``detach=False`` runs a short command in the foreground, still exactly once and with its real exit code.

    **The step owns its data** (:mod:`airflow_provider_brev.utils.step_data`). ``inputs`` are synced
    incrementally before a launch (not a re-attach); ``outputs`` are uploaded every ``output_sync_interval`` while
    the command runs (and at a log line matching ``checkpoint_regex``) and when it ends, **success or failure** (an
    upload failure never masks the command's error). Deferred, the trigger hands back a ``sync_due`` event, the
    worker uploads and defers again. The result gains ``outputs`` (``{directory: uri}``) and ``sync`` (reports).

    **A lost instance is recovered.** When the instance is gone (not listed, FAILURE, or unreachable past the
    failure budget) before launch or while the command runs, the step re-creates it under the same name with the
    spec its create task recorded (the upstream task whose XCom ``brev_instance`` names it, or
    ``create_task_id``), waits until it is ready, re-syncs its inputs and runs the command again
    (:mod:`airflow_provider_brev.utils.recovery`), at most ``max_instance_recoveries`` times per task instance.
    Only instances the DAG created are re-created; ephemeral instances are created again with the same request.

    :param command: the shell command (templated; a path ending in ``.sh``/``.bash`` is read as a template).
    :param instance_name: the instance (templated; e.g. ``create.output``). Omit it for ephemeral mode.
    :param env: plain environment variables (they are on the remote command line; not for secrets).
    :param secret_env: secret environment variables (templated; never on a command line or in a log).
    :param cwd: remote working directory.
    :param timeout: seconds (or timedelta) for the whole command: an absolute deadline that also holds across
        deferrals; on expiry the remote job is killed and the task fails.
    :param deferrable: follow the job from the triggerer, holding no worker slot (default:
        ``[operators] default_deferrable``).
    :param detach: run as a detached job (default) or in the foreground.
    :param skip_on_exit_code: exit code(s) that mark the task skipped instead of failed.
    :param poll_interval: seconds between polls while the job prints nothing new.
    :param on_kill_action: ``kill`` the remote job when the task is killed (default) or ``keep`` it running so a
        retry can re-attach.
    :param gpu: ephemeral mode: GPU request such as ``"L40S:1"``.
    :param instance_types: ephemeral mode: explicit instance types.
    :param min_vram: ephemeral mode: minimum VRAM per GPU in GB.
    :param ready_timeout: ephemeral mode: seconds to wait for the new instance to be ready.
    :param require_docker: ephemeral mode: readiness also requires ``docker info``.
    :param max_lifetime: ephemeral mode: expiry written into the instance name for the janitor.
    :param log_chunk_bytes: maximum log bytes fetched per poll.
    :param max_poll_failures: consecutive failed polls (connection drops) tolerated before failing.
    :param progress_regex: a regex with two groups ``(done, total)``; matching output lines are also logged as a
        percentage (the TAO operators use it for epochs).
    :param inputs: S3 URI prefix -> directory on the instance (templated; relative = under the remote home).
    :param outputs: directory on the instance -> S3 URI prefix (templated).
    :param aws_conn_id: the Amazon connection for ``inputs``/``outputs`` (its keys never reach the instance).
    :param output_sync_interval: seconds (or timedelta) between output syncs while the command runs.
    :param checkpoint_regex: a log line matching it makes an output sync due at once (TAO ``train`` sets it).
    :param max_instance_recoveries: how often this task instance may re-create its lost instance (all tries).
    :param create_task_id: the task that created the instance (default: the upstream task whose XCom
        ``brev_instance`` names it).
    :param brev_conn_id: the Airflow connection id of type ``brev``.
    """

    template_fields = brev_template_fields(
        "instance_name",
        "command",
        "env",
        "secret_env",
        "cwd",
        "gpu",
        "instance_types",
        "min_vram",
        "inputs",
        "outputs",
        "aws_conn_id",
    )
    template_ext = (".sh", ".bash")
    template_fields_renderers = {"command": "bash", "env": "json"}

    def __init__(
        self,
        *,
        command: str,
        instance_name: str | None = None,
        env: dict[str, str] | None = None,
        secret_env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | timedelta | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        detach: bool = True,
        skip_on_exit_code: int | list[int] | None = None,
        poll_interval: float = 5.0,
        on_kill_action: str = "kill",
        gpu: str | None = None,
        instance_types: list[str] | str | None = None,
        min_vram: float | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        require_docker: bool = False,
        max_lifetime: timedelta | float = DEFAULT_MAX_LIFETIME,
        log_chunk_bytes: int = DEFAULT_MAX_BYTES,
        max_poll_failures: int = 30,
        progress_regex: str | None = None,
        inputs: dict[str, str] | None = None,
        outputs: dict[str, str] | None = None,
        aws_conn_id: str | None = "aws_default",
        output_sync_interval: float | timedelta = DEFAULT_OUTPUT_SYNC_INTERVAL,
        checkpoint_regex: str | None = None,
        max_instance_recoveries: int = DEFAULT_MAX_INSTANCE_RECOVERIES,
        create_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.progress_regex = progress_regex
        self.inputs = inputs
        self.outputs = outputs
        self.aws_conn_id = aws_conn_id
        self.output_sync_interval = output_sync_interval
        self.checkpoint_regex = checkpoint_regex
        self.max_instance_recoveries = max_instance_recoveries
        self.create_task_id = create_task_id
        self.command = command
        self.instance_name = instance_name
        self.env = env
        self.secret_env = secret_env
        self.cwd = cwd
        self.timeout = timeout
        self.deferrable = deferrable
        self.detach = detach
        self.skip_on_exit_code = skip_on_exit_code
        self.poll_interval = poll_interval
        self.on_kill_action = on_kill_action
        self.gpu = gpu
        self.instance_types = instance_types
        self.min_vram = min_vram
        self.ready_timeout = ready_timeout
        self.require_docker = require_docker
        self.max_lifetime = max_lifetime
        self.log_chunk_bytes = log_chunk_bytes
        self.max_poll_failures = max_poll_failures
        self._handle: dict[str, Any] | None = None
        self._launching: tuple[str, RemoteJob] | None = None  # this try's job while its launch call runs
        self._step_instance: StepInstance | None = None
        self._ti: Any = None
        self._deferring = False

    # -- input -----------------------------------------------------------------------------------
    @property
    def ephemeral(self) -> bool:
        return not self.instance_name

    def _validate(self) -> None:
        """Reject bad input before anything is created or launched (every rendered parameter; normalised in
        place): :func:`~airflow_provider_brev.utils.parameter_checks.check_exec_parameters`."""
        check_exec_parameters(self)

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        """Also render the keys of ``inputs`` (S3 URIs) and ``outputs`` (directories): Airflow renders values only."""
        super().render_template_fields(context, jinja_env)
        render_keys(self, context, jinja_env, "inputs", "outputs")

    def _step_data(self, context: Context) -> StepData:
        data = StepData(self.hook, self.log, inputs=self.inputs, outputs=self.outputs, aws_conn_id=self.aws_conn_id)
        data.ti = context["ti"]
        return data

    def _timeout_seconds(self) -> float | None:
        if self.timeout is None:
            return None
        if isinstance(self.timeout, timedelta):
            return self.timeout.total_seconds()
        return float(self.timeout)

    def _skip_codes(self) -> set[int]:
        codes = self.skip_on_exit_code
        if codes is None:
            return set()
        return {int(codes)} if isinstance(codes, int) else {int(c) for c in codes}

    def _plain_env(self) -> dict[str, str] | None:
        return {str(k): str(v) for k, v in self.env.items()} if self.env else None

    def _secret_env(self) -> dict[str, str] | None:
        return {str(k): str(v) for k, v in self.secret_env.items()} if self.secret_env else None

    # -- instance --------------------------------------------------------------------------------
    def _compute(self) -> StepInstance:
        """The step's instance service (built once per try, after validation)."""
        if self._step_instance is None:
            request = None
            if self.ephemeral:
                request = InstanceRequest(
                    gpu=self.gpu or None,
                    instance_types=self.instance_types,
                    min_vram=self.min_vram,
                    max_lifetime=self.max_lifetime,
                )
            self._step_instance = StepInstance(
                self.hook,
                self.log,
                instance_name=self.instance_name or None,
                request=request,
                ready_timeout=float(self.ready_timeout),
                require_docker=bool(self.require_docker),
                max_recoveries=int(self.max_instance_recoveries),
                create_task_id=self.create_task_id or None,
                upstream=upstream_task_ids(self),
                killed=lambda: self._killed,
            )
        return self._step_instance

    # -- execution -------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        self._validate()
        self._ti = context["ti"]
        self._prepare_command()
        self._step_data(context).check_locations()  # every S3 location reachable, before anything is created
        seconds = self._timeout_seconds()
        deadline = None if seconds is None else time.time() + seconds
        self._deferring = False
        compute = self._compute()
        try:
            ref = compute.acquire(context)
            return self._with_recovery(context, ref, lambda current: self._run(context, current, deadline), deadline)
        finally:
            self.wait_for_kill_cleanup()
            if not self._deferring:
                compute.release()

    def _prepare_command(self) -> None:
        """Before the first launch (and again before a launch after a deferral): mask the secrets. Subclasses
        also build their command here."""
        self._mask_secrets()

    def _mask_secrets(self) -> None:
        """Register the secret values with Airflow's masker (every worker process that handles the task)."""
        for value in (self._secret_env() or {}).values():
            mask_secret(value)

    def _with_recovery(
        self, context: Context, ref: InstanceRef, step: Callable[[InstanceRef], Any], deadline: float | None
    ) -> Any:
        """Run ``step`` on the instance; when it fails because the instance is lost, re-create the instance and
        run the command again on it (within ``max_instance_recoveries``)."""
        while True:
            try:
                return step(ref)
            except BrevError as err:
                ref = self._compute().recover(context, ref, err)
                self._prepare_command()
                step = lambda current: self._run(context, current, deadline)  # noqa: E731

    def _run(self, context: Context, ref: InstanceRef, deadline: float | None) -> Any:
        """Prepare the instance, launch (or re-attach to) the command and follow it to its result."""
        name = ref.name
        self._prepare_instance(context, name)
        if not self.detach:
            return self._run_foreground(context, name, self._launch_command(context, name), deadline)
        job = self._attach_or_launch(context, name, before_launch=lambda: self._launch_command(context, name))
        self._handle = {
            "instance_name": name,
            "instance_id": ref.id,
            "job": job.to_dict(),
            "deadline": deadline,
            "ephemeral": self.ephemeral,
        }
        self._ti.xcom_push(key=XCOM_JOB, value=self._handle)
        self._store(context, self._handle)
        if self.deferrable:
            self._defer_following(ref, job, deadline)
        runner = JobRunner(self.hook, name, job, self._follow_policy(deadline), self.log)
        outcome = runner.follow(on_sync=lambda: self._step_data(context).periodic_sync(name))
        return self._complete(context, name, job, outcome)

    def _follow_policy(self, deadline: float | None) -> FollowPolicy:
        syncing = bool(self.outputs)
        return FollowPolicy(
            poll_interval=float(self.poll_interval),
            max_bytes=int(self.log_chunk_bytes),
            max_poll_failures=int(self.max_poll_failures),
            deadline=deadline,
            progress_regex=self.progress_regex,
            sync_interval=sync_seconds(self.output_sync_interval) if syncing else None,
            checkpoint_regex=self.checkpoint_regex if syncing else None,
        )

    def _defer_following(
        self, ref: InstanceRef, job: RemoteJob, deadline: float | None, *, offset: int = 0, last_line: str = ""
    ) -> None:
        from airflow_provider_brev.triggers.brev import BrevRemoteJobTrigger  # triggerer-side code: lazy

        self._deferring = True
        self.defer(
            trigger=BrevRemoteJobTrigger.for_policy(
                instance_name=ref.name,
                instance_id=ref.id or None,
                job=job.to_dict(),
                brev_conn_id=self.brev_conn_id,
                policy=self._follow_policy(deadline),
                on_kill_action=self.on_kill_action,
                ephemeral=self.ephemeral,
                offset=offset,
                last_line=last_line,
                not_before=time.time() + deferral_settle_seconds(),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        self._validate()  # a resumed task is rendered anew: the same checks and normalisation
        self._mask_secrets()  # this worker process never saw them
        event = validate_event(event, "instance_name", "job")
        self._ti = context["ti"]
        self._deferring = False
        deadline = event.get("deadline")
        compute = self._compute()
        ref = compute.resume(event["instance_name"], event.get("instance_id"))
        try:
            return self._with_recovery(context, ref, lambda current: self._resume(context, current, event), deadline)
        finally:
            self.wait_for_kill_cleanup()
            if not self._deferring:
                compute.release()

    def _resume(self, context: Context, ref: InstanceRef, event: dict[str, Any]) -> Any:
        """Act on the trigger's event: sync outputs and defer again, report a loss, or collect the result."""
        name, job = ref.name, RemoteJob.from_dict(event["job"])
        if event["status"] == SYNC_DUE:
            self._step_data(context).periodic_sync(name)
            offset, last_line = int(event.get("offset", 0)), str(event.get("last_line", ""))
            self._defer_following(ref, job, event.get("deadline"), offset=offset, last_line=last_line)
        if event["status"] == EVENT_INSTANCE_LOST:
            raise error_from_event(str(event.get("message")), event.get("error_type"))
        raise_for_error_event(event, "Following the remote job failed")
        outcome = JobOutcome(
            state=event.get("state", event["status"]),
            exit_code=event.get("exit_code"),
            last_line=event.get("last_line", ""),
            offset=int(event.get("offset", 0)),
        )
        return self._complete(context, name, job, outcome)

    def _run_foreground(self, context: Context, name: str, command: str, deadline: float | None) -> Any:
        remaining = None if deadline is None else max(deadline - time.time(), 1.0)
        result = self.hook.run_command(
            name,
            command,
            timeout=remaining,
            env=self._plain_env(),
            cwd=self.cwd,
            secret_env=self._secret_env(),
        )
        return self._finish(context, name, None, result.exit_code, result.last_line)

    # -- detached jobs ---------------------------------------------------------------------------
    def _store(self, context: Context, handle: dict[str, Any] | None) -> None:
        """Record the handle in the Airflow 3.3+ task state store (shared by every try of this task)."""
        store = context.get("task_state_store")  # type: ignore[call-overload]
        if store is None:
            return
        try:
            if handle is None:
                store.delete(STATE_STORE_JOB_KEY)
            else:
                store.set(STATE_STORE_JOB_KEY, handle)
        except Exception as err:  # e.g. a 404 when Airflow no longer counts this try as running
            self.log.warning(
                "Could not write the job handle to the task state store (%s: %s); a retry still finds the job on "
                "the instance by its deterministic id.",
                type(err).__name__,
                err,
            )

    def _stored_job(self, context: Context, name: str) -> RemoteJob | None:
        """The job handle an earlier try recorded in the task state store for ``name``, if any."""
        store = context.get("task_state_store")  # type: ignore[call-overload]
        if store is None:
            return None
        try:
            stored = store.get(STATE_STORE_JOB_KEY)
        except Exception:
            return None
        stored_job = stored.get("job") if isinstance(stored, dict) else None
        if isinstance(stored, dict) and stored.get("instance_name") == name and isinstance(stored_job, dict):
            return RemoteJob.from_dict(stored_job)
        return None

    def _attach_or_launch(
        self, context: Context, name: str, *, before_launch: Callable[[], Any] | None = None
    ) -> RemoteJob:
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        map_index = map_index if isinstance(map_index, int) else -1
        try_number = int(ti.try_number)
        first_try = generation_start(
            try_number=try_number, max_tries=getattr(ti, "max_tries", None), retries=getattr(self, "retries", None)
        )
        ids: dict[str, Any] = {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id, "map_index": map_index}
        current = RemoteJob(generate_job_id(try_number=try_number, **ids))
        earlier = earlier_jobs(try_number=try_number, first_try=first_try, **ids)
        stored = self._stored_job(context, name)
        if stored is not None and stored.job_id not in {job.job_id for job in earlier} | {current.job_id}:
            earlier.insert(0, EarlierJob(stored.job_id, None, collectable=True))
        self._launching = (name, current)
        return attach_or_launch(
            self.hook,
            self.log,
            name,
            current,
            earlier,
            self.command,
            env=self._plain_env(),
            cwd=self.cwd,
            secret_env=self._secret_env(),
            before_launch=before_launch,
        )

    def _complete(self, context: Context, name: str, job: RemoteJob, outcome: JobOutcome) -> Any:
        """Turn a finished job into the task's result; forget the handle (and the remote job dir) once collected."""
        try:
            error = outcome_error(outcome, name, job.job_id)
            if error is not None:
                if outcome.state == TIMED_OUT:  # killed at its deadline: what it wrote is evidence
                    self._step_data(context).final_sync(name, command_failed=True)
                raise error
            return self._finish(context, name, job, int(outcome.exit_code), outcome.last_line)  # type: ignore[arg-type]
        finally:
            if outcome.collected and not outcome.succeeded:
                # A job that succeeded keeps its directory: if this try does not succeed in Airflow after all (a
                # failure after the job, the scheduler's deferral race), the retry collects it instead of running
                # the command again. The next launch on the instance removes finished jobs a week old.
                cleanup_job(self.hook, name, job)
            if outcome.collected:
                self._store(context, None)

    def _finish(self, context: Context, name: str, job: RemoteJob | None, exit_code: int, last_line: str) -> Any:
        """Upload the outputs (success or failure: a failed upload never masks the command's error), then judge
        the exit code; the result gains ``outputs`` and ``sync`` when the step declares data."""
        data = self._step_data(context)
        data.final_sync(name, command_failed=exit_code != 0)
        result = self._result(name, job, exit_code, last_line)
        if self.inputs or self.outputs:
            result.update(outputs=data.output_map(), sync=data.recorded())
        return result

    def _prepare_instance(self, context: Context, name: str) -> None:
        """Hook for subclasses: runs once the instance is ready, before the command is launched or re-attached."""

    def _launch_command(self, context: Context, name: str) -> str:
        """:meth:`_before_launch`, then the command to launch, unless the task was killed meanwhile: ``on_kill``
        found no job to kill then, so nothing may be launched after it."""
        command = self._before_launch(context, name)
        if self._killed:
            raise BrevCommandError("The task was killed before its job was launched: not launching it.", exit_code=-15)
        return command

    def _before_launch(self, context: Context, name: str) -> str:
        """Right before a launch (not a re-attach): sync the inputs; returns the command to launch."""
        self._step_data(context).sync_inputs(name)
        return self.command

    def _result(self, name: str, job: RemoteJob | None, exit_code: int, last_line: str) -> dict[str, Any]:
        if exit_code in self._skip_codes():
            raise AirflowSkipException(f"The command exited with {exit_code}, listed in skip_on_exit_code.")
        if exit_code != 0:
            raise BrevCommandError(
                f"The command on {name!r} failed with exit code {exit_code}" + (f": {last_line}" if last_line else "."),
                exit_code=exit_code,
            )
        return {
            "exit_code": exit_code,
            "last_line": last_line,
            "instance_name": name,
            "job_id": job.job_id if job else None,
        }

    def _cleanup_on_kill(self) -> None:
        """Stop a foreground command (local ``brev exec`` and the remote session); kill the remote job (default)
        or keep it; delete every ephemeral instance of this try (by id). Fast: Airflow allows ~5 s."""
        handle = self._handle or self._handle_from_xcom()
        if self.ephemeral:  # deleting the instance stops everything on it: first stop local calls, then delete
            with contextlib.suppress(Exception):
                self.hook.stop_running(grace_seconds=0.2)
            handled = (
                InstanceRef(str(handle["instance_name"]), str(handle.get("instance_id") or "")) if handle else None
            )
            deleted = self._compute().release_on_kill(also=handled)
            if deleted:
                self.log.warning("Task killed: deleting its ephemeral instance %s.", ", ".join(deleted))
            return
        if not self.detach or self.on_kill_action == "kill":  # foreground work (also TAO's docker login/pull)
            with contextlib.suppress(Exception):
                self.hook.stop_foreground(timeout=ON_KILL_TIMEOUT / 2)
        if handle:
            name, job = str(handle["instance_name"]), RemoteJob.from_dict(handle["job"])
        elif self._launching:  # killed while the launch call ran: this try's job may already be running
            name, job = self._launching
        else:
            return
        if self.on_kill_action != "kill":
            self.log.info("Task killed: keeping job %s on %s running (on_kill_action='keep').", job.job_id, name)
            return
        self.log.warning("Task killed: killing job %s on %s.", job.job_id, name)
        with contextlib.suppress(Exception):
            self.hook.kill_job(name, job, grace_seconds=1, timeout=ON_KILL_TIMEOUT)

    def _handle_from_xcom(self) -> dict[str, Any] | None:
        """After deferral the operator is rehydrated without attributes: the handle is in XCom."""
        if self._ti is None:
            return None
        try:
            value = self._ti.xcom_pull(task_ids=self._ti.task_id, key=XCOM_JOB)
        except Exception:
            return None
        return value if isinstance(value, dict) else None
