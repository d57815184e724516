"""bench.kubetime: object timestamps and managedFields time extraction."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.kubetime import condition_true, creation_time, managed_fields_time, parse_time, terminal_condition

T0 = datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC).timestamp()


def test_parse_time_formats() -> None:
    assert parse_time("2026-05-01T10:00:00Z") == T0
    assert parse_time("2026-05-01T12:00:00+02:00") == T0
    assert parse_time("2026-05-01T10:00:00.250000Z") == pytest.approx(T0 + 0.25)
    assert parse_time("2026-05-01T10:00:00.123456789Z") == pytest.approx(T0 + 0.123456789)
    assert parse_time("2026-05-01T10:00:00.5+00:00") == pytest.approx(T0 + 0.5)
    assert parse_time(None) is None and parse_time("") is None and parse_time("yesterday") is None


WORKER_JOB = {
    "metadata": {
        "name": "job-1",
        "creationTimestamp": "2026-05-01T10:00:00Z",
        "managedFields": [
            {"manager": "jobmirror", "operation": "Update", "apiVersion": "batch/v1",
             "time": "2026-05-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {}},
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "batch/v1",
             "time": "2026-05-01T10:00:03Z", "fieldsType": "FieldsV1", "fieldsV1": {}, "subresource": "status"},
            {"manager": "other", "operation": "Update", "time": "2026-05-01T10:00:02Z", "subresource": "status"},
        ],
    },
    "status": {"conditions": [
        {"type": "SuccessCriteriaMet", "status": "True"},
        {"type": "Complete", "status": "True"},
    ]},
}


def test_managed_fields_time_selects_status_entries() -> None:
    assert managed_fields_time(WORKER_JOB) == T0 + 3  # latest status write, any manager
    assert managed_fields_time(WORKER_JOB, manager="other") == T0 + 2
    assert managed_fields_time(WORKER_JOB, manager="jobmirror") is None  # its entry is not a status write
    assert managed_fields_time(WORKER_JOB, subresource="", manager="jobmirror") == T0  # main-resource entry
    assert managed_fields_time(WORKER_JOB, subresource=None) == T0 + 3  # any entry
    assert managed_fields_time(WORKER_JOB, operation="Apply") is None
    assert managed_fields_time({"metadata": {}}) is None
    assert managed_fields_time({"metadata": {"managedFields": [{"subresource": "status"}]}}) is None  # no time


def test_creation_and_conditions() -> None:
    assert creation_time(WORKER_JOB) == T0
    assert condition_true(WORKER_JOB, "Complete")
    assert not condition_true(WORKER_JOB, "Failed")
    assert terminal_condition(WORKER_JOB) == "Complete"
    assert terminal_condition({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == "Failed"
    assert terminal_condition({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}) is None
    assert terminal_condition({}) is None
