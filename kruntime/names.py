"""Object names as the API server validates them, and path segments that cannot escape their place.

A name or namespace that reaches a URL path unescaped can walk it: ``..`` is resolved by
the HTTP stack and ``%2F`` decodes to ``/`` (issue 19). Every path we build goes through
:func:`segment`; everything a caller hands us goes through the validators first, so a bad
value is refused with its own name instead of being served as some other object.
"""

from __future__ import annotations

import re
from urllib.parse import quote

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class InvalidName(ValueError):
    """A namespace, name or path segment that the API server would not accept (the message says which)."""


def dns1123_label_error(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 label (namespaces), or None."""
    if not value:
        return "must not be empty"
    if len(value) > 63:
        return f"must be at most 63 characters (has {len(value)})"
    if not _LABEL.fullmatch(value):
        return "must be lower-case alphanumerics or '-', starting and ending with an alphanumeric"
    return None


def dns1123_subdomain_error(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain (most object names), or None."""
    if not value:
        return "must not be empty"
    if len(value) > 253:
        return f"must be at most 253 characters (has {len(value)})"
    if not _SUBDOMAIN.fullmatch(value):
        return "must be lower-case alphanumerics, '-' or '.', starting and ending with an alphanumeric"
    return None


def check_namespace(value: str, what: str = "namespace") -> str:
    why = dns1123_label_error(value)
    if why:
        raise InvalidName(f"{what} {value!r}: {why}")
    return value


def check_name(value: str, what: str = "name") -> str:
    why = dns1123_subdomain_error(value)
    if why:
        raise InvalidName(f"{what} {value!r}: {why}")
    return value


def segment(value: str) -> str:
    """One URL path segment: escaped so that ``/``, ``%``, ``?`` and ``#`` stay inside it; ``.``,
    ``..`` and the empty string are refused (no escaping keeps them from being resolved)."""
    if value in ("", ".", ".."):
        raise InvalidName(f"{value!r} cannot be a path segment")
    return quote(value, safe="")
