"""The second level as a table: after a setback on the placed worker, the plan decides the move.

Each row is a group after the act of a step learned its setback (a refusal, dropped fields, a
collision, a lost worker, a stuck copy of which nothing ran), and possibly after MOVE asked the
chooser; the row says what the pass does next: MOVE(exclude, why), DELETE_LEFT, RECORD_MOVE,
STAY or FINISH_DECIDED. No act decides any of it (test_chooser_guard.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kruntime.client import ApiError
from kruntime.resources import Obj
from mirror.decisions import WorkerState
from mirror.jobs.kind import JOB_KIND
from mirror.naming import (
    ANNOTATION_CLAIMED_BY,
    ANNOTATION_CLUSTER,
    ANNOTATION_REMOTE_NAME,
    FINALIZER,
    LABEL_ORIGIN,
)
from mirror.placement import NoWorker
from mirror.placer import Choice
from mirror.plan import Action, Do, Found, Group, IfAbsent, Setback, Why, next_action
from testkit.widget import WidgetKind, make_widget
from tests.unit.test_mirror_plan import (
    FOREIGN,
    NOW,
    ORIGIN,
    PINNED,
    REFUSED,
    RUNNING_COPY,
    J,
    copy_of,
    group,
    manager,
    mirrored,
)

TO_W2 = Choice("w2", "least loaded")
NONE_LEFT = NoWorker("no other worker")
DOWN_LONG = {"w1": WorkerState(healthy=False, unhealthy_for=901.0), "w2": WorkerState(healthy=True)}
DOWN_UNSENT = {"w1": WorkerState(healthy=False, never_sent=True), "w2": WorkerState(healthy=True)}
DECIDED = manager(status={"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}], "succeeded": 1})


def setback(why: Why, worker: str = "w1") -> Setback:
    return Setback(why, worker, "what happened")


def stuck(g: Group) -> Group:
    return replace(g, stuck="unschedulable")


RUNNING = mirrored(J, RUNNING_COPY)
REFUSED_G = group(J, found=Found(refused=REFUSED))
DROPPED_G = group(J, {"w1": RUNNING_COPY}, found=Found(dropped=("spec.successPolicy",)))
COLLIDED_G = group(J, {"w1": FOREIGN})
STUCK_G = stuck(group(RUNNING, {"w1": RUNNING_COPY}))

CASES: list[tuple[str, Group, Action]] = [
    # refused create: an unpinned Job moves; pinned, or no other worker: it stays and backs off
    ("refused-move", replace(REFUSED_G, setback=setback(Why.REFUSED)),
     Action(Do.MOVE, worker="w1", exclude=("w1",), why=Why.REFUSED)),
    ("refused-chosen", replace(REFUSED_G, setback=setback(Why.REFUSED), chosen=TO_W2),
     Action(Do.RECORD_MOVE, worker="w1", why=Why.REFUSED)),
    ("refused-no-alternative", replace(REFUSED_G, setback=setback(Why.REFUSED), no_alternative=NONE_LEFT),
     Action(Do.STAY, worker="w1")),
    ("refused-pinned", group(PINNED, found=Found(refused=REFUSED), setback=setback(Why.REFUSED)),
     Action(Do.STAY, worker="w1")),
    # a setback of another step, or of another worker, is not this step's: its act runs first
    ("refused-other-setback", replace(REFUSED_G, setback=setback(Why.COLLISION)),
     Action(Do.CREATE_REFUSED, worker="w1")),
    ("refused-other-worker", replace(REFUSED_G, setback=setback(Why.REFUSED, "w2")),
     Action(Do.CREATE_REFUSED, worker="w1")),
    # dropped fields: as a refusal
    ("dropped-move", replace(DROPPED_G, setback=setback(Why.DROPPED_FIELDS)),
     Action(Do.MOVE, worker="w1", exclude=("w1",), why=Why.DROPPED_FIELDS)),
    ("dropped-chosen", replace(DROPPED_G, setback=setback(Why.DROPPED_FIELDS), chosen=TO_W2),
     Action(Do.RECORD_MOVE, worker="w1", why=Why.DROPPED_FIELDS)),
    # collision: an unpinned Job moves; a pinned one, or our copy under another origin, stays
    ("collision-move", replace(COLLIDED_G, setback=setback(Why.COLLISION)),
     Action(Do.MOVE, worker="w1", exclude=("w1",), why=Why.COLLISION)),
    ("collision-no-alternative", replace(COLLIDED_G, setback=setback(Why.COLLISION), no_alternative=NONE_LEFT),
     Action(Do.STAY, worker="w1")),
    ("collision-pinned", group(PINNED, {"w1": FOREIGN}, setback=setback(Why.COLLISION)),
     Action(Do.STAY, worker="w1")),
    # lost worker: the act said it (or, down before the copy was sent, only noted it); then the move
    ("lost-move", group(J, workers=DOWN_LONG, setback=setback(Why.LOST)),
     Action(Do.MOVE, worker="w1", exclude=("w1",), why=Why.LOST)),
    ("lost-chosen", group(J, workers=DOWN_LONG, setback=setback(Why.LOST), chosen=TO_W2),
     Action(Do.RECORD_MOVE, worker="w1", why=Why.LOST)),
    ("lost-no-alternative", group(J, workers=DOWN_LONG, setback=setback(Why.LOST), no_alternative=NONE_LEFT),
     Action(Do.STAY, worker="w1")),
    ("lost-decided", group(DECIDED, workers=DOWN_LONG, setback=setback(Why.LOST)), Action(Do.FINISH_DECIDED)),
    ("unsent-move", group(J, workers=DOWN_UNSENT, setback=setback(Why.UNREACHABLE)),
     Action(Do.MOVE, worker="w1", exclude=("w1",), why=Why.UNREACHABLE)),
    # stuck: nothing of it ran (the act read it); another worker chosen first, then the copy deleted
    ("stuck-move", replace(STUCK_G, setback=setback(Why.STUCK)),
     Action(Do.MOVE, worker="w1", exclude=("w1",), why=Why.STUCK)),
    ("stuck-chosen", replace(STUCK_G, setback=setback(Why.STUCK), chosen=TO_W2), Action(Do.DELETE_LEFT, worker="w1")),
    ("stuck-deleted", replace(STUCK_G, setback=setback(Why.STUCK), chosen=TO_W2, left_deleted=True),
     Action(Do.RECORD_MOVE, worker="w1", why=Why.STUCK)),
    ("stuck-no-alternative", replace(STUCK_G, setback=setback(Why.STUCK), no_alternative=NONE_LEFT),
     Action(Do.STAY, worker="w1")),
]


def test_the_decided_row_is_decided() -> None:
    assert JOB_KIND.decided_status(DECIDED, NOW) is not None


@pytest.mark.parametrize(("situation", "g", "want"), CASES, ids=[c[0] for c in CASES])
def test_after_a_setback(situation: str, g: Group, want: Action) -> None:
    assert replace(next_action(JOB_KIND, g), status=None) == want


def test_our_copy_under_another_origin_is_never_moved() -> None:
    """the colliding object carries this Job's uid under another origin: running it elsewhere would
    run it twice, so the Job stays (and is reported) even though it is not pinned"""
    other_origin = copy_of(J)
    other_origin["metadata"]["labels"][LABEL_ORIGIN] = "another-jobmirror"
    g = group(J, {"w1": other_origin})
    assert next_action(JOB_KIND, g) == Action(Do.COLLISION, worker="w1")
    assert next_action(JOB_KIND, replace(g, setback=setback(Why.COLLISION))) == Action(Do.STAY, worker="w1")


SPEC_CHANGED = group(mirrored(J, copy_of(J, parallelism=3)), {"w1": copy_of(J, parallelism=3)})
PARALLELISM = {"spec": {"parallelism": 1}}
PATCH_REFUSED = ApiError(422, "Invalid", "field is immutable")


@pytest.mark.parametrize(
    ("g", "want"),
    [
        (SPEC_CHANGED, Action(Do.PATCH_COPY, worker="w1", patch=PARALLELISM)),
        (replace(SPEC_CHANGED, patch_wait=5.0), Action(Do.REQUEUE, after=5.0)),  # a refused patch backs off
        (replace(SPEC_CHANGED, patch_wait=0.2), Action(Do.REQUEUE, after=0.5)),
        (replace(SPEC_CHANGED, patch_refused=PATCH_REFUSED), Action(Do.PATCH_BACKOFF, worker="w1", patch=PARALLELISM)),
    ],
    ids=["patch", "backing-off", "backing-off-at-least-half-a-second", "refused"],
)
def test_a_spec_patch_and_its_refusal(g: Group, want: Action) -> None:
    assert next_action(JOB_KIND, g) == want


class RecreatingWidget(WidgetKind):
    """A Widget whose size change applies only to a paused copy (as a Job's template rewrite does)."""

    def recreate_when_refused(self, patch: Obj) -> bool:
        return True


@pytest.mark.parametrize(("paused", "want"), [(True, Do.RECREATE_COPY), (False, Do.PATCH_BACKOFF)],
                         ids=["suspended-copy-recreated", "running-copy-backs-off"])
def test_a_refused_patch_of_a_suspended_copy_recreates_it(paused: bool, want: Do) -> None:
    kind = RecreatingWidget()
    manager = make_widget("w", owner="c", size=3)
    manager["metadata"].update(uid="w-uid", resourceVersion="5", finalizers=[FINALIZER],
                               annotations={ANNOTATION_CLAIMED_BY: ORIGIN, ANNOTATION_CLUSTER: "w1",
                                            ANNOTATION_REMOTE_NAME: "w"})
    copy = kind.build_copy(manager, origin=ORIGIN, origin_cluster="mgr", remote_name="w")
    copy["spec"].update(size=1, paused=paused)
    g = group(mirrored_with(kind, manager, copy), {"w1": copy}, patch_refused=PATCH_REFUSED)
    assert next_action(kind, g) == Action(want, worker="w1", patch={"spec": {"size": 3}})


def mirrored_with(kind: WidgetKind, manager: Obj, copy: Obj) -> Obj:
    return {**manager, "status": kind.desired_status(manager, copy, NOW)}


@pytest.mark.parametrize(
    ("job", "want"),
    [(J, IfAbsent.CREATE), (DECIDED, IfAbsent.FINISH), (manager(suspend=True), IfAbsent.HOLD)],
    ids=["create", "decided-copy-vanished", "suspended-held"],
)
def test_find_or_create_is_told_what_no_copy_means(job: Obj, want: IfAbsent) -> None:
    """the plan, not the act, decides whether a missing copy is made, finished from (decided) or held"""
    assert next_action(JOB_KIND, group(job)) == Action(Do.FIND_OR_CREATE, worker="w1", if_absent=want)
