"""Moved to ``testkit/status_sequences.py`` (``bench versions`` replays them too); this name stays
importable for the tests that use it."""

from testkit.status_sequences import (
    WorkerSequence,
    WorkerStep,
    job_specs,
    manager_job_for,
    step_time,
    translate_sequence,
    worker_sequences,
)

__all__ = ["WorkerSequence", "WorkerStep", "job_specs", "manager_job_for", "step_time", "translate_sequence",
           "worker_sequences"]
