"""Times out of Kubernetes objects (pure).

``metadata.creationTimestamp``, condition times and ``managedFields[].time`` are RFC 3339
with **second** granularity (``2026-05-01T10:00:00Z``); MicroTime fields carry
fractions. Every function returns POSIX seconds (float) so differences are plain
subtraction; a difference of two second-granular stamps is only good to ±1 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

Obj = Mapping[str, Any]


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``Z`` or an offset, optional fraction of any length) to POSIX seconds."""
    if not value:
        return None
    s = value.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    frac = ""
    if "." in s:
        head, _, tail = s.partition(".")
        digits = ""
        for ch in tail:
            if ch.isdigit():
                digits += ch
            else:
                break
        frac = digits
        s = head + tail[len(digits):]
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    ts = dt.timestamp()
    if frac:
        ts += int(frac) / 10 ** len(frac)
    return ts


def creation_time(obj: Obj) -> float | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def managed_fields_time(
    obj: Obj,
    *,
    subresource: str | None = "status",
    manager: str | None = None,
    operation: str | None = None,
) -> float | None:
    """Latest ``time`` among the managedFields entries that match.

    ``subresource="status"`` selects status-subresource writes (``""``/``None``-valued
    entries are main-resource writes; pass ``subresource=""`` for those); ``manager``
    and ``operation`` (``Update``/``Apply``) narrow further when given.
    """
    best: float | None = None
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if subresource is not None and (entry.get("subresource") or "") != subresource:
            continue
        if manager is not None and entry.get("manager") != manager:
            continue
        if operation is not None and entry.get("operation") != operation:
            continue
        t = parse_time(entry.get("time"))
        if t is not None and (best is None or t > best):
            best = t
    return best


def condition(obj: Obj, ctype: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def condition_true(obj: Obj, ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def terminal_condition(obj: Obj) -> str | None:
    """``"Complete"`` or ``"Failed"`` when the Job carries that condition as True, else ``None``."""
    for t in ("Complete", "Failed"):
        if condition_true(obj, t):
            return t
    return None
