"""One poll per instance for every job the triggers of one event loop follow on it (the async I/O of
:mod:`airflow_provider_brev.core.jobs.shared_polls`).

:meth:`BrevHook.apoll_job <airflow_provider_brev.hooks.brev.BrevHook.apoll_job>` hands its request to the loop's
:class:`InstancePolls` of the instance: requests that arrive while a poll of the instance runs wait for it to end
and then go together, in one ``brev exec`` of
:func:`~airflow_provider_brev.core.jobs.scripts.build_poll_many_command` (of ``build_poll_command`` for one job), whose per-job blocks are fanned out to the
waiting followers. A follower answered asks again at once (its next poll waits on the instance), so the followers of
one instance fall into step after their first poll: one process per instance, whose wait ends as soon as any of its
jobs ends. A poll is retried as a worker's is (transient failures, an answer cut short); one that still fails fails
every request of it (each follower counts it against its own budget). A follower
cancelled (its trigger removed, ``on_kill``) withdraws its request; a poll nobody waits for any more is cancelled,
which kills its process group.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_brev.core.jobs.scripts import build_poll_many_command, polls_that_fit
from airflow_provider_brev.core.jobs.shared_polls import plan_shared_poll
from airflow_provider_brev.exceptions import BrevError

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_brev.core.jobs.handle import RemoteJob
    from airflow_provider_brev.core.jobs.remote import PollResult
    from airflow_provider_brev.hooks.process import ProcessResult

__all__ = ["InstancePolls", "PollingHook", "shared_poll"]

#: Event-loop turns a new poll waits for the followers just answered to ask again (they do so without awaiting
#: anything else), so that they join it instead of the one after.
_GATHER_TURNS = 3


class PollingHook(Protocol):
    """What a shared poll needs of the hook (:class:`~airflow_provider_brev.hooks.brev.BrevHook`)."""

    brev_conn_id: str | None

    async def aexec_script(self, name: str, script: str, *, timeout: float = ...) -> ProcessResult: ...

    async def retry_async(self, func: Callable[[], Any]) -> Any: ...

    def _poll_request(
        self, job: RemoteJob, *, offset: int, max_bytes: int, wait: float
    ) -> tuple[str, float, Callable[[ProcessResult], PollResult]]: ...

    @staticmethod
    def _poll_timeout(wait: float) -> float: ...

    @classmethod
    def _poll_reader(cls, job: RemoteJob, offset: int) -> Callable[[ProcessResult], PollResult]: ...


@dataclass
class _Request:
    job: RemoteJob
    offset: int
    max_bytes: int
    wait: float
    answer: asyncio.Future[PollResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


#: The shared polls of each event loop: (connection id, instance name) -> its polls; gone with their loop.
_LOOP_POLLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str | None, str], InstancePolls]] = (
    weakref.WeakKeyDictionary()
)


class InstancePolls:
    """The shared polls of one instance in one event loop.

    :param hook: runs the polls (the first follower's hook; every follower of the instance uses the same connection).
    :param instance_name: the instance.
    :param siblings: every instance's polls in this loop (how many instances are polled decides whether a poll may
        wait on its instance: :func:`~airflow_provider_brev.core.jobs.shared_polls.may_hold`).
    :param process_cap: the loop's cap on concurrent processes (0: none).
    """

    def __init__(
        self,
        hook: PollingHook,
        instance_name: str,
        siblings: dict[tuple[str | None, str], InstancePolls],
        process_cap: int,
    ) -> None:
        self.key = (hook.brev_conn_id, instance_name)
        self.hook = hook
        self.instance_name = instance_name
        self.siblings = siblings
        self.process_cap = process_cap
        self._waiting: list[_Request] = []
        self._running: list[_Request] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        """A poll of this instance runs or waits to."""
        return self._task is not None and not self._task.done()

    async def poll(self, job: RemoteJob, *, offset: int, max_bytes: int, wait: float) -> PollResult:
        """``job``'s state and its log from ``offset``, from the next poll of the instance."""
        request = _Request(job, offset, max_bytes, wait)
        self._waiting.append(request)
        if not self.busy:
            self._task = asyncio.get_running_loop().create_task(self._serve(), name=f"brev-polls-{self.instance_name}")
        try:
            return await asyncio.shield(request.answer)  # the answer is withdrawn below, not by the cancellation
        except asyncio.CancelledError:
            self._withdraw(request)
            raise

    def _withdraw(self, request: _Request) -> None:
        request.answer.cancel()
        if request in self._waiting:
            self._waiting.remove(request)
        if self._task is not None and not self._waiting and all(r.answer.done() for r in self._running):
            self._task.cancel()  # nobody waits for this poll any more: stop its process
            self._forget()

    def _forget(self) -> None:
        """Leave the loop's registry (the next request of this instance starts afresh)."""
        if self.siblings.get(self.key) is self:
            del self.siblings[self.key]

    async def _serve(self) -> None:
        try:
            while True:
                for _ in range(_GATHER_TURNS):
                    await asyncio.sleep(0)
                batch = self._take()
                if not batch:
                    self._forget()
                    return
                self._running = batch
                await self._run(batch)
                self._running = []
        except Exception as err:  # not a poll's failure (those answer their requests): a fault, to every follower
            self._give_up(err)
        except BaseException:  # cancelled: nobody is left to answer, or the loop is closing
            self._give_up(None)
            raise

    def _give_up(self, error: Exception | None) -> None:
        """Answer every request still open with ``error`` (``None``: cancel them) and leave the registry."""
        for request in self._waiting + self._running:
            if request.answer.done():
                continue
            if error is None:
                request.answer.cancel()
            else:
                request.answer.set_exception(error)
        self._waiting = []
        self._forget()

    def _take(self) -> list[_Request]:
        """The waiting requests, one per job, as many as one poll's script holds (:func:`polls_that_fit`); the
        others -- a job's second request (two followers of it), jobs beyond the script's length -- are answered by
        the next poll, first."""
        batch: dict[str, _Request] = {}
        later: list[_Request] = []
        for request in self._waiting:
            if request.answer.done():
                continue
            if request.job.job_dir in batch:
                later.append(request)
            else:
                batch[request.job.job_dir] = request
        taken = list(batch.values())
        fit = polls_that_fit([(r.job, r.offset, r.max_bytes) for r in taken])
        self._waiting = taken[fit:] + later
        return taken[:fit]

    async def _run(self, batch: list[_Request]) -> None:
        busy = sum(1 for polls in self.siblings.values() if polls.busy)
        plan = plan_shared_poll(
            [r.wait for r in batch], [r.max_bytes for r in batch], instances_polling=busy, process_cap=self.process_cap
        )
        if plan.sleep_first:
            await asyncio.sleep(plan.sleep_first)
        polls = [(r.job, r.offset, size) for r, size in zip(batch, plan.max_bytes, strict=True)]
        if len(polls) == 1:  # one job: the very poll a worker runs
            script, timeout, _read = self.hook._poll_request(
                batch[0].job, offset=batch[0].offset, max_bytes=polls[0][2], wait=plan.hold
            )
        else:
            script, timeout = build_poll_many_command(polls, wait=plan.hold), self.hook._poll_timeout(plan.hold)
        readers = [self.hook._poll_reader(r.job, r.offset) for r in batch]

        async def once() -> list[PollResult]:
            result = await self.hook.aexec_script(self.instance_name, script, timeout=timeout)
            return [read(result) for read in readers]  # a cut answer: the whole poll again

        try:
            answers = await self.hook.retry_async(once)
        except BrevError as err:
            for request in batch:
                if not request.answer.done():
                    request.answer.set_exception(err)
            return
        for request, answer in zip(batch, answers, strict=True):
            if not request.answer.done():
                request.answer.set_result(answer)


def loop_polls() -> dict[tuple[str | None, str], InstancePolls]:
    """The running event loop's shared polls, by (connection id, instance name)."""
    loop = asyncio.get_running_loop()
    polls = _LOOP_POLLS.get(loop)
    if polls is None:
        polls = _LOOP_POLLS[loop] = {}
    return polls


async def shared_poll(
    hook: PollingHook, name: str, job: RemoteJob, *, offset: int, max_bytes: int, wait: float, process_cap: int
) -> PollResult:
    """``job``'s state and log from ``offset``, from the running loop's next poll of instance ``name`` (see the module
    docstring); the same answer :meth:`~airflow_provider_brev.hooks.brev.BrevHook.poll_job` gives.

    :param process_cap: the loop's cap on concurrent processes (``[brev] triggerer_max_processes``; 0: none).
    """
    polls = loop_polls()
    key = (hook.brev_conn_id, name)
    instance = polls.get(key)
    if instance is None:
        instance = polls[key] = InstancePolls(hook, name, polls, process_cap)
    return await instance.poll(job, offset=offset, max_bytes=max_bytes, wait=wait)
