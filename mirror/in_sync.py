"""The Jobs whose copy runs and is mirrored, with nothing to do until something changes.

Their last pass found the manager saying what the copy says, on a healthy worker: what changes
that comes as an event (the copy's, the manager object's, a stuck copy's) except the worker
going down. So they keep no timer of their own — 20,000 running Jobs on a 30 s resync were 667
passes a second that found nothing (issue 38) — and are looked at again when their worker is
unhealthy (:meth:`InSync.take`, asked every few seconds by the controller).
"""

from __future__ import annotations

from collections.abc import Iterator


class InSync:
    """Per worker, the in-sync Jobs placed there (by manager uid, with their queue key)."""

    def __init__(self) -> None:
        self._worker_of: dict[str, str] = {}
        self._on: dict[str, dict[str, str]] = {}

    def mark(self, uid: str, key: str, worker: str) -> None:
        self.drop(uid)
        self._worker_of[uid] = worker
        self._on.setdefault(worker, {})[uid] = key

    def drop(self, uid: str) -> None:
        """A pass began, or the Job is gone: not known to be in sync."""
        worker = self._worker_of.pop(uid, None)
        if worker is not None:
            on = self._on[worker]
            on.pop(uid, None)
            if not on:
                del self._on[worker]

    def take(self, worker: str) -> list[str]:
        """The keys of the in-sync Jobs on ``worker``, no longer marked (their next pass judges them)."""
        on = self._on.pop(worker, {})
        for uid in on:
            del self._worker_of[uid]
        return list(on.values())

    def workers(self) -> Iterator[str]:
        return iter(list(self._on))

    def __len__(self) -> int:
        return len(self._worker_of)

    def __contains__(self, uid: object) -> bool:
        return uid in self._worker_of
