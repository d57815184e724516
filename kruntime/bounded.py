"""Bounded per-object bookkeeping: a controller's memory must follow the objects it handles.

Per-uid maps are emptied when their object is handled to the end, but an object can also
vanish without that (force-removed finalizer, deleted while unclaimed); :class:`LruDict`
caps what such leaks can add up to by evicting the least recently written entries.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruDict(OrderedDict[K, V]):
    """A dict of at most ``maxlen`` entries; writing an entry makes it the newest, the oldest go first."""

    def __init__(self, maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        super().__init__()
        self.maxlen = maxlen

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxlen:
            self.popitem(last=False)

    def setdefault(self, key: K, default: V) -> V:
        if key in self:
            self.move_to_end(key)
            return self[key]
        self[key] = default
        return default
