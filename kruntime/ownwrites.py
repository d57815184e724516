"""Read-your-writes over an informer cache, shared by both controllers.

An informer delivers the result of our own write a few milliseconds after the write
returns; a pass that runs in between sees the older object. Both controllers keep what
their last write of each object returned here and ask, at the start of a pass, whether
the cache has caught up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kruntime.resources import Obj, is_newer, key_of


@dataclass(frozen=True)
class OwnWrite:
    obj: Obj
    age: float  # seconds since the write


class OwnWrites:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._latest: dict[str, tuple[Obj, float]] = {}

    def record(self, written: Obj) -> Obj:
        """Remember what a write (or a live read) returned; returns it for chaining."""
        self._latest[key_of(written)] = (written, self.clock())
        return written

    def ahead_of(self, key: str, cached: Obj | None) -> OwnWrite | None:
        """Our last write of ``key`` when it is newer than ``cached``; else forget it and return None.

        Forgotten as well when the object is gone from the cache or was replaced (other uid).
        """
        entry = self._latest.get(key)
        if entry is None:
            return None
        obj, at = entry
        if cached is None or cached["metadata"].get("uid") != obj["metadata"].get("uid") or not is_newer(obj, cached):
            del self._latest[key]
            return None
        return OwnWrite(obj, self.clock() - at)

    def is_echo(self, obj: Obj) -> bool:
        """Whether ``obj`` (a watch event) is exactly what our last write of it returned.

        The pass that wrote it went on with that object, so the echo needs no pass of its own;
        the write is forgotten, the cache now holds it.
        """
        key = key_of(obj)
        entry = self._latest.get(key)
        if entry is None:
            return False
        mine, md = entry[0]["metadata"], obj["metadata"]
        if mine.get("uid") != md.get("uid") or mine.get("resourceVersion") != md.get("resourceVersion"):
            return False
        del self._latest[key]
        return True

    def is_behind(self, obj: Obj) -> bool:
        """Whether ``obj`` (a watch event) is an older version than our last write or live read of it.

        Only for callers whose every write is conditional on the resourceVersion it read: then the
        pass that made that write (or read) saw every change up to it, this one included. The record
        is kept: its own echo is still to come.
        """
        entry = self._latest.get(key_of(obj))
        if entry is None or entry[0]["metadata"].get("uid") != obj["metadata"].get("uid"):
            return False
        return is_newer(entry[0], obj)

    def forget(self, key: str) -> None:
        self._latest.pop(key, None)
