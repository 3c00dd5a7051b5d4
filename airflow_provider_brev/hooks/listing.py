"""One ``brev ls`` shared by every async readiness wait of a process (the triggerer's event loop).

Fifty deferred waits polling on their own would start fifty ``brev ls`` per second. A :class:`SharedListing`
serves them all from one listing: a waiter asks for a listing *started after* its previous check (so it never sees a state older than
what it already knew, and a wait that begins right after ``brev create`` never sees a listing from before it),
joins a listing already in flight when that one qualifies, and only otherwise starts a new one. With waits polling
once a second, the process starts about one ``brev ls`` per second whatever their number.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from airflow_provider_brev.core.protocol.output import BrevInstance

__all__ = ["SharedListing", "shared_listing"]


class SharedListing:
    """The newest listing of one account (one CLI, HOME and secret) and the one being fetched, if any."""

    def __init__(self) -> None:
        self._value: list[BrevInstance] | None = None
        self._value_started = float("-inf")
        self._inflight: asyncio.Future[list[BrevInstance]] | None = None
        self._inflight_started = float("-inf")

    async def get(
        self, fetch: Callable[[], Awaitable[list[BrevInstance]]], *, since: float
    ) -> tuple[list[BrevInstance], float]:
        """A listing whose ``brev ls`` started at or after ``since`` (``time.monotonic()``), and when it started.

        :param fetch: runs one ``brev ls`` (only called when no qualifying listing exists or is in flight).
        :param since: the caller's previous check (or the start of its wait).
        """
        if self._value is not None and self._value_started >= since:
            return self._value, self._value_started
        if self._inflight is None or self._inflight.done() or self._inflight_started < since:
            self._inflight_started = time.monotonic()
            self._inflight = asyncio.ensure_future(self._refresh(fetch, self._inflight_started))
        started = self._inflight_started
        return await asyncio.shield(self._inflight), started

    async def _refresh(self, fetch: Callable[[], Awaitable[list[BrevInstance]]], started: float) -> list[BrevInstance]:
        """One ``brev ls``; a failure reaches every waiter of this fetch, and the next ``get`` fetches anew (each
        waiter's own failure budget decides whether to wait on)."""
        value = await fetch()
        if started >= self._value_started:
            self._value, self._value_started = value, started
        return value


_REGISTRY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], SharedListing]] = (
    weakref.WeakKeyDictionary()
)


def shared_listing(key: tuple[str, ...]) -> SharedListing:
    """The :class:`SharedListing` of ``key`` in the running event loop (one per loop and account)."""
    per_loop = _REGISTRY.setdefault(asyncio.get_running_loop(), {})
    listing = per_loop.get(key)
    if listing is None:
        listing = per_loop[key] = SharedListing()
    return listing
