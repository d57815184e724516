"""Table tests of the room-aware choice and of worker-selector parsing."""

from __future__ import annotations

import pytest

from mirror.room.choose import Candidate, Outcome, choose
from mirror.room.fit import WorkerFit
from mirror.room.selector import SelectorError, matches, parse

ROOMY = WorkerFit(True, 4, "4 of 4 pods fit now (8 cpu free)")
SOME = WorkerFit(True, 1, "1 of 4 pods fit now (1 cpu free)")
FULL = WorkerFit(True, 0, "no room now: largest free node has 0 cpu < 1 cpu requested")
NEVER = WorkerFit(False, 0, "no node has example.com/gpu")


def cand(name: str, fit: WorkerFit, *, unfinished: int = 0, healthy: bool = True,
         labels: dict[str, str] | None = None) -> Candidate:
    return Candidate(name, healthy, labels or {}, fit, unfinished)


@pytest.mark.parametrize(("workers", "kw", "outcome", "worker", "why"), [
    ([cand("w1", SOME), cand("w2", ROOMY, unfinished=9)], {}, Outcome.PLACE, "w2", "w2: 4 of 4 pods fit now"),
    ([cand("w1", ROOMY, unfinished=3), cand("w2", ROOMY, unfinished=1)], {}, Outcome.PLACE, "w2", ""),
    ([cand("w1", NEVER), cand("w2", FULL)], {}, Outcome.WAITING_FOR_ROOM, None,
     "w1: no node has example.com/gpu; w2: no room now"),
    ([cand("w1", NEVER), cand("w2", NEVER)], {}, Outcome.NO_WORKER_FITS, None, "w1: no node has"),
    ([cand("w1", NEVER), cand("w2", ROOMY, healthy=False)], {}, Outcome.NO_WORKER_FITS, None,
     "w1: no node has example.com/gpu"),
    ([cand("w1", SOME), cand("w2", ROOMY)], {"pinned": "w1"}, Outcome.PLACE, "w1", ""),
    ([cand("w1", NEVER), cand("w2", ROOMY)], {"pinned": "w1"}, Outcome.NO_WORKER_FITS, None, "w1: no node has"),
    ([cand("w1", ROOMY)], {"pinned": "w9"}, Outcome.NO_CANDIDATE, None, "'w9' is not configured"),
    ([cand("w1", ROOMY, healthy=False)], {"pinned": "w1"}, Outcome.NO_CANDIDATE, None, "'w1' is healthy"[-7:]),
    ([cand("w1", ROOMY, labels={"gpu": "a100"}), cand("w2", ROOMY, labels={})], {"selector": parse("gpu")},
     Outcome.PLACE, "w1", ""),
    ([cand("w1", ROOMY, labels={"env": "dev"})], {"selector": parse("env=prod")}, Outcome.NO_CANDIDATE, None,
     "matches the worker selector"),
    ([cand("w1", ROOMY, healthy=False), cand("w2", ROOMY, healthy=False)], {}, Outcome.NO_CANDIDATE, None,
     "no candidate worker is healthy"),
])
def test_choose(workers: list[Candidate], kw: dict[str, object], outcome: Outcome, worker: str | None,
                why: str) -> None:
    got = choose(workers, **kw)  # type: ignore[arg-type]
    assert (got.outcome, got.worker) == (outcome, worker)
    assert why in got.why


@pytest.mark.parametrize(("selector", "labels", "want"), [
    ("", {}, True),
    ("env=prod", {"env": "prod"}, True),
    ("env==prod", {"env": "dev"}, False),
    ("env!=prod", {}, True),
    ("env!=prod", {"env": "prod"}, False),
    ("region in (eu, us),gpu", {"region": "us", "gpu": "x"}, True),
    ("region in (eu, us),gpu", {"region": "us"}, False),
    ("region notin (eu)", {"region": "eu"}, False),
    ("!spot", {"spot": "true"}, False),
    ("!spot, example.com/tier = batch", {"example.com/tier": "batch"}, True),
])
def test_selector(selector: str, labels: dict[str, str], want: bool) -> None:
    assert matches(parse(selector), labels) is want


@pytest.mark.parametrize("bad", ["env=", "=prod", "a in ()", "a in b", "a b", "a,,b", "a=b=c"])
def test_bad_selector_names_the_requirement(bad: str) -> None:
    if bad == "env=":  # an empty value is legal in kubectl's syntax
        assert matches(parse(bad), {"env": ""})
        return
    with pytest.raises(SelectorError, match="'"):
        parse(bad)
