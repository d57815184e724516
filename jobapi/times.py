"""``metav1.Time`` on the wire: RFC 3339, UTC, whole seconds when the API server stores it."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 at second precision in UTC: how the API server stores ``metav1.Time``.

    Emitting the stored form means a value we write compares equal to what we read back, so
    a level-triggered loop does not rewrite the same status forever. A naive datetime is
    taken as UTC.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 string as an aware UTC datetime, fractional seconds kept; junk gives None.

    This is what ``metav1.Time``'s decoder does (the builtin controller computes backoff
    delays and deadlines with it, as upstream does).
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_time_seconds(value: object) -> datetime | None:
    """Like :func:`parse_time`, truncated to whole seconds: the instant the API server would store.

    The mirror compares and copies status times at this precision, so that a value it writes
    reads back equal.
    """
    moment = parse_time(value)
    return moment.replace(microsecond=0) if moment is not None else None
