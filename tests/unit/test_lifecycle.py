"""kruntime.lifecycle: the stop-on-signal loop both controller commands use."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from kruntime.lifecycle import add_logging_args, cancel_and_wait, run_until_signalled


async def test_work_that_ends_by_itself_is_handed_back() -> None:
    async def work() -> None:
        raise RuntimeError("boom")

    async def never(task: asyncio.Task[None]) -> None:
        raise AssertionError("no signal was sent")

    ended = await run_until_signalled(work(), never)
    assert ended is not None and isinstance(ended.exception(), RuntimeError)


async def test_a_signal_winds_the_work_down() -> None:
    started = asyncio.Event()
    cleaned = asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.set()

    async def send() -> None:
        await started.wait()
        os.kill(os.getpid(), signal.SIGTERM)

    sender = asyncio.create_task(send())
    assert await run_until_signalled(work(), cancel_and_wait) is None
    await sender
    assert cleaned.is_set()


def test_both_commands_take_the_same_logging_flags() -> None:
    p = argparse.ArgumentParser()
    add_logging_args(p)
    args = p.parse_args(["--log-level", "debug", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("DEBUG", "json")
