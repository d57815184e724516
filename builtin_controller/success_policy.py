"""``spec.successPolicy`` (KEP-3998): declare an Indexed Job successful early.

A rule is met when all of its ``succeededIndexes`` succeeded, or at least
``succeededCount`` of them (or of all indexes, when the rule names none). The first met
rule wins and its position goes into the ``SuccessCriteriaMet`` message.
"""

from __future__ import annotations

from jobapi.intervals import Intervals
from kruntime.resources import Obj


def overlap_count(rule: Intervals, succeeded: Intervals) -> int:
    """How many of ``rule``'s indexes are in ``succeeded`` (linear merge walk)."""
    r = list(rule)
    s = list(succeeded)
    i = j = 0
    total = 0
    while i < len(r) and j < len(s):
        lo = max(r[i][0], s[j][0])
        hi = min(r[i][1], s[j][1])
        if hi >= lo:
            total += hi - lo + 1
        if s[j][1] < r[i][1]:
            j += 1
        elif s[j][1] > r[i][1]:
            i += 1
        else:
            i += 1
            j += 1
    return total


def succeeded_indexes_rule_met(rule: Intervals, succeeded: Intervals, succeeded_count: int | None) -> bool:
    contained = overlap_count(rule, succeeded)
    return contained == rule.total() or (succeeded_count is not None and contained >= succeeded_count)


def match(policy: Obj | None, completions: int, succeeded: Intervals) -> str | None:
    """The ``SuccessCriteriaMet`` message when a rule is met, else None."""
    if not policy or not succeeded:
        return None
    for i, rule in enumerate(policy.get("rules") or []):
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            required = Intervals.parse(rule["succeededIndexes"], completions)
            if not required:
                continue  # unusable rule text: never matches
            if succeeded_indexes_rule_met(required, succeeded, count):
                return f"Matched rules at index {i}"
        elif count is not None and succeeded.total() >= int(count):
            return f"Matched rules at index {i}"
    return None
