"""Which release's Job controller to behave like, chosen from the API server's version.

kube-controller-manager's Job controller changes between releases (mostly through feature
gates whose defaults flip). A cluster without it still expects the behaviour of *its*
release, so the controller asks the API server for ``/version`` once at start and follows
that release's defaults. Every switch below names the upstream release and gate it comes
from; a behaviour change that needs no switch (because it is equivalent, a pure fix we
apply everywhere, or out of scope) is listed in ``DEVIATIONS.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: (major, minor, patch) of a Kubernetes release.
KubeVersion = tuple[int, int, int]

#: The oldest release whose semantics we implement; older API servers get these.
OLDEST_SUPPORTED: KubeVersion = (1, 33, 0)
#: The newest release we have compared against (the differential suite's default oracle);
#: newer or unknown API servers get these semantics.
NEWEST_KNOWN: KubeVersion = (1, 37, 2)

_GIT_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
_NUMBER = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class Semantics:
    """Behaviour switches for one release (``version``: the release they were derived from)."""

    version: KubeVersion
    #: 1.36+: MutableSchedulingDirectivesForSuspendedJobs (alpha/off in 1.35, beta/on in 1.36,
    #: pkg/controller/job/job_controller.go syncJob): adding ``Suspended=True`` also clears
    #: ``status.startTime``, so a suspended Job counts as never started and its scheduling
    #: directives may be edited again. Resuming sets a new ``startTime`` on every release.
    clear_start_time_on_suspend: bool

    @property
    def release(self) -> str:
        return _minor(self.version)


def semantics_for(version: KubeVersion) -> Semantics:
    """The switches of ``version``'s Job controller (with that release's default gates)."""
    return Semantics(version=version, clear_start_time_on_suspend=version[:2] >= (1, 36))


@dataclass(frozen=True)
class Selection:
    """The semantics chosen for an API server, and what to tell the operator about it."""

    semantics: Semantics
    #: why the semantics are not the reported release's own (None when they are)
    note: str | None = None
    #: the note is a warning (an unsupported, older release), not just information
    warning: bool = False


def parse_version(info: Mapping[str, object]) -> KubeVersion | None:
    """(major, minor, patch) from a ``/version`` answer; None when it cannot be read.

    ``gitVersion`` (``v1.37.2``, ``v1.36.4-gke.100``, ``v1.33.7+k3s1``) is preferred; failing
    that, ``major``/``minor`` (providers append ``+`` to ``minor``) with patch 0. A binary
    built without version stamping says ``v0.0.0``: unknown, not ancient.
    """
    git = info.get("gitVersion")
    if isinstance(git, str) and (m := _GIT_VERSION.match(git.strip())) and m.group(1) != "0":
        return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    major, minor = info.get("major"), info.get("minor")
    if isinstance(major, str) and isinstance(minor, str):
        ma, mi = _NUMBER.match(major.strip()), _NUMBER.match(minor.strip())
        if ma and mi:
            return int(ma.group(1)), int(mi.group(1)), 0
    return None


def select(version: KubeVersion | None) -> Selection:
    """Semantics for an API server of ``version`` (None: unknown).

    Unknown → the newest known release's (the likeliest to be right for a new cluster);
    older than we support → the oldest supported release's, with a warning; newer than we
    know → the newest known release's (its gates are the latest we have checked).
    """
    if version is None:
        return Selection(semantics_for(NEWEST_KNOWN),
                         f"API server version unknown: following Kubernetes {_fmt(NEWEST_KNOWN)} semantics")
    if version[:2] < OLDEST_SUPPORTED[:2]:
        return Selection(semantics_for(OLDEST_SUPPORTED),
                         f"API server is Kubernetes {_fmt(version)}, older than the oldest supported "
                         f"{_minor(OLDEST_SUPPORTED)}: following {_minor(OLDEST_SUPPORTED)} semantics",
                         warning=True)
    if version[:2] > NEWEST_KNOWN[:2]:
        return Selection(semantics_for(NEWEST_KNOWN),
                         f"API server is Kubernetes {_fmt(version)}, newer than the newest known "
                         f"{_fmt(NEWEST_KNOWN)}: following {_fmt(NEWEST_KNOWN)} semantics")
    return Selection(semantics_for(version))


def _fmt(v: KubeVersion) -> str:
    return f"{v[0]}.{v[1]}.{v[2]}"


def _minor(v: KubeVersion) -> str:
    return f"{v[0]}.{v[1]}"
