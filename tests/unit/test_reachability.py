"""A backoff pause ends when its cluster is seen answering again, and only the pauses under way then."""

from __future__ import annotations

import asyncio

from kruntime.reachability import Reachability
from testkit.fakecluster import FakeApiServer


async def test_a_pause_ends_when_the_server_answers_again() -> None:
    r = Reachability()
    loop = asyncio.get_running_loop()
    started = loop.time()
    pauses = [asyncio.create_task(r.pause(30.0)) for _ in range(3)]
    await asyncio.sleep(0.01)
    r.answered_again()
    await asyncio.wait_for(asyncio.gather(*pauses), 1.0)
    assert loop.time() - started < 1.0 and r.recoveries == 1


async def test_a_pause_begun_after_a_recovery_waits_for_the_next_one() -> None:
    r = Reachability()
    r.answered_again()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await r.pause(0.2)
    assert loop.time() - started >= 0.19


async def test_siblings_share_their_clusters_reachability() -> None:
    client = FakeApiServer().client("w")
    assert client.sibling("watch", pool_size=2).reachability is client.reachability
