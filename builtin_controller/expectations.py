"""What the controller is still waiting to see in its informer cache.

The pod cache lags behind our own writes. Without bookkeeping, a sync that runs right
after we created 3 pods would not see them yet and create 3 more. So a sync that issues
creates/deletes records how many it expects to observe; later syncs only manage pods once
the informer delivered them all (or the expectation expired, in case an event was lost).
Finalizer removals are tracked per pod UID, so a pod whose finalizer we already removed —
and counted — is not counted twice while the cache still shows the finalizer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class _Expectation:
    add: int
    delete: int
    timestamp: float

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


@dataclass
class ControllerExpectations:
    """Outstanding pod creations/deletions per Job key, with a TTL against lost events."""

    timeout: float = EXPECTATIONS_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    _store: dict[str, _Expectation] = field(default_factory=dict)

    def satisfied(self, key: str) -> bool:
        exp = self._store.get(key)
        if exp is None:
            return True
        return exp.fulfilled() or self.clock() - exp.timestamp > self.timeout

    def set(self, key: str, add: int, delete: int) -> None:
        self._store[key] = _Expectation(add, delete, self.clock())

    def expect_creations(self, key: str, n: int) -> None:
        self.set(key, n, 0)

    def expect_deletions(self, key: str, n: int) -> None:
        self.set(key, 0, n)

    def creation_observed(self, key: str) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add -= 1

    def deletion_observed(self, key: str) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.delete -= 1

    def delete(self, key: str) -> None:
        self._store.pop(key, None)

    def get(self, key: str) -> tuple[int, int] | None:
        exp = self._store.get(key)
        return None if exp is None else (exp.add, exp.delete)


@dataclass
class FinalizerExpectations:
    """Pod UIDs whose tracking-finalizer removal we issued but have not observed yet."""

    _store: dict[str, set[str]] = field(default_factory=dict)

    def expected(self, key: str) -> frozenset[str]:
        return frozenset(self._store.get(key, ()))

    def expect_removed(self, key: str, uids: Iterable[str]) -> None:
        self._store.setdefault(key, set()).update(uids)

    def observed(self, key: str, uid: str) -> None:
        s = self._store.get(key)
        if s is not None:
            s.discard(uid)

    def delete(self, key: str) -> None:
        self._store.pop(key, None)
