"""Label selectors in kubectl's string syntax, for ``jobmirror.dev/worker-selector``.

``env=prod,tier!=batch,region in (eu, us),gpu,!spot`` — the same syntax users type after
``kubectl get -l``, matched against the ``labels`` each worker has in the configuration.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Matcher = Callable[[Mapping[str, str]], bool]

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


class SelectorError(ValueError):
    """A selector that does not parse; the message quotes the bad requirement."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # in | notin | exists | !exists
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.key)
        if self.op == "exists":
            return have is not None
        if self.op == "!exists":
            return have is None
        if self.op == "in":
            return have is not None and have in self.values
        return have is None or have not in self.values


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse(text: str) -> tuple[Requirement, ...]:
    """The requirements of a selector; an empty selector matches every worker."""
    if not text.strip():
        return ()
    out = []
    for part in _split(text):
        if m := _SET.match(part):
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            if not values:
                raise SelectorError(f"{part.strip()!r}: a set needs at least one value")
            out.append(Requirement(m.group(1), m.group(3), values))
        elif m := _EQ.match(part):
            out.append(Requirement(m.group(1), "notin" if m.group(3) == "!=" else "in", frozenset({m.group(4)})))
        elif m := _EXISTS.match(part):
            out.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"{part.strip()!r} is not a label requirement (key, !key, key=value, key!=value, "
                                "key in (a,b), key notin (a,b))")
    return tuple(out)


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)
