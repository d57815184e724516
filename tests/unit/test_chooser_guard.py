"""Only the PLACE and MOVE acts ask the chooser: the plan decides every move (issue 34 item 1).

The fleet tables of test_reconciler_passes.py run again here with a chooser that fails unless
the act asking it is PLACE or MOVE: a refusal, a collision, a lost worker or a stuck copy that
chose a worker inside its own act (as the reconciler did before the plan decided moves) fails
here. The tables assert what they always did; this module only adds the guard.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import pytest

from kruntime.resources import JOBS, Obj
from mirror import acts, moves
from mirror.kinds import MirroredKind
from mirror.naming import ANNOTATION_PIN
from mirror.placer import Choice, Placer
from mirror.placing import choose
from mirror.plan import Action, Do, Group
from mirror.reconciler import Reconciler
from testkit.fakefleet import fake_fleet, job
from tests.unit.test_reconciler_passes import (  # noqa: F401 - collected again, under the guard
    placed_on,
    refuse,
    test_a_copy_whose_pods_never_scheduled_is_moved,
    test_a_foreign_object_of_the_copys_name_is_never_touched,
    test_a_new_job_is_placed_and_copied_in_one_pass_with_one_manager_write,
    test_a_refused_create,
    test_a_worker_lost_between_placement_and_create_is_left_at_once,
    test_least_loaded_spreads_a_burst_across_workers,
    test_without_room_views_a_stuck_copy_only_gets_the_event,
)

#: the acts allowed to ask the chooser
CHOOSERS = {Do.PLACE, Do.MOVE}


class ChooserAskedFromAnAct(AssertionError):
    pass


@pytest.fixture(autouse=True)
def chooser_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Do]]:
    """Every act is recorded while it runs; the chooser fails when asked from any act but PLACE/MOVE."""
    acting: list[Do] = []
    asked: list[Do] = []
    real_act, real_choose = Reconciler._act, Placer.choose

    async def act(self: Reconciler, action: Action, g: Group) -> Any:
        acting.append(action.do)
        try:
            return await real_act(self, action, g)
        finally:
            acting.pop()

    def choose(self: Placer, kind: MirroredKind, job: Obj, exclude: Collection[str]) -> Choice:
        doing = acting[-1] if acting else None
        if doing not in CHOOSERS:
            raise ChooserAskedFromAnAct(f"the chooser was asked from the {doing} act")
        asked.append(doing)
        return real_choose(self, kind, job, exclude)

    monkeypatch.setattr(Reconciler, "_act", act)
    monkeypatch.setattr(Placer, "choose", choose)
    yield asked


async def test_the_guard_fails_an_act_that_asks_the_chooser(monkeypatch: pytest.MonkeyPatch,
                                                            chooser_guard: list[Do]) -> None:
    """A collision act that chooses for itself (the old shape) is caught."""
    async def collision_that_chooses(a: Any, action: Action, g: Group) -> Any:
        choose(a, g.job, ())
        return await moves.collision(a, action, g)

    monkeypatch.setitem(acts.ACTS, Do.COLLISION, collision_that_chooses)
    async with fake_fleet() as f:
        f.workers["worker-1"].seed(JOBS.path("default"), job("a", managed_by="someone-else"))
        await f.create(job("a", annotations={ANNOTATION_PIN: "worker-1"}))
        with pytest.raises(ChooserAskedFromAnAct, match="collision"):
            await f.sync("a")  # placed by PLACE (allowed), then the collision act asks
            await f.sync("a")


async def test_a_refused_create_moves_through_the_move_act(chooser_guard: list[Do]) -> None:
    async with fake_fleet() as f:
        f.workers["worker-1"].react(refuse("POST"))
        await f.create(job("a"))
        await f.sync("a")
        assert placed_on(f) == "worker-2"
    assert chooser_guard == [Do.PLACE, Do.MOVE]


async def test_a_job_every_worker_refuses_settles_in_one_pass(chooser_guard: list[Do]) -> None:
    """each refusal is a setback, a MOVE and a RECORD_MOVE; the last MOVE finds no worker: STAY backs off"""
    async with fake_fleet(("worker-1", "worker-2", "worker-3")) as f:
        for w in f.workers.values():
            w.react(refuse("POST"))
        await f.create(job("a"))
        after = await f.sync("a")
        assert after is not None and after > 0  # retried with backoff, not cut short as unsettled
        assert chooser_guard == [Do.PLACE, Do.MOVE, Do.MOVE, Do.MOVE]
        assert f.reasons("a") == ["WorkerRefused"] * 3
        assert all(f.copy(w, "a") is None for w in f.workers)
