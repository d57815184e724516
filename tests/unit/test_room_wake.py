"""A Job woken because room appeared goes ahead of the queue (10,000-Job runs, issue 38).

Behind a burst of new Jobs, whose first passes only join the line for room, an ordinary add kept
the woken head of line from its room until the whole backlog had drained: 30-63 s with every
worker nearly empty.
"""

from __future__ import annotations

import asyncio

from mirror.config import Config
from mirror.controller import MirrorController
from mirror.jobs.kind import JOB_KIND
from mirror.kinds import QueueKey


def test_a_woken_head_of_line_passes_before_the_backlog() -> None:
    async def main() -> list[QueueKey]:
        ctl = MirrorController(Config.model_validate({"workers": [{"name": "w1", "kubeconfig": "/k"}]}),
                               kinds=[JOB_KIND])
        backlog = [QueueKey(JOB_KIND.name, f"ns/new-{i}") for i in range(1000)]
        for key in backlog:
            ctl.queue.add(key, why="manager-added")
        head = QueueKey(JOB_KIND.name, "ns/head")
        ctl.queue.add(head, why="manager-added")  # already queued, behind the burst, when room appears
        ctl._wake([head, QueueKey("NotMirrored", "ns/x")])
        return [await ctl.queue.get() for _ in range(2)]

    first, second = asyncio.run(main())
    assert first == QueueKey(JOB_KIND.name, "ns/head")
    assert second == QueueKey(JOB_KIND.name, "ns/new-0")
