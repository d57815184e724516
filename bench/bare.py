"""The bare-API limit: the fewest writes a mirror must make per Job, with no decisions.

``python -m bench.bare`` watches manager Jobs of one ``managedBy`` and, per Job, makes
exactly three writes: create the copy in a worker (round robin, the body built by the
mirror's own :func:`mirror.jobs.remote_copy.build_remote_copy`), merge-patch the worker's
final status onto the manager Job's status subresource, delete the copy. No finalizer,
no intermediate status, no collision checks, no events: whatever jobmirror does beyond
this is the price of its guarantees (:mod:`bench.floor` pays exactly that price).
``bench compare`` runs it at the same client QPS/burst as jobmirror, as the ceiling for
this machine.
"""

from __future__ import annotations

import sys

from bench import kubetime, minimal
from bench.minimal import Handler, Minimal
from kruntime.resources import JOBS, Obj
from mirror.jobs.remote_copy import build_remote_copy

MANAGED_BY = "bench.jobmirror.dev/bare"
FIELD_MANAGER = "bench-bare"


class Bare(Minimal):
    managed_by = MANAGED_BY
    field_manager = FIELD_MANAGER

    def on_manager(self, etype: str, old: Obj | None, new: Obj) -> None:
        name = new["metadata"]["name"]
        if not self.ours(etype, new) or name in self.dispatched:
            return
        self.dispatched.add(name)
        worker = self.round_robin()
        body = build_remote_copy(new, origin=self.origin, origin_cluster="manager", remote_name=name)
        self.spawn(self.retry(f"create {name} in {worker}",
                              lambda: self.workers[worker].create(JOBS, self.namespace, body)))

    def worker_handler(self, worker: str) -> Handler:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            name = new["metadata"]["name"]
            if etype == "DELETED" or name in self.finished or kubetime.terminal_condition(new) is None:
                return
            self.finished.add(name)
            self.spawn(self._finish(worker, name, new.get("status") or {}))
        return handle

    async def _finish(self, worker: str, name: str, status: Obj) -> None:
        if await self.retry(f"status {name}", lambda: self.manager.patch(
                JOBS, self.namespace, name, {"status": status}, subresource="status")) is not None:
            await self.retry(f"delete {name} in {worker}",
                             lambda: self.workers[worker].delete(JOBS, self.namespace, name))


def main(argv: list[str] | None = None) -> int:
    return minimal.main(argv, Bare, "python -m bench.bare", __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
