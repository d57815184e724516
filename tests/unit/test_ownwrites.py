"""kruntime.ownwrites: when a controller trusts its own last write over the informer cache."""

from __future__ import annotations

import pytest

from kruntime.ownwrites import OwnWrites
from kruntime.resources import Obj


def job(rv: str, uid: str = "u1") -> Obj:
    return {"metadata": {"namespace": "n", "name": "j", "uid": uid, "resourceVersion": rv}}


@pytest.mark.parametrize(("name", "cached", "ahead", "kept"), [
    ("cache older than our write", job("9"), True, True),
    ("cache at our write", job("10"), False, False),
    ("cache past our write", job("12"), False, False),
    ("object gone from the cache", None, False, False),
    ("replaced by a Job with another uid", job("5", uid="u2"), False, False),
    ("opaque resourceVersion", job("abc"), False, False),
])
def test_ahead_of(name: str, cached: Obj | None, ahead: bool, kept: bool) -> None:
    now = [100.0]
    own = OwnWrites(clock=lambda: now[0])
    written = own.record(job("10"))
    now[0] = 102.5
    got = own.ahead_of("n/j", cached)
    assert (got is not None) is ahead, name
    if got is not None:
        assert got.obj is written and got.age == 2.5
    # Forgotten once the cache caught up (or the object changed identity); kept while behind.
    assert (own.ahead_of("n/j", job("9")) is not None) is kept, name


def test_forget_and_unknown_keys() -> None:
    own = OwnWrites()
    assert own.ahead_of("n/j", job("1")) is None
    own.record(job("10"))
    own.forget("n/j")
    assert own.ahead_of("n/j", job("9")) is None


@pytest.mark.parametrize(("name", "event", "echo"), [
    ("the object our write returned", job("10"), True),
    ("a later change by someone else", job("11"), False),
    ("an earlier event still in flight", job("9"), False),
    ("another Job of that name", job("10", uid="u2"), False),
])
def test_is_echo(name: str, event: Obj, echo: bool) -> None:
    own = OwnWrites()
    own.record(job("10"))
    assert own.is_echo(event) is echo, name
    # An echo is forgotten (the cache holds it now): asked again, it is not ours any more.
    assert own.is_echo(job("10")) is not echo, name


def test_nothing_written_is_no_echo() -> None:
    assert OwnWrites().is_echo(job("1")) is False


@pytest.mark.parametrize(("name", "event", "behind"), [
    ("an earlier version (the pass that wrote read it)", job("9"), True),
    ("the object our write returned (its echo: is_echo)", job("10"), False),
    ("a later change by someone else", job("11"), False),
    ("another Job of that name", job("9", uid="u2"), False),
    ("opaque resourceVersion", job("abc"), False),
])
def test_is_behind(name: str, event: Obj, behind: bool) -> None:
    own = OwnWrites()
    own.record(job("10"))
    assert own.is_behind(event) is behind, name
    assert own.is_echo(job("10")), name  # the record is kept for the echo still to come


def test_nothing_written_is_not_behind() -> None:
    assert OwnWrites().is_behind(job("1")) is False
