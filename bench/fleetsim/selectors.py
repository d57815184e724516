"""Label and field selectors as kube-apiserver parses them (pure).

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``; as on a
real server, ``!=`` and ``notin`` also select objects without the label. Field selectors: ``path=v``,
``path==v``, ``path!=v`` over the fields the resource lets be selected (anything else is the real
server's 400 "field label not supported"), so a selector the controller sends and a real API server
refuses fails here too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass


class SelectorError(ValueError):
    """A selector the API server would refuse (400 BadRequest)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector."""

    key: str
    #: "=", "!=", "in", "notin", "exists", "!exists"
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "!exists":
            return value is None
        if self.op in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values  # "!=", "notin"


_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def _split_terms(selector: str) -> list[str]:
    """Top-level comma-separated terms (commas inside ``( )`` belong to a set)."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t.strip() for t in terms if t.strip()]


def _term(term: str) -> Requirement:
    m = _SET_TERM.match(term)
    if m:
        values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
        return Requirement(m.group(1), m.group(2), values)
    if term.startswith("!"):
        return Requirement(term[1:].strip(), "!exists")
    for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
        if op in term:
            key, value = term.split(op, 1)
            return Requirement(key.strip(), norm, frozenset({value.strip()}))
    if any(ch in term for ch in " ()<>"):
        raise SelectorError(f"unable to parse requirement: {term!r}")
    return Requirement(term, "exists")


def parse_labels(selector: str | None) -> tuple[Requirement, ...]:
    """The terms of a label selector (empty: everything)."""
    out = tuple(_term(t) for t in _split_terms(selector or ""))
    if any(not r.key for r in out):
        raise SelectorError(f"invalid label selector {selector!r}: empty key")
    return out


def labels_match(reqs: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in reqs)


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """One term of a field selector: ``path`` equals (or, negated, differs from) ``value``."""

    path: str
    value: str
    negate: bool


def parse_fields(selector: str | None, allowed: Collection[str]) -> tuple[FieldTerm, ...]:
    """The terms of a field selector over the ``allowed`` field paths."""
    out = []
    for term in _split_terms(selector or ""):
        negate = "!=" in term
        path, _, value = term.replace("==", "=").partition("!=" if negate else "=")
        if not _:
            raise SelectorError(f"invalid field selector: {term!r}")
        path = path.strip()
        if path not in allowed:
            raise SelectorError(f'field label not supported: {path}')
        out.append(FieldTerm(path, value.strip(), negate))
    return tuple(out)


def fields_match(terms: tuple[FieldTerm, ...], field: Callable[[str], str]) -> bool:
    return all((field(t.path) == t.value) != t.negate for t in terms)
