"""The kinds ``kubectl jobmirror`` and the inspect API show, and how a user names one.

A name is given as kubectl takes it: ``NAME`` (a Job, as before JobSets), or ``TYPE/NAME`` where
TYPE is the kind's singular, plural or either with its API group (``jobset/train``,
``jobsets.jobset.x-k8s.io/train``, ``job.batch/hello``).
"""

from __future__ import annotations

from mirror.jobs.kind import JOB_KIND
from mirror.jobsets.kind import JOBSET_KIND
from mirror.kinds import MirroredKind

#: Every kind shown, Jobs first (the order of ``status``'s tables).
INSPECTED: tuple[MirroredKind, ...] = (JOB_KIND, JOBSET_KIND)


class UnknownKind(ValueError):
    """A ``TYPE/NAME`` whose TYPE names no kind the mirror shows."""


def singular(kind: MirroredKind) -> str:
    """``job``, ``jobset``: how messages and flags name the kind."""
    return kind.name.lower()


def type_names(kind: MirroredKind) -> set[str]:
    """What kubectl accepts as TYPE for ``kind``: singular and plural, bare or with the group."""
    names = {singular(kind), kind.resource.plural}
    return names | {f"{n}.{kind.resource.group}" for n in names if kind.resource.group}


def by_plural(plural: str) -> MirroredKind | None:
    """The kind served under ``/v1/namespaces/NS/<plural>/NAME`` of the inspect API."""
    return next((k for k in INSPECTED if k.resource.plural == plural), None)


def by_type(type_name: str) -> MirroredKind:
    """The kind a ``--kind`` value or the TYPE of ``TYPE/NAME`` names (case-insensitive)."""
    wanted = type_name.lower()
    for kind in INSPECTED:
        if wanted in type_names(kind):
            return kind
    known = ", ".join(sorted(n for k in INSPECTED for n in (singular(k), k.resource.plural)))
    raise UnknownKind(f"resource type {type_name!r} is not mirrored by jobmirror (one of: {known})")


def parse_ref(ref: str) -> tuple[MirroredKind, str]:
    """``NAME`` (a Job) or ``TYPE/NAME``; UnknownKind names a bad TYPE or an empty NAME."""
    type_name, slash, name = ref.partition("/")
    if not slash:
        return JOB_KIND, ref
    if not name or "/" in name:
        raise UnknownKind(f"{ref!r}: expected NAME or TYPE/NAME (e.g. jobset/{name or 'train'})")
    return by_type(type_name), name
