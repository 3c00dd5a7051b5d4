"""Unit tests of ``airflow_provider_brev/hooks/listing.py``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from airflow_provider_brev.exceptions import BrevTransientError
from airflow_provider_brev.hooks.listing import SharedListing
from unit.instance_helpers import inst

if TYPE_CHECKING:
    from airflow_provider_brev.core.protocol.output import BrevInstance


def test_shared_listing_serves_one_fetch_to_concurrent_waits_and_never_an_older_one():
    async def scenario() -> tuple[int, list[float], list[float]]:
        listing = SharedListing()
        fetches = 0
        release = asyncio.Event()

        async def fetch() -> list[BrevInstance]:
            nonlocal fetches
            fetches += 1
            await release.wait()
            return [inst()]

        loop = asyncio.get_running_loop()
        since = loop.time() - 10  # any listing started after this serves
        waits = [asyncio.ensure_future(listing.get(fetch, since=since)) for _ in range(20)]
        await asyncio.sleep(0)
        release.set()
        results = await asyncio.gather(*waits)
        first = [started for _, started in results]
        # a wait that needs a listing newer than the one it saw gets a new fetch, not the cached one
        newer = await listing.get(fetch, since=first[0] + 1e-6)
        return fetches, first, [newer[1]]

    fetches, first, newer = asyncio.run(scenario())
    assert fetches == 2
    assert len(set(first)) == 1
    assert newer[0] > first[0]


def test_shared_listing_failure_reaches_its_waiters_and_the_next_get_fetches_again():
    async def scenario() -> tuple[int, int, bool]:
        listing = SharedListing()
        calls = 0

        async def fetch() -> list[BrevInstance]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise BrevTransientError("502")
            return [inst()]

        results = await asyncio.gather(*(listing.get(fetch, since=0.0) for _ in range(5)), return_exceptions=True)
        failed = sum(isinstance(r, BrevTransientError) for r in results)
        value, _ = await listing.get(fetch, since=0.0)
        return failed, calls, bool(value)

    failed, calls, ok = asyncio.run(scenario())
    assert (failed, calls, ok) == (5, 2, True)
