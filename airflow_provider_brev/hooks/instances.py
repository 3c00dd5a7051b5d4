"""BrevInstancesHook: instances (list, search, create, delete) and layered readiness, over the base hook.

The middle layer of the Brev hooks: :mod:`airflow_provider_brev.hooks.base` runs the CLI,
this module manages instances with the pure builders, parsers and the readiness machines of
:mod:`airflow_provider_brev.core` (run by the generic drivers of :mod:`airflow_provider_brev.hooks.driver`), and :class:`~airflow_provider_brev.hooks.brev.BrevHook` adds commands, files and
jobs. Every sync/async pair drives the same builder or protocol.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_brev._compat import triggerer_max_processes
from airflow_provider_brev.core.cost import PriceCap, choice_note
from airflow_provider_brev.core.instances.readiness import (
    CHECK_OUTLIVED,
    DEFAULT_PROBE_TIMEOUT,
    CheckReadiness,
    ListInstance,
    Readiness,
    ReadinessCheck,
    ReadinessWait,
    RunProbe,
    WaitStep,
)
from airflow_provider_brev.core.instances.ssh_probe import (
    ReadHostEntries,
    RefreshHostEntries,
    RunSshProbe,
    ssh_probe_argv,
)
from airflow_provider_brev.core.protocol.argv import (
    create_args,
    instance_type_list,
    ls_args,
    search_args,
    start_args,
    stop_args,
)
from airflow_provider_brev.core.protocol.invocation import exec_view
from airflow_provider_brev.core.protocol.names import validate_instance_name
from airflow_provider_brev.core.protocol.output import (
    STATUS_DELETING,
    STATUS_FAILURE,
    BrevInstance,
    InstanceTypeOffer,
    parse_create_wait_failure,
    parse_gpu_spec,
    parse_instances,
    parse_search,
    select_offers,
)
from airflow_provider_brev.exceptions import (
    BrevCLIError,
    BrevDuplicateNameError,
    BrevInstanceFailedError,
    BrevInstanceNotFoundError,
    BrevInvalidInputError,
    BrevNoMatchingTypeError,
    BrevTaskKilledError,
    BrevTimeoutError,
    BrevTransientError,
)
from airflow_provider_brev.hooks.base import _CACHE_LOCK, _DIRECT_SSH_UNREACHABLE, BrevBaseHook
from airflow_provider_brev.hooks.driver import EmitLog, adrive, drive
from airflow_provider_brev.hooks.listing import shared_listing
from airflow_provider_brev.hooks.process import ProcessResult, arun_process, loop_process_slots, run_process

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_provider_brev.core.protocol.machine import Call

__all__ = ["DEFAULT_CREATE_TIMEOUT", "DEFAULT_PROBE_TIMEOUT", "BrevInstancesHook"]

#: Default budget of ``brev create`` (it may try several instance types).
DEFAULT_CREATE_TIMEOUT = 600.0


class BrevInstancesHook(BrevBaseHook):
    """Brev instances and their readiness (the parameters are those of :class:`BrevBaseHook`).

    :param brev_conn_id: the Airflow connection id (default ``brev_default``).
    """

    # ------------------------------------------------------------------ instances
    def list_instances(self) -> list[BrevInstance]:
        """Instances visible to this token (``brev ls --json``, any of its shapes)."""
        return parse_instances(self.run_cli(ls_args(self.config, self.capabilities), capture=True).stdout)

    async def alist_instances(self) -> list[BrevInstance]:
        """Async twin of :meth:`list_instances` (same arguments, same version check)."""
        caps = await self.acapabilities()
        return parse_instances((await self.arun_cli(ls_args(self.config, caps), capture=True)).stdout)

    def get_instance(self, name: str) -> BrevInstance | None:
        """The instance called ``name`` (or with that id), or ``None``."""
        return _find(self.list_instances(), name)

    async def aget_instance(self, name: str, *, since: float | None = None) -> BrevInstance | None:
        """Async twin of :meth:`get_instance`.

        :param since: share the process's listing (:mod:`airflow_provider_brev.hooks.listing`) with other waits,
            accepting any listing started at or after this ``time.monotonic()`` value.
        """
        if since is None:
            return _find(await self.alist_instances(), name)
        config = await self.aconfig()
        key = (self.cli_path, str(self._home()), config.org or "", config.secret_fingerprint)
        instances, started = await shared_listing(key).get(self.alist_instances, since=since)
        self.__dict__["_listing_seen"] = started
        return _find(instances, name)

    def search_instance_types(
        self, *, gpu_name: str | None = None, min_vram: float | None = None, include_cpu: bool = False
    ) -> list[InstanceTypeOffer]:
        """Instance types from ``brev search --json`` (no login needed), cheapest first."""
        args = search_args(gpu_name=gpu_name, min_vram=min_vram, include_cpu=include_cpu)
        offers = parse_search(self.run_cli(args, capture=True, authenticated=False).stdout)
        self.known_prices.update({offer.type: offer.price_per_hour for offer in offers})
        return sorted(offers, key=lambda o: (o.price_per_hour, o.type))

    @property
    def known_prices(self) -> dict[str, float]:
        """Price per hour by instance type, from every ``brev search`` this hook ran (for the cost report)."""
        prices: dict[str, float] = self.__dict__.setdefault("_known_prices", {})
        return prices

    def resolve_instance_types(
        self,
        *,
        gpu: str | None = None,
        instance_types: Sequence[str] | str | None = None,
        min_vram: float | None = None,
    ) -> list[str]:
        """Check a request against the catalog before anything is created; return candidate types.

        ``gpu="L40S:1"`` becomes the matching types, cheapest first. Unknown GPUs or instance types raise
        :class:`BrevNoMatchingTypeError` naming what is available.
        """
        gpu, types = instance_type_list(gpu, instance_types)
        if gpu:
            spec = parse_gpu_spec(gpu)
            chosen = select_offers(self.search_instance_types(gpu_name=spec.name), spec, min_vram=min_vram)
            if not chosen:
                available = sorted({f"{o.gpu_name}:{o.gpu_count}" for o in self.search_instance_types()})
                raise BrevNoMatchingTypeError(
                    f"No Brev instance type offers {spec.count}x {spec.name}"
                    + (f" with ≥ {min_vram:g} GB per GPU" if min_vram else "")
                    + f". Available GPU shapes: {', '.join(available) or 'none'} (see `brev search`)."
                )
            return [offer.type for offer in chosen]
        if types:
            known = {o.type for o in self.search_instance_types()} | {
                o.type for o in self.search_instance_types(include_cpu=True)
            }
            unknown = [t for t in types if t not in known]
            if unknown:
                raise BrevNoMatchingTypeError(
                    f"Unknown Brev instance type(s): {', '.join(unknown)}. See `brev search` for valid types."
                )
            return types
        return []

    def create_instance(
        self,
        name: str,
        *,
        gpu: str | None = None,
        instance_types: Sequence[str] | None = None,
        min_vram: float | None = None,
        cloud_cred_id: str | None = None,
        workspace_group_id: str | None = None,
        wait: bool = False,
        timeout: float = DEFAULT_CREATE_TIMEOUT,
        price_cap: PriceCap | None = None,
    ) -> BrevInstance:
        """Create instance ``name`` and return it as listed right after ``brev create`` returns.

        ``brev create`` exits 0 even when the instance FAILED or its own wait timed out, so the status is
        read afterwards and a FAILURE raises :class:`BrevInstanceFailedError`. By default the CLI does not
        wait (``--detached``): readiness is layered and handled by :meth:`wait_until_ready` / the sensor.

        :param gpu: ``"L40S:1"``. With the released CLI it is resolved through ``brev search`` into a
            cheapest-first ``--type`` list (Brev then chooses placement); CLIs with ``--gpu`` get it directly.
        :param instance_types: explicit fallback list of types (``--type a,b,c``).
        :param min_vram: minimum VRAM per GPU in GB.
        :param cloud_cred_id: placement id, passed only where the CLI accepts it (default: connection extra).
        :param workspace_group_id: placement id, likewise.
        :param wait: let the CLI wait for RUNNING (``--timeout``) instead of ``--detached``.
        :param price_cap: only types within it (:class:`~airflow_provider_brev.core.cost.PriceCap`); none
            raises before ``brev create``, and ``--type`` then lists the admitted types even where ``--gpu`` exists.
        """
        validate_instance_name(name)
        caps = self.capabilities
        types = self.resolve_instance_types(gpu=gpu, instance_types=instance_types, min_vram=min_vram)
        if price_cap is not None:
            types = price_cap.admit(types, self.known_prices)
            gpu, min_vram = None, (None if gpu else min_vram)  # the admitted types already satisfy the request
        plan = create_args(
            name,
            caps=caps,
            config=self.config,
            gpu=(gpu or "").strip() or None,
            types=types,
            min_vram=min_vram,
            cloud_cred_id=cloud_cred_id,
            workspace_group_id=workspace_group_id,
            wait=wait,
            timeout=timeout,
        )
        for note in plan.notes:
            self.log.info("%s", note)
        for warning in plan.warnings:
            self.log.warning("%s", warning)
        self.log.debug("brev %s", " ".join(plan.args))
        transient_seen: list[bool] = []
        result = self.retry_sync(lambda: self._create_once(name, plan.args, timeout, transient_seen))
        failure = parse_create_wait_failure(result.stdout + "\n" + result.stderr, name)
        instance = self.get_instance(name)
        if instance is None:
            raise BrevCLIError(
                f"`brev create {name}` exited 0 but the instance is not listed by `brev ls`.",
                cli_message=result.stderr,
                command="create",
            )
        if instance.status == STATUS_FAILURE:
            raise BrevInstanceFailedError(
                f"Instance {name!r} was created but is in FAILURE" + (f": {failure}" if failure else "."),
                cli_message=failure,
                command="create",
            )
        if failure:
            self.log.warning("brev create reported: %s (status now %s)", failure, instance.status)
        self.log.info(
            "Created Brev instance %s (id %s, %s): %s",
            *(name, instance.id, choice_note(instance.instance_type, types, self.known_prices), instance.status),
        )
        return instance

    def _create_once(self, name: str, args: list[str], timeout: float, transient_seen: list[bool]) -> ProcessResult:
        """One ``brev create`` attempt; a duplicate name after a lost answer is our own earlier attempt."""
        try:
            return self.run_cli(args, timeout=timeout + 60, retry=False)
        except BrevTransientError:
            transient_seen.append(True)
            raise
        except BrevDuplicateNameError as err:
            existing = self.get_instance(name)
            if transient_seen and existing is not None and existing.status != STATUS_DELETING:
                # Our earlier attempt's request reached Brev although its answer was lost.
                self.log.info("Instance %s was created by an earlier attempt of this call.", name)
                return ProcessResult(exit_code=0)
            state = f" (currently {existing.status})" if existing else ""
            raise BrevDuplicateNameError(
                f"An instance named {name!r} already exists{state}. "
                + (
                    "It is being deleted and Brev keeps the name reserved until it is gone: "
                    "wait for the deletion to finish or use another name."
                    if existing and existing.status == STATUS_DELETING
                    else "Use another name, delete it, or adopt it."
                ),
                cli_message=err.cli_message,
                command="create",
            ) from err

    def delete_instance(
        self,
        name: str,
        *,
        instance_id: str | None = None,
        wait: bool = False,
        timeout: float = 600.0,
        poll_interval: float = 1.0,
        call_timeout: float | None = None,
        retry: bool = True,
    ) -> bool:
        """Delete ``name``; ``False`` when it was already gone (deleting twice is success).

        :param instance_id: delete the instance with this Brev id (``brev delete`` takes a name or an id): an
            instance someone else created under the same name after this one was lost is never hit.
        :param wait: also wait until the instance has disappeared from ``brev ls`` (deletion is asynchronous).
        :param timeout: how long to wait for the deletion (``wait``).
        :param call_timeout: budget of the ``brev delete`` call itself (default: the hook's).
        :param retry: retry transient failures of the call (``False`` for ``on_kill``, which has about 5 s).
        """
        validate_instance_name(name)
        target = _delete_target(name, instance_id)
        try:
            self.run_cli(["delete", target], timeout=call_timeout, retry=retry)
            deleted = True
            self.log.info("Deletion of Brev instance %s%s requested.", name, _id_note(instance_id))
        except BrevInstanceNotFoundError:
            deleted = False
            self.log.info(
                "Brev instance %s%s does not exist (already deleted): nothing to do.", name, _id_note(instance_id)
            )
        if wait:
            self.wait_until_gone(target, timeout=timeout, poll_interval=poll_interval)
        return deleted

    async def adelete_instance(self, name: str, *, instance_id: str | None = None) -> bool:
        """Async twin of :meth:`delete_instance` (without the wait)."""
        validate_instance_name(name)
        try:
            await self.arun_cli(["delete", _delete_target(name, instance_id)])
        except BrevInstanceNotFoundError:
            return False
        return True

    def stop_instance(self, name: str, *, instance_id: str) -> None:
        """``brev stop`` the instance of id ``instance_id`` (listed under ``name``): STOPPING, then STOPPED; its
        ``$HOME`` (image cache, synced inputs) stays and only its disk is billed. Raises when the CLI refuses (a type
        that cannot stop: ``does not support stop``)."""
        validate_instance_name(name)
        self.run_cli(stop_args(_delete_target(name, instance_id)))
        self.log.info("Stop of Brev instance %s%s requested.", name, _id_note(instance_id))

    def start_instance(self, name: str, *, instance_id: str) -> None:
        """``brev start -d`` the STOPPED instance of id ``instance_id`` (listed under ``name``), without retries: a
        second start of the same instance fails (``Instance is not stopped``), which is what keeps two runs off one
        instance. Raises :class:`~airflow_provider_brev.exceptions.BrevInstanceNotFoundError` when the CLI took the
        id for a local path (the instance is gone)."""
        validate_instance_name(name)
        result = self.run_cli(start_args(_delete_target(name, instance_id)), capture=True, retry=False)
        if "path not found" in (result.stdout or ""):
            raise BrevInstanceNotFoundError(f"Instance {name!r} (id {instance_id}) is gone: nothing to start.")
        self.log.info("Start of Brev instance %s%s requested.", name, _id_note(instance_id))

    def type_offer(self, instance_type: str | None) -> InstanceTypeOffer | None:
        """The ``brev search`` row of ``instance_type`` (stoppable, disk price, boot time), or ``None``."""
        if not instance_type:
            return None
        for include_cpu in (False, True):
            offers = self.search_instance_types(include_cpu=include_cpu)
            found = next((offer for offer in offers if offer.type == instance_type), None)
            if found is not None:
                return found
        return None

    def wait_until_gone(self, name: str, *, timeout: float = 600.0, poll_interval: float = 1.0) -> None:
        """Block until ``name`` (an instance name or id) has disappeared from ``brev ls``."""
        deadline = time.monotonic() + timeout
        while True:
            instance = self.get_instance(name)
            if instance is None:
                self.log.info("Brev instance %s is gone.", name)
                return
            if time.monotonic() >= deadline:
                raise BrevTimeoutError(f"Instance {name!r} was still {instance.status} after {timeout:.0f} s.")
            time.sleep(poll_interval)

    # ------------------------------------------------------------------ readiness
    def _probe_args(self, name: str, command: str, probe_timeout: float) -> dict[str, Any]:
        return {
            "args": ["exec", name, command],
            "timeout": probe_timeout,
            "check": False,
            "retry": False,
            "log_output": False,
            "output_view": exec_view(3),
        }

    #: ``brev refresh`` (a direct probe's missing host entry): one attempt, quiet.
    _REFRESH_ARGS: dict[str, Any] = {"retry": False, "log_output": False}

    def _readiness_check(self, name: str, require_docker: bool, probe_timeout: float) -> tuple[ReadinessCheck, str]:
        """The check's machine, and the ``ssh`` the CLI's environment would run (``""``: none, or one this process
        found unable to reach the instances: no direct probe)."""
        ssh = shutil.which("ssh", path=self._env().get("PATH")) or ""
        with _CACHE_LOCK:
            direct = bool(ssh) and (ssh, self._host_entries_path()) not in _DIRECT_SSH_UNREACHABLE
        check = ReadinessCheck(name, require_docker=require_docker, direct_ssh=direct, probe_timeout=probe_timeout)
        return check, ssh

    def _host_entries_path(self) -> str:
        """The CLI's ssh config (``~/.brev/ssh_config`` of the CLI's HOME)."""
        return str(self._home() / ".brev" / "ssh_config")

    def _ssh_probe_kwargs(self, ssh: str, name: str, call: RunSshProbe) -> dict[str, Any]:
        """One direct ``ssh`` attempt through the CLI's host entry."""
        argv = ssh_probe_argv(ssh, self._host_entries_path(), name, call.command)
        return {"argv": argv, "env": self._env(), "timeout": call.timeout}

    def _remember_direct_ssh(self, check: ReadinessCheck, ssh: str) -> None:
        """After a check: when plain ``ssh`` could not reach an instance that ``brev exec`` reached, stop probing
        directly through this ``ssh`` and host-entry file for the rest of the process (logged once)."""
        if not check.direct_unreachable:
            return
        key = (ssh, self._host_entries_path())
        with _CACHE_LOCK:
            first = key not in _DIRECT_SSH_UNREACHABLE
            _DIRECT_SSH_UNREACHABLE.setdefault(key, check.direct_unreachable)
        if first:
            self.log.warning(
                "Plain ssh (%s) cannot reach Brev instance %s through the CLI's host entry (%s), although brev exec "
                "can: %s. This process checks readiness through brev exec from now on.",
                ssh,
                check.name,
                key[1],
                check.direct_unreachable,
            )

    def _read_host_entries(self) -> str | None:
        try:
            return Path(self._host_entries_path()).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def check_readiness(
        self, name: str, *, require_docker: bool = False, probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    ) -> Readiness:
        """One layered readiness check (the sync driver over
        :class:`~airflow_provider_brev.core.instances.readiness.ReadinessCheck`)."""
        check, ssh = self._readiness_check(name, require_docker, probe_timeout)

        def perform(call: Call) -> BrevInstance | ProcessResult | str | None:
            if isinstance(call, ListInstance):
                return self.get_instance(name)
            if isinstance(call, ReadHostEntries):
                return self._read_host_entries()
            if isinstance(call, RefreshHostEntries):
                return self.run_cli(["refresh"], timeout=call.timeout, **self._REFRESH_ARGS)
            if isinstance(call, RunSshProbe):
                kwargs = self._ssh_probe_kwargs(ssh, name, call)
                return run_process(kwargs.pop("argv"), on_start=self._track, **kwargs)
            assert isinstance(call, RunProbe)
            kwargs = self._probe_args(name, call.command, call.timeout or probe_timeout)
            return self.run_cli(kwargs.pop("args"), **kwargs)

        readiness = drive(check, perform)
        self._remember_direct_ssh(check, ssh)
        return readiness

    async def acheck_readiness(
        self,
        name: str,
        *,
        require_docker: bool = False,
        probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
        since: float | None = None,
    ) -> Readiness:
        """The async driver over the same machine as :meth:`check_readiness`.

        The status comes from the process's shared listing (:mod:`airflow_provider_brev.hooks.listing`): any
        listing started after this hook's previous check (or, for the first check, after the call) serves, so
        many waits in one triggerer cost about one ``brev ls`` per interval in total.

        :param since: accept listings started at or after this ``time.monotonic()`` value instead.
        """
        started = time.monotonic()
        if since is None:  # newer than what this wait saw, and started after its previous check
            seen = self.__dict__.get("_listing_seen")
            since = max(self.__dict__.get("_previous_check", started), seen + 1e-6 if seen is not None else started)
        self.__dict__["_previous_check"] = started
        listed_since = since
        await self.aconfig()
        check, ssh = self._readiness_check(name, require_docker, probe_timeout)

        async def perform(call: Call) -> BrevInstance | ProcessResult | str | None:
            if isinstance(call, ListInstance):
                return await self.aget_instance(name, since=listed_since)
            if isinstance(call, ReadHostEntries):
                return self._read_host_entries()
            if isinstance(call, RefreshHostEntries):
                return await self.arun_cli(["refresh"], timeout=call.timeout, **self._REFRESH_ARGS)
            if isinstance(call, RunSshProbe):
                kwargs = self._ssh_probe_kwargs(ssh, name, call)
                slots = loop_process_slots(triggerer_max_processes())  # the cap of every brev call in this loop
                return await arun_process(kwargs.pop("argv"), slots=slots, **kwargs)
            assert isinstance(call, RunProbe)
            kwargs = self._probe_args(name, call.command, call.timeout or probe_timeout)
            return await self.arun_cli(kwargs.pop("args"), **kwargs)

        readiness = await adrive(check, perform)
        self._remember_direct_ssh(check, ssh)
        return readiness

    def is_ready(self, name: str, *, require_docker: bool = False) -> bool:
        """Whether ``name`` is usable now (RUNNING, shell READY, exec probe answered)."""
        return self.check_readiness(name, require_docker=require_docker).ready

    def wait_until_ready(
        self,
        name: str,
        timeout: float = 900.0,
        *,
        poll_interval: float = 1.0,
        require_docker: bool = False,
        should_stop: Callable[[], bool] | None = None,
    ) -> BrevInstance:
        """Block until ``name`` is ready; fail fast on FAILURE, DELETING or a vanished instance.

        The sync driver over :class:`~airflow_provider_brev.core.instances.readiness.ReadinessWait` (the trigger
        runs the same machine through :meth:`await_readiness`): checks every ``poll_interval`` seconds while the
        instance changes stage and at most every 1.5 s during a long boot; a few transient check failures in a row
        do not end the wait.

        :param should_stop: checked before every step of the wait; once it returns ``True`` (the task was killed)
            the wait ends with :class:`~airflow_provider_brev.exceptions.BrevTaskKilledError`.
        """
        wait = ReadinessWait(
            name, deadline=time.monotonic() + timeout, poll_interval=poll_interval, now=time.monotonic()
        )

        def perform(call: Call) -> Readiness:
            assert isinstance(call, CheckReadiness)  # a sync check cannot be cancelled: its calls have budgets
            return self.check_readiness(name, require_docker=require_docker, probe_timeout=call.probe_timeout)

        def interrupted() -> BaseException | None:
            if should_stop is None or not should_stop():
                return None
            return BrevTaskKilledError(f"The task was killed while waiting for instance {name!r} to be ready.")

        step = drive(wait, perform, log=self.log, clock=time.monotonic, interrupted=interrupted)
        if step.action == "ready":
            self.log.info(step.took)
            assert step.readiness is not None
            return BrevInstance(**dict(step.readiness.instance or {"name": name, "id": "", "status": "RUNNING"}))
        if step.action == "timeout":
            raise BrevTimeoutError(step.message)
        raise BrevInstanceFailedError(step.message)

    async def await_readiness(
        self, name: str, *, deadline: float, poll_interval: float = 1.0, require_docker: bool = False, log: EmitLog
    ) -> WaitStep:
        """The async driver over :class:`~airflow_provider_brev.core.instances.readiness.ReadinessWait`, for the
        readiness trigger: the wait's last verdict (``ready``, ``failed`` or ``timeout``); raises the error of
        checks that kept failing. Checks share the triggerer's listing (:meth:`acheck_readiness`); one that runs
        past what is left of the wait is cancelled.

        :param deadline: absolute deadline (epoch seconds): a trigger resumed after a triggerer restart keeps it.
        :param log: where the wait's stages are logged (the trigger's logger).
        """
        wait = ReadinessWait(name, deadline=deadline, poll_interval=poll_interval, now=time.time())

        async def perform(call: Call) -> Readiness | str:
            assert isinstance(call, CheckReadiness)
            check = self.acheck_readiness(name, require_docker=require_docker, probe_timeout=call.probe_timeout)
            try:
                return await asyncio.wait_for(check, timeout=call.limit)
            except TimeoutError:
                return CHECK_OUTLIVED

        return await adrive(wait, perform, log=log, clock=time.time)


def _delete_target(name: str, instance_id: str | None) -> str:
    """What ``brev delete`` gets: the id when known (a name can be freed and taken by someone else), else the name."""
    if instance_id is None:
        return name
    if (
        not isinstance(instance_id, str)
        or not instance_id
        or instance_id.startswith("-")
        or not instance_id.isprintable()
    ):
        raise BrevInvalidInputError(f"Invalid instance id {instance_id!r} for instance {name!r}.")
    return instance_id


def _id_note(instance_id: str | None) -> str:
    return f" (id {instance_id})" if instance_id else ""


def _find(instances: list[BrevInstance], name: str) -> BrevInstance | None:
    for instance in instances:
        if instance.name == name:
            return instance
    for instance in instances:
        if instance.id == name:
            return instance
    return None
