"""Layered instance readiness, as pure decisions shared by the hook, the sensor and the trigger.

``RUNNING`` does not mean usable. The layers, cheapest first:

1. ``brev ls --json`` status ``RUNNING`` (what ``brev create`` waits for);
2. build ``COMPLETED`` / shell ``READY``;
3. an exec probe that must echo back a random nonce (sshd answers, the alias resolves, a shell runs);
4. optionally ``docker info`` succeeds (container work).

:func:`readiness_from_status` decides from the listing alone whether a probe is worth running;
:func:`build_probe_command` / :func:`probe_passed` build and judge the probe. :class:`ReadinessCheck` (one check)
and :class:`ReadinessWait` (a wait: cadence, deadline, failure budget) are state machines of the one shape of
:mod:`airflow_provider_brev.core.protocol.machine`.
"""

from __future__ import annotations

import logging
import secrets
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from airflow_provider_brev.core.instances.ssh_probe import (
    SSH_CONFIRM_SECONDS,
    SSH_CONNECT_TIMEOUT,
    SSH_WAIT_SECONDS,
    ReadHostEntries,
    RefreshHostEntries,
    RunSshProbe,
    direct_ssh_unreachable,
    host_entry_present,
    ssh_retry_interval,
    ssh_still_booting,
)
from airflow_provider_brev.core.protocol.lines import ProcessResult
from airflow_provider_brev.core.protocol.machine import Call, Done, Fail, Failed, Sleep, StepMachine
from airflow_provider_brev.core.protocol.output import (
    STATUS_DELETING,
    STATUS_FAILURE,
    STATUS_RUNNING,
    STATUS_STOPPED,
    STATUS_STOPPING,
    BrevInstance,
)
from airflow_provider_brev.exceptions import BrevTimeoutError, retry_policy

STAGE_MISSING = "missing"
STAGE_FAILED = "failed"
STAGE_DELETING = "deleting"
STAGE_STOPPED = "stopped"
STAGE_PROVISIONING = "provisioning"
STAGE_BUILDING = "building"
STAGE_SSH = "ssh"
STAGE_DOCKER = "docker"
STAGE_READY = "ready"

#: Seconds a created (or started, or re-created) instance may take to become usable: sized for cold starts.
DEFAULT_READY_TIMEOUT = 20 * 60


@dataclass(frozen=True)
class Readiness:
    """Where an instance stands on the way to being usable.

    :param stage: one of ``missing``, ``failed``, ``deleting``, ``stopped``, ``provisioning``, ``building``,
        ``ssh``, ``docker``, ``ready``.
    :param terminal: waiting longer cannot help (FAILURE, DELETING, vanished, stopped).
    """

    stage: str
    message: str
    terminal: bool = False
    instance: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def ready(self) -> bool:
        return self.stage == STAGE_READY

    @property
    def listed(self) -> BrevInstance | None:
        """The instance ``brev ls`` listed under the name (``None``: not listed)."""
        return BrevInstance(**self.instance) if self.instance else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "message": self.message,
            "terminal": self.terminal,
            "instance": self.instance,
        }


def readiness_from_status(name: str, instance: BrevInstance | None) -> Readiness | None:
    """Decide from ``brev ls`` alone; ``None`` means "status is good: run the probe"."""
    if instance is None:
        return Readiness(
            STAGE_MISSING,
            f"Instance {name!r} does not exist (it was deleted or never created).",
            terminal=True,
        )
    data = instance.to_dict()
    if instance.status == STATUS_FAILURE:
        return Readiness(
            STAGE_FAILED,
            f"Instance {name!r} is in FAILURE (build {instance.build_status or '-'}, "
            f"health {instance.health_status or '-'}); check it with `brev ls` and the Brev console.",
            terminal=True,
            instance=data,
        )
    if instance.status == STATUS_DELETING:
        return Readiness(STAGE_DELETING, f"Instance {name!r} is being deleted.", terminal=True, instance=data)
    if instance.status in (STATUS_STOPPED, STATUS_STOPPING):
        return Readiness(
            STAGE_STOPPED,
            f"Instance {name!r} is {instance.status}; start it first (this provider never starts "
            "instances implicitly, to avoid surprise billing).",
            terminal=True,
            instance=data,
        )
    if instance.build_status == "CREATE_FAILED":
        return Readiness(
            STAGE_FAILED, f"Instance {name!r} failed to build (CREATE_FAILED).", terminal=True, instance=data
        )
    if instance.status != STATUS_RUNNING:
        return Readiness(
            STAGE_PROVISIONING, f"Instance {name!r} is {instance.status or 'provisioning'}.", instance=data
        )
    if not instance.shell_ready:
        return Readiness(
            STAGE_BUILDING,
            f"Instance {name!r} is RUNNING; build {instance.build_status or 'pending'}, shell not ready.",
            instance=data,
        )
    return None


def new_nonce() -> str:
    return "brev-ready-" + secrets.token_hex(8)


def build_probe_command(nonce: str, *, require_docker: bool = False) -> str:
    """A probe that echoes ``nonce`` (and ``nonce:docker`` when ``docker info`` works)."""
    quoted = shlex.quote(nonce)
    command = f"echo {quoted}"
    if require_docker:
        command += f"; docker info >/dev/null 2>&1 && echo {shlex.quote(nonce + ':docker')}"
    return command + "; exit 0"


def probe_passed(stdout_lines: list[str], nonce: str, *, require_docker: bool = False) -> tuple[bool, str]:
    """Judge a probe's stdout: (passed, stage-if-not)."""
    stripped = {line.strip() for line in stdout_lines}
    if nonce not in stripped:
        return False, STAGE_SSH
    if require_docker and f"{nonce}:docker" not in stripped:
        return False, STAGE_DOCKER
    return True, STAGE_READY


def probe_readiness(name: str, instance: BrevInstance, passed: bool, stage: str, detail: str = "") -> Readiness:
    """The :class:`Readiness` after a probe."""
    data = instance.to_dict()
    if passed:
        return Readiness(STAGE_READY, f"Instance {name!r} is ready (exec probe echoed its nonce).", instance=data)
    if stage == STAGE_DOCKER:
        return Readiness(STAGE_DOCKER, f"Instance {name!r} answers over SSH but `docker info` fails.", instance=data)
    suffix = f": {detail}" if detail else ""
    return Readiness(STAGE_SSH, f"Instance {name!r} is RUNNING but not reachable over SSH yet{suffix}", instance=data)


# --- one readiness check as a sans-I/O state machine -----------------------------------------------------------


@dataclass(frozen=True)
class ListInstance(Call):
    """Call: look the instance up in a ``brev ls`` listing; the answer is a ``BrevInstance`` or ``None``."""


@dataclass(frozen=True)
class RunProbe(Call):
    """Call: run ``command`` on the instance (``brev exec``); the answer is its
    :class:`~airflow_provider_brev.core.protocol.lines.ProcessResult` (a timed-out probe answers ``Failed`` with a
    :class:`~airflow_provider_brev.exceptions.BrevTimeoutError`).

    :param command: the probe command.
    :param timeout: its budget when the check decided one (what is left after a direct ``ssh`` probe), else
        ``None``: the hook's probe budget.
    """

    command: str
    timeout: float | None = None


class ReadinessCheck(StepMachine[Readiness]):
    """The machine of one layered check: cheap status first, the exec probe only when the status is good.

    With ``direct_ssh`` the probe goes through plain ``ssh`` and the host entry ``brev refresh`` writes
    (:mod:`airflow_provider_brev.core.instances.ssh_probe`): the entry is read (and written once with ``brev refresh``
    when missing, or when an entry that was already there meets a refused or timed-out connection: a name re-created
    or started again may answer at another address), then ``ssh`` is tried every 0.1 s (0.5 s after the first 10 s,
    :func:`~airflow_provider_brev.core.instances.ssh_probe.ssh_retry_interval`) while it says sshd is not up yet, for
    at most ``ssh_window`` seconds. A missing entry, a failed refresh,
    a missing ``ssh``, any other ``ssh`` failure or the end of the window hand over to the ``brev exec`` probe.
    When a direct attempt failed and the ``brev exec`` probe then passed, one confirming direct attempt follows
    (:data:`~airflow_provider_brev.core.instances.ssh_probe.SSH_CONFIRM_SECONDS`): if it cannot connect either,
    :attr:`direct_unreachable` says why, and the hook stops probing directly for the rest of its process.
    The hook's ``check_readiness`` / ``acheck_readiness`` run it with the generic drivers
    (:mod:`airflow_provider_brev.hooks.driver`) and perform its calls.

    :param name: the instance.
    :param require_docker: also require ``docker info`` to succeed.
    :param direct_ssh: probe with plain ``ssh`` first (the hook found an ``ssh`` executable).
    :param probe_timeout: the probe's whole budget (``None``: :data:`DEFAULT_PROBE_TIMEOUT`); direct probing takes
        at most half of it (and at most :data:`~airflow_provider_brev.core.instances.ssh_probe.SSH_WAIT_SECONDS`), the
        ``brev exec`` probe after it what is left.
    """

    def __init__(
        self, name: str, *, require_docker: bool = False, direct_ssh: bool = False, probe_timeout: float | None = None
    ) -> None:
        super().__init__()
        self.name = name
        self.require_docker = require_docker
        self.direct_ssh = direct_ssh
        self.probe_timeout = DEFAULT_PROBE_TIMEOUT if probe_timeout is None else probe_timeout
        self.ssh_window = min(SSH_WAIT_SECONDS, self.probe_timeout / 2)
        self._probe_started: float  # set when the status is good and direct probing starts
        self._next: Call = ListInstance()
        self._instance: BrevInstance | None = None
        self._nonce = new_nonce()
        self._command = build_probe_command(self._nonce, require_docker=require_docker)
        self._refreshed = False
        self._ssh_since: float | None = None
        self._sleep: float | None = None
        #: How the check probed: ``ssh`` (directly), ``exec`` (through ``brev exec``) or ``""`` (not at all).
        self.probed_with = ""
        self._ssh_failed = False  # a direct attempt of this check failed
        self._passed: Done[Readiness] | None = None  # the exec probe's verdict, held while the direct path is confirmed
        #: Why plain ``ssh`` cannot reach the instance that ``brev exec`` reached (``""``: it can, or not asked).
        self.direct_unreachable = ""

    def _decide(self, now: float) -> Call | Sleep | Done[Readiness] | Fail:
        if self._sleep is not None:
            seconds, self._sleep = self._sleep, None
            return Sleep(seconds)
        return self._next

    def _receive(self, call: Call, outcome: object, now: float) -> None:
        if isinstance(call, ListInstance):
            self._on_listing(outcome, now)
        elif isinstance(call, ReadHostEntries):
            if host_entry_present(outcome if isinstance(outcome, str) else None, self.name):
                self._ssh_since = now
                self._next = RunSshProbe(self._command, self._ssh_budget(now))
            elif not self._refreshed:
                self._refreshed = True
                self._next = RefreshHostEntries(self._refresh_budget(now))
            else:
                self._hand_over(now)
        elif isinstance(call, RefreshHostEntries):
            self._next = ReadHostEntries()
            if isinstance(outcome, Failed):
                self._hand_over(now)
        elif isinstance(call, RunSshProbe) and self._passed is not None:
            self.direct_unreachable = direct_ssh_unreachable(outcome)
            self._finish(self._passed)
        elif isinstance(call, RunSshProbe):
            self._on_ssh_probe(outcome, now)
        else:
            self._on_exec_probe(outcome)

    def _left(self, now: float) -> float:
        """What is left of the probe budget."""
        return self.probe_timeout - (now - self._probe_started)

    def _refresh_budget(self, now: float) -> float:
        """The ``brev refresh`` budget: what is left of the probe budget, within a second and a minute."""
        return max(1.0, min(60.0, self._left(now)))

    def _ssh_budget(self, now: float) -> float:
        """One direct attempt's process budget: the connect timeout plus 5 s, within what is left."""
        return max(1.0, min(SSH_CONNECT_TIMEOUT + 5.0, self._left(now)))

    def _on_listing(self, outcome: object, now: float) -> None:
        if isinstance(outcome, Failed):
            self._finish(Fail(outcome.error))
            return
        instance = outcome if isinstance(outcome, BrevInstance) else None
        decided = readiness_from_status(self.name, instance)
        if decided is not None:
            self._finish(Done(decided))
            return
        self._instance = instance
        if self.direct_ssh:
            self._probe_started = now
            self._next = ReadHostEntries()
        else:
            self.probed_with = "exec"
            self._next = RunProbe(self._command)

    def _hand_over(self, now: float) -> None:
        """Probe through ``brev exec`` (the CLI's own path, which refreshes and waits for sshd itself) with what is
        left of the probe budget; with less than a second left, the check ends: not reachable yet."""
        assert self._instance is not None
        self.probed_with = "exec"
        left = self._left(now)
        if left < 1.0:
            self._finish(Done(probe_readiness(self.name, self._instance, False, STAGE_SSH, "probe timed out")))
        else:
            self._next = RunProbe(self._command, left)

    def _on_ssh_probe(self, outcome: object, now: float) -> None:
        assert self._instance is not None
        assert self._ssh_since is not None
        if not isinstance(outcome, ProcessResult):
            self._hand_over(now)  # ``Failed``: ``ssh`` could not be started
            return
        passed, stage = probe_passed(outcome.stdout_lines, self._nonce, require_docker=self.require_docker)
        if passed or (stage == STAGE_DOCKER):
            self.probed_with = "ssh"
            self._finish(Done(probe_readiness(self.name, self._instance, passed, stage)))
            return
        self._ssh_failed = True
        if ssh_still_booting(outcome) and not self._refreshed:
            # the entry was there before this check: it may be an earlier instance's of this name (one re-created
            # or started under it answers at another address), so it is rewritten once before waiting on it
            self._refreshed = True
            self._next = RefreshHostEntries(self._refresh_budget(now))
        elif ssh_still_booting(outcome) and now - self._ssh_since < self.ssh_window:
            interval = ssh_retry_interval(now - self._ssh_since)
            self._sleep = min(interval, max(0.0, self._ssh_since + self.ssh_window - now))
            self._next = RunSshProbe(self._command, self._ssh_budget(now + self._sleep))
        else:
            self._hand_over(now)

    def _on_exec_probe(self, outcome: object) -> None:
        assert self._instance is not None
        if isinstance(outcome, Failed):
            if isinstance(outcome.error, BrevTimeoutError):
                self._finish(Done(probe_readiness(self.name, self._instance, False, STAGE_SSH, "probe timed out")))
            else:
                self._finish(Fail(outcome.error))
            return
        assert isinstance(outcome, ProcessResult)
        passed, stage = probe_passed(outcome.stdout_lines, self._nonce, require_docker=self.require_docker)
        verdict = Done(probe_readiness(self.name, self._instance, passed, stage, outcome.stderr[-300:]))
        if passed and self._ssh_failed:  # brev exec reached it where plain ssh did not: confirm once
            self._passed = verdict
            self._next = RunSshProbe(self._command, SSH_CONFIRM_SECONDS)
        else:
            self._finish(verdict)


#: Poll at the base interval for this long after the last change of stage, then back off.
FAST_POLL_SECONDS = 60.0
#: The longest interval between two readiness checks of one wait.
MAX_POLL_INTERVAL = 1.5


def next_poll_interval(base: float, seconds_in_stage: float) -> float:
    """How long a wait sleeps before its next check.

    ``base`` (1 s by default) while the instance has recently changed stage, so the moment it becomes ready is seen
    quickly; after :data:`FAST_POLL_SECONDS` in the same stage (a long boot), :data:`MAX_POLL_INTERVAL` (a longer
    ``base`` stays as it is), which cuts the ``brev`` calls of a long boot by a third (below one per second of boot) and keeps the detection
    lag of a deferred wait, whose listing may be up to one interval old, within 2 s.

    :param base: the wait's configured poll interval in seconds.
    :param seconds_in_stage: how long the instance has been in its current stage.
    """
    return base if seconds_in_stage < FAST_POLL_SECONDS else max(base, MAX_POLL_INTERVAL)


# --- one wait: cadence, deadline and failure budget, shared by the hook's sync wait and the trigger ------------

#: Failed checks in a row (transient errors, timeouts) a wait tolerates before it gives up.
MAX_CHECK_FAILURES = 5


#: Budget of one readiness probe (a first exec refreshes and waits for sshd: allow the cold path).
DEFAULT_PROBE_TIMEOUT = 120.0


@dataclass(frozen=True)
class WaitStep:
    """A readiness wait's verdict after a check (or before one, at the deadline).

    :param action: ``check`` (sleep ``sleep`` seconds, then check again), ``ready``, ``failed`` (terminal state),
        ``timeout`` (deadline passed) or ``error`` (checks kept failing); the wait's result is its last verdict
        (``ready``, ``failed`` or ``timeout``: an ``error`` raises the check's error).
    :param message: what to tell the user.
    :param sleep: seconds to sleep before the next check (``check`` only).
    :param log_stage: the check reached a new stage: log ``message``.
    :param readiness: the last readiness seen, if any.
    :param took: with ``ready``: how long the wait took (:meth:`ReadinessWait.ready_after`).
    """

    action: Literal["check", "ready", "failed", "timeout", "error"]
    message: str
    sleep: float = 0.0
    log_stage: bool = False
    readiness: Readiness | None = None
    took: str = ""


@dataclass(frozen=True)
class CheckReadiness(Call):
    """Call: run one layered check (:class:`ReadinessCheck`); the answer is its :class:`Readiness`, ``Failed``, or
    :data:`CHECK_OUTLIVED`.

    :param probe_timeout: the exec probe's budget (the default, cut to what is left of the wait).
    :param limit: seconds the whole check may take (at least what is left of the wait); an async driver that can
        cancel it answers :data:`CHECK_OUTLIVED` past it.
    """

    probe_timeout: float
    limit: float


#: The answer to :class:`CheckReadiness` when the check was cancelled at its ``limit``.
CHECK_OUTLIVED = "check-outlived"


class ReadinessWait(StepMachine[WaitStep]):
    """The machine of one wait until an instance is ready (clock values come from the driver).

    It checks (:class:`CheckReadiness`), logs a stage the instance reached, sleeps as long as the cadence says,
    and ends with its last :class:`WaitStep` (``ready``, ``failed`` or ``timeout``) or fails with the check's
    error. Transient errors and timeouts of single checks (a slow or failing ``brev ls``) do not end the wait until
    :data:`MAX_CHECK_FAILURES` in a row; anything else ends it at once. Cadence is fixed-rate from each check's
    start, backing off in long stages (:func:`next_poll_interval`). The hook's ``wait_until_ready`` (sync) and
    the readiness trigger (async) run it with the generic drivers.

    :param name: the instance.
    :param deadline: when to give up, in the driver's clock (absolute: a resumed trigger keeps it).
    :param poll_interval: the base seconds between checks.
    :param now: the driver's clock at the start of the wait.
    :param max_failures: failed checks in a row tolerated.
    """

    def __init__(
        self, name: str, *, deadline: float, poll_interval: float, now: float, max_failures: int = MAX_CHECK_FAILURES
    ) -> None:
        super().__init__()
        self.name = name
        self.deadline = deadline
        self.poll_interval = poll_interval
        self.max_failures = max_failures
        self.started = now
        self.stage_since = now
        self.check_started = now
        self.failures = 0
        self.last: Readiness | None = None
        self._sleep: float | None = None

    def ready_after(self, now: float) -> str:
        """How long the wait took, for both drivers' "ready" line (``now`` in the driver's clock)."""
        return f"Instance {self.name} is ready after {now - self.started:.0f} s."

    def remaining(self, now: float) -> float:
        """Seconds left before the deadline."""
        return self.deadline - now

    # -- the machine ---------------------------------------------------------------------------------
    def _decide(self, now: float) -> Call | Sleep | Done[WaitStep] | Fail:
        if self._sleep is not None:
            seconds, self._sleep = self._sleep, None
            return Sleep(seconds)
        timeout = self._before_check(now)
        if timeout is not None:
            return Done(timeout)
        remaining = self.remaining(now)
        return CheckReadiness(probe_timeout=min(DEFAULT_PROBE_TIMEOUT, max(remaining, 1.0)), limit=max(1.0, remaining))

    def _receive(self, call: Call, outcome: object, now: float) -> None:
        error: BaseException | None = None
        if outcome == CHECK_OUTLIVED:
            error = BrevTimeoutError("a readiness check outlived the deadline")
            step = self._before_check(now) or self._on_error(error, now)
        elif isinstance(outcome, Failed):
            error = outcome.error
            step = self._on_error(error, now)
        else:
            assert isinstance(outcome, Readiness)
            step = self._on_readiness(outcome, now)
        if step.log_stage:
            self._emit(logging.INFO, f"Readiness of {self.name}: {step.message}")
        if step.action == "check":
            self._sleep = step.sleep
        elif step.action == "error":
            assert error is not None  # only a failed check ends in "error"
            self._finish(Fail(error))
        elif step.action == "ready":
            self._finish(Done(replace(step, took=self.ready_after(now))))
        else:
            self._finish(Done(step))

    # -- the verdicts ----------------------------------------------------------------------------------
    def _before_check(self, now: float) -> WaitStep | None:
        """``timeout`` when the deadline has passed, else ``None`` (go on and check)."""
        self.check_started = now
        if now < self.deadline:
            return None
        last = f" (last state: {self.last.message})" if self.last else "."
        budget = self.deadline - self.started
        message = f"Instance {self.name!r} was not ready after {budget:.0f} s{last}"
        return WaitStep("timeout", message, readiness=self.last)

    def _next(self, now: float) -> float:
        pause = next_poll_interval(self.poll_interval, now - self.stage_since) - (now - self.check_started)
        return max(0.0, min(pause, self.deadline - now))

    def _on_readiness(self, readiness: Readiness, now: float) -> WaitStep:
        """The verdict after a successful check."""
        self.failures = 0
        changed = self.last is None or readiness.stage != self.last.stage
        if changed:
            self.stage_since = now
        self.last = readiness
        if readiness.ready:
            return WaitStep("ready", readiness.message, log_stage=changed, readiness=readiness)
        if readiness.terminal:
            return WaitStep("failed", readiness.message, log_stage=changed, readiness=readiness)
        return WaitStep("check", readiness.message, sleep=self._next(now), log_stage=changed, readiness=readiness)

    def _on_error(self, error: BaseException, now: float) -> WaitStep:
        """The verdict after a check raised ``error``: keep waiting on transient trouble, within the budget."""
        transient = retry_policy(error) == "hook" or isinstance(error, BrevTimeoutError)
        self.failures += 1
        if transient and self.failures < self.max_failures:
            return WaitStep(
                "check",
                f"Readiness check {self.failures}/{self.max_failures} of {self.name} failed ({error}); waiting on.",
                sleep=self._next(now),
                log_stage=True,
                readiness=self.last,
            )
        return WaitStep("error", str(error), readiness=self.last)
