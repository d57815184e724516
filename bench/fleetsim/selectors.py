"""Label and field selectors as kube-apiserver parses them (pure).

Label selectors are the product's own parser (mirror.worker_selector: ``k=v``, ``k!=v``, ``k in (a,b)``,
``k notin (a,b)``, ``k``, ``!k``; ``!=`` and ``notin`` also select objects without the label, as on a
real server). Field selectors: ``path=v``, ``path==v``, ``path!=v`` over the fields the resource lets
be selected (anything else is the real server's 400 "field label not supported"), so a selector the
controller sends and a real API server refuses fails here too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from mirror.worker_selector import Requirement, SelectorError, matches, parse

__all__ = ["FieldTerm", "Requirement", "SelectorError", "fields_match", "labels_match", "parse_fields",
           "parse_labels"]


def parse_labels(selector: str | None) -> tuple[Requirement, ...]:
    """The terms of a label selector (empty: everything)."""
    return parse(selector or "")


labels_match = matches


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """One term of a field selector: ``path`` equals (or, negated, differs from) ``value``."""

    path: str
    value: str
    negate: bool


def parse_fields(selector: str | None, allowed: Collection[str]) -> tuple[FieldTerm, ...]:
    """The terms of a field selector over the ``allowed`` field paths."""
    out = []
    for term in (t.strip() for t in (selector or "").split(",") if t.strip()):
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
