"""Which release's Job controller semantics the builtin controller follows, per API server version."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builtin_controller import controller, fields, semantics, status
from builtin_controller.semantics import KubeVersion

NOW = datetime(2026, 11, 26, 1, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("info", "want"),
    [
        ({"gitVersion": "v1.37.2", "major": "1", "minor": "37"}, (1, 37, 2)),
        ({"gitVersion": "v1.35.4"}, (1, 35, 4)),
        ({"gitVersion": "v1.36.4-gke.1200"}, (1, 36, 4)),  # provider suffixes
        ({"gitVersion": "v1.33.7+k3s1"}, (1, 33, 7)),
        ({"gitVersion": "1.34.1"}, (1, 34, 1)),  # no leading v
        ({"gitVersion": "v1.38.0-alpha.1"}, (1, 38, 0)),
        ({"gitVersion": "v1.36"}, (1, 36, 0)),  # no patch
        ({"gitVersion": "v0.0.0-master+$Format:%H$", "major": "", "minor": ""}, None),  # not version-stamped
        ({"gitVersion": "garbage", "major": "1", "minor": "35+"}, (1, 35, 0)),  # falls back to major/minor
        ({"major": "1", "minor": "36"}, (1, 36, 0)),
        ({"gitVersion": "garbage"}, None),
        ({"major": "one", "minor": "36"}, None),
        ({}, None),
        ({"gitVersion": 137}, None),
    ],
)
def test_parse_version(info: dict[str, Any], want: KubeVersion | None) -> None:
    assert semantics.parse_version(info) == want


@pytest.mark.parametrize(
    ("version", "want_version", "clears_start_time", "note", "warning"),
    [
        ((1, 37, 2), (1, 37, 2), True, False, False),
        ((1, 37, 0), (1, 37, 0), True, False, False),
        ((1, 36, 4), (1, 36, 4), True, False, False),
        ((1, 36, 0), (1, 36, 0), True, False, False),
        ((1, 35, 4), (1, 35, 4), False, False, False),
        ((1, 34, 1), (1, 34, 1), False, False, False),
        ((1, 33, 7), (1, 33, 7), False, False, False),
        ((1, 33, 0), (1, 33, 0), False, False, False),
        ((1, 32, 9), (1, 33, 0), False, True, True),  # older than supported: 1.33's, with a warning
        ((1, 30, 14), (1, 33, 0), False, True, True),
        ((1, 38, 0), semantics.NEWEST_KNOWN, True, True, False),  # newer than known: the newest known
        ((2, 0, 0), semantics.NEWEST_KNOWN, True, True, False),
        (None, semantics.NEWEST_KNOWN, True, True, False),  # unknown: the newest known
    ],
)
def test_select(version: KubeVersion | None, want_version: KubeVersion, clears_start_time: bool, note: bool,
                warning: bool) -> None:
    chosen = semantics.select(version)
    assert chosen.semantics.version == want_version
    assert chosen.semantics.clear_start_time_on_suspend is clears_start_time
    assert (chosen.note is not None) is note
    assert chosen.warning is warning


def test_newest_known_is_the_bed_default() -> None:
    """The oracle the differential suite runs against by default is the newest release we know."""
    from clusterbed import versions

    parsed = semantics.parse_version({"gitVersion": versions.KUBE_VERSION})
    assert parsed == semantics.NEWEST_KNOWN
    oldest = semantics.parse_version({"gitVersion": versions.OLDEST_SUPPORTED_KUBE_VERSION})
    assert oldest is not None and oldest[:2] == semantics.OLDEST_SUPPORTED[:2]


def running_job() -> dict[str, Any]:
    started = fields.format_time(NOW - timedelta(minutes=5))
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {"suspend": False, "completions": 1, "parallelism": 1, "template": {}},
            "status": {"startTime": started,
                       "conditions": []}}


@pytest.mark.parametrize(
    ("version", "start_time_after_suspend"),
    [
        ((1, 33, 7), "kept"),
        ((1, 34, 1), "kept"),
        ((1, 35, 4), "kept"),
        ((1, 36, 4), "cleared"),
        ((1, 37, 2), "cleared"),
        (None, "cleared"),  # unknown version: newest semantics
    ],
)
def test_suspend_and_resume_start_time(version: KubeVersion | None, start_time_after_suspend: str) -> None:
    sem = semantics.select(version).semantics
    job = running_job()
    started = job["status"]["startTime"]
    job["spec"]["suspend"] = True
    assert status.ensure_suspend_condition(job, NOW, sem) == "Suspended"
    want = started if start_time_after_suspend == "kept" else None
    assert job["status"].get("startTime") == want
    # Already suspended: nothing changes (no second clearing, no event).
    assert status.ensure_suspend_condition(job, NOW + timedelta(seconds=1), sem) is None
    assert job["status"].get("startTime") == want
    # Resumed: a new startTime on every release (the deadline clock restarts).
    job["spec"]["suspend"] = False
    later = NOW + timedelta(seconds=30)
    assert status.ensure_suspend_condition(job, later, sem) == "Resumed"
    assert job["status"]["startTime"] == fields.format_time(later)


@pytest.mark.parametrize("version", [(1, 35, 4), (1, 37, 2)])
def test_created_suspended_has_no_start_time_on_any_release(version: KubeVersion) -> None:
    sem = semantics.semantics_for(version)
    job = running_job()
    del job["status"]["startTime"]
    job["spec"]["suspend"] = True
    assert status.ensure_suspend_condition(job, NOW, sem) == "Suspended"
    assert "startTime" not in job["status"]


class FakeClient:
    """Answers ``GET /version`` from a script: a dict, or an exception to raise."""

    name = "fake"

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert (method, path) == ("GET", "/version")
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else {}
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, dict)
        return answer


@pytest.mark.parametrize(
    ("answers", "want", "log_level"),
    [
        ([{"gitVersion": "v1.35.4"}], (1, 35, 4), None),
        ([{"gitVersion": "v1.37.2"}], (1, 37, 2), None),
        ([OSError("refused"), {"gitVersion": "v1.36.4"}], (1, 36, 4), logging.WARNING),  # retried
        ([{"gitVersion": "v1.30.14"}], (1, 33, 0), logging.WARNING),
        ([{"gitVersion": "nonsense"}], semantics.NEWEST_KNOWN, logging.INFO),
        ([OSError("down")] * 3, semantics.NEWEST_KNOWN, logging.WARNING),  # gave up: unknown
    ],
)
async def test_controller_detects_semantics(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                            answers: list[object], want: KubeVersion, log_level: int | None) -> None:
    monkeypatch.setattr(controller, "VERSION_ATTEMPTS", 3)
    monkeypatch.setattr(controller, "VERSION_RETRY_DELAY", 0.0)
    ctl = controller.JobController(FakeClient(*answers))  # type: ignore[arg-type]
    assert ctl.semantics is None
    with caplog.at_level(logging.INFO, logger="builtin_controller.controller"):
        chosen = await ctl._detect_semantics()
    assert chosen.version == want
    levels = {r.levelno for r in caplog.records if r.name == "builtin_controller.controller"}
    assert (max(levels) if levels else None) == log_level


@pytest.mark.parametrize(
    ("version", "want"),
    [
        (None, ("kcm-jobs", "kcm-no-jobs", "default")),
        ("", ("kcm-jobs", "kcm-no-jobs", "default")),
        ("default", ("kcm-jobs", "kcm-no-jobs", "default")),  # the bed's own release: same clusters
        ("1.35.4", ("kcm-jobs-v1-35-4", "kcm-no-jobs-v1-35-4", "1.35.4")),
        ("1.33.7", ("kcm-jobs-v1-33-7", "kcm-no-jobs-v1-33-7", "1.33.7")),
        ("1.35", ValueError),
        ("v1.35.4", ValueError),
    ],
)
def test_differential_specs(version: str | None, want: tuple[str, str, str] | type[Exception]) -> None:
    """JOBMIRROR_DIFFERENTIAL_KUBE_VERSION moves both differential clusters to one release."""
    from clusterbed import versions
    from tests.conformance.harness import differential_specs
    from tests.conftest import KCM_JOBS, KCM_NO_JOBS

    if version == "default":
        version = versions.KUBE_VERSION
    if isinstance(want, type):
        with pytest.raises(want):
            differential_specs(version, KCM_JOBS, KCM_NO_JOBS)
        return
    upstream, ours = differential_specs(version, KCM_JOBS, KCM_NO_JOBS)
    want_version = versions.KUBE_VERSION if want[2] == "default" else want[2]
    assert (upstream.name, ours.name) == want[:2]
    assert upstream.kube_version == ours.kube_version == want_version
    assert upstream.job_controller and not ours.job_controller  # the shapes are kept
