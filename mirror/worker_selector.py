"""Label selectors in kubectl's string syntax, for ``jobmirror.dev/worker-selector``.

``env=prod,tier!=batch,region in (eu, us),gpu,!spot`` — the same syntax users type after
``kubectl get -l``, matched against the ``labels`` each worker has in the configuration.

Whoever may create a Job writes this annotation (up to 256 KiB) and it is parsed on every
placement pass, so the parser is a hand-written scan, linear in the text (no regular
expression that could backtrack), behind a length limit checked first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Matcher = Callable[[Mapping[str, str]], bool]

#: The longest selector parsed, in characters: a selector of workers' labels is a line, and the
#: Job gets a NoWorker warning naming this limit instead of a pass spent on a 256 KiB annotation.
MAX_SELECTOR_LENGTH = 4096

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_VALUE_CHARS = _ALNUM | frozenset("-_.")
_KEY_CHARS = _VALUE_CHARS | frozenset("/")
_SPACE = frozenset(" \t\n\r\f\v")
_QUOTED = 60  # characters of a bad requirement quoted in an error


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
    """Split on commas outside parentheses (slices, not characters appended one by one)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _named(word: str, allowed: frozenset[str]) -> bool:
    """``word`` starts and ends with a letter or digit and has only ``allowed`` characters between."""
    return bool(word) and word[0] in _ALNUM and word[-1] in _ALNUM and all(ch in allowed for ch in word)


def _is_key(word: str) -> bool:
    return _named(word, _KEY_CHARS)


def _is_value(word: str) -> bool:
    return not word or _named(word, _VALUE_CHARS)


def _quote(part: str) -> str:
    part = part.strip()
    return repr(part if len(part) <= _QUOTED else part[:_QUOTED] + "...")


def _bad(part: str) -> SelectorError:
    return SelectorError(f"{_quote(part)} is not a label requirement (key, !key, key=value, key!=value, "
                         "key in (a,b), key notin (a,b))")


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _word(text: str, i: int, chars: frozenset[str]) -> int:
    """The end of the run of ``chars`` starting at ``i``."""
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def _requirement(part: str) -> Requirement:
    """One requirement, scanned left to right once."""
    i = _skip_space(part, 0)
    if i < len(part) and part[i] == "!":  # !key
        start = _skip_space(part, i + 1)
        end = _word(part, start, _KEY_CHARS)
        if _skip_space(part, end) != len(part) or not _is_key(part[start:end]):
            raise _bad(part)
        return Requirement(part[start:end], "!exists")
    end = _word(part, i, _KEY_CHARS)
    key = part[i:end]
    if not _is_key(key):
        raise _bad(part)
    after = _skip_space(part, end)
    if after == len(part):  # key
        return Requirement(key, "exists")
    for op in ("==", "!=", "="):  # key=value, key==value, key!=value
        if part.startswith(op, after):
            value = part[after + len(op):].strip()
            if not _is_value(value):
                raise _bad(part)
            return Requirement(key, "notin" if op == "!=" else "in", frozenset({value}))
    word_end = _word(part, after, _ALNUM)
    op = part[after:word_end]
    if after == end or op not in ("in", "notin"):  # key in (a,b), key notin (a,b)
        raise _bad(part)
    open_at = _skip_space(part, word_end)
    close_at = part.find(")", open_at)
    if open_at == word_end or open_at >= len(part) or part[open_at] != "(" or close_at < 0 \
            or _skip_space(part, close_at + 1) != len(part):
        raise _bad(part)
    values = frozenset(v.strip() for v in part[open_at + 1:close_at].split(",") if v.strip())
    if not values:
        raise SelectorError(f"{_quote(part)}: a set needs at least one value")
    return Requirement(key, op, values)


def parse(text: str) -> tuple[Requirement, ...]:
    """The requirements of a selector; an empty selector matches every worker.

    Raises SelectorError for a selector longer than :data:`MAX_SELECTOR_LENGTH` (before reading
    it) or one that does not parse."""
    if len(text) > MAX_SELECTOR_LENGTH:
        raise SelectorError(f"the selector is {len(text)} characters long; at most {MAX_SELECTOR_LENGTH} "
                            "are read")
    if not text.strip():
        return ()
    return tuple(_requirement(part) for part in _split(text))


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)
