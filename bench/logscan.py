"""Summarise a controller log: counts per level and the most frequent warning/error shapes (pure)."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

_LEVEL = re.compile(r"\b(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NUM = re.compile(r"\d+(\.\d+)?")


def shape(message: str, limit: int = 200) -> str:
    """A message with uids and numbers blanked, so one problem hitting many Jobs counts as one."""
    return _NUM.sub("N", _UUID.sub("<uid>", message))[:limit]


def parse_log_line(line: str) -> tuple[str, str] | None:
    """(level, message) of a JSON-lines or ``<time> LEVEL logger: message`` log line."""
    s = line.strip()
    if not s:
        return None
    if s.startswith("{"):
        try:
            rec = json.loads(s)
        except ValueError:
            rec = None
        if isinstance(rec, dict) and "level" in rec:
            return str(rec["level"]).upper(), f"{rec.get('logger', '')}: {rec.get('msg', '')}"
    m = _LEVEL.search(s[:60])
    if m:
        return ("WARNING" if m.group(1) == "WARN" else m.group(1)), s[m.end():].strip()
    return "OTHER", s


def summarize_log(text: str, top: int = 12) -> dict[str, Any]:
    levels: Counter[str] = Counter()
    shapes: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for line in text.splitlines():
        parsed = parse_log_line(line)
        if parsed is None:
            continue
        level, msg = parsed
        levels[level] += 1
        if level in ("WARNING", "ERROR", "CRITICAL", "OTHER"):
            sh = f"{level} {shape(msg)}"
            shapes[sh] += 1
            examples.setdefault(sh, msg[:400])
    return {
        "lines": sum(levels.values()),
        "byLevel": dict(levels),
        "topProblems": [{"count": c, "shape": s, "example": examples[s]} for s, c in shapes.most_common(top)],
    }
