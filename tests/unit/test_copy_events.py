"""Which copy events queue a pass of the manager object (mirror/copy_events.py), as a table."""

from __future__ import annotations

import pytest

from kruntime.resources import Obj
from mirror.copy_events import needs_pass
from mirror.naming import FINALIZER

FRESH: Obj = {"metadata": {"name": "j"}}
RUNNING: Obj = {"metadata": {"name": "j"}, "status": {"active": 1}}
HELD: Obj = {"metadata": {"name": "j", "finalizers": [FINALIZER]}}
RELEASED: Obj = {"metadata": {"name": "j", "finalizers": ["someone.else/f"]}}


@pytest.mark.parametrize(
    ("etype", "copy", "created_here", "manager", "want"),
    [
        ("ADDED", FRESH, True, HELD, False),  # the echo of our own create
        ("ADDED", FRESH, False, HELD, True),  # another replica's, or made before a restart
        ("ADDED", RUNNING, True, HELD, True),  # seen first with a status (a relist): mirror it
        ("MODIFIED", RUNNING, True, HELD, True),
        ("DELETED", RUNNING, True, HELD, True),  # gone while the Job is ours: re-create or finish
        ("DELETED", RUNNING, True, RELEASED, False),  # the echo of the cleanup that let the Job go
        ("DELETED", RUNNING, False, None, False),  # the manager object is gone too
    ],
    ids=["create-echo", "not-ours-to-know", "added-with-status", "modified", "deleted-held", "deleted-released",
         "deleted-manager-gone"],
)
def test_needs_pass(etype: str, copy: Obj, created_here: bool, manager: Obj | None, want: bool) -> None:
    assert needs_pass(etype, copy, created_here=created_here, manager=manager) is want


@pytest.mark.parametrize(("etype", "deleted_here", "want"), [
    ("DELETED", True, False),  # the echo of a finalizing pass's delete, before the cache shows the release
    ("DELETED", False, True),  # deleted by someone else while the Job is ours: re-create or finish
    ("MODIFIED", True, True),  # only a deletion is an echo of a deletion
], ids=["deletion-echo", "deleted-by-another", "modified"])
def test_deletion_echo(etype: str, deleted_here: bool, want: bool) -> None:
    assert needs_pass(etype, RUNNING, created_here=True, manager=HELD, deleted_here=deleted_here) is want
