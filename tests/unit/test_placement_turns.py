"""Placements take turns: never two in one turn of the event loop (mirror.placer.Placer.turn), so the
loop's timers (the Lease, the probes) run between any two."""

from __future__ import annotations

import asyncio

from testkit.fakefleet import fake_fleet


async def test_two_placements_never_share_a_turn_of_the_loop() -> None:
    async with fake_fleet() as f:
        placer = f.reconciler.places
        seen: list[str] = []

        async def place(name: str) -> None:
            async with placer.turn():
                seen.append(name)

        async def ticks() -> None:
            for _ in range(8):
                seen.append("tick")
                await asyncio.sleep(0)

        await asyncio.gather(place("a"), place("b"), place("c"), ticks())
        a, b, c = (seen.index(n) for n in "abc")
        assert a < b < c, seen
        assert "tick" in seen[a + 1:b] and "tick" in seen[b + 1:c], seen
