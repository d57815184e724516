"""Which copy status changes jump the mirror's queue: the deciding one only."""

from __future__ import annotations

import pytest

from mirror.jobs.kind import JOB_KIND
from mirror.status_lag import newly_decided


def job(*conds: tuple[str, str], active: int = 0) -> dict[str, object]:
    return {"status": {"active": active, "conditions": [{"type": t, "status": s} for t, s in conds]}}


@pytest.mark.parametrize(("old", "new", "expected"), [
    (None, job(active=1), False),                                     # first sight, running
    (job(active=1), job(active=0), False),                            # counters only
    (job(active=1), job(("Complete", "True")), True),                 # finished
    (job(("SuccessCriteriaMet", "True")), job(("SuccessCriteriaMet", "True"), ("Complete", "True")), True),
    (job(active=1), job(("FailureTarget", "True")), True),            # decided before the pods are gone
    (job(("Complete", "True")), job(("Complete", "True")), False),    # already finished: no jump again
    (job(active=1), job(("Suspended", "True")), False),               # not an outcome
    (job(active=1), job(("Failed", "False")), False),
    (None, job(("Failed", "True")), True),                            # first seen already finished
])
def test_newly_decided(old: dict[str, object] | None, new: dict[str, object], expected: bool) -> None:
    assert newly_decided(JOB_KIND, old, new) is expected
