"""Job manifests and concurrent submission (shared by both benchmarks)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from kruntime.client import ApiError, ClusterClient
from kruntime.resources import JOBS, Obj
from mirror.jobsets.kind import JOBSETS
from testkit.jobs import KWOK_DURATION, make_job

BENCH_LABEL = "jobmirror.dev/bench-run"


def job_manifest(
    name: str,
    run_id: str,
    *,
    completions: int = 1,
    parallelism: int = 1,
    indexed: bool = False,
    managed_by: str | None = None,
    pod_duration: str = "1s",
    requests: dict[str, str] | None = None,
) -> Obj:
    """A benchmark Job: its pods run ``pod_duration`` on kwok; it and its pods carry the run's label."""
    return make_job(name, labels={BENCH_LABEL: run_id}, managed_by=managed_by, completions=completions,
                    parallelism=parallelism, indexed=indexed, kwok=False, pod_labels={BENCH_LABEL: run_id},
                    pod_annotations={KWOK_DURATION: pod_duration}, requests=requests,
                    pod_spec={"terminationGracePeriodSeconds": 0})


@dataclass
class Submission:
    sent: dict[str, float] = field(default_factory=dict)
    acked: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    retries: int = 0
    started: float = 0.0
    finished: float = 0.0

    def summary(self, concurrency: int) -> dict[str, Any]:
        secs = self.finished - self.started
        return {
            "concurrency": concurrency,
            "accepted": len(self.acked),
            "seconds": round(secs, 3),
            "jobsPerSecond": round(len(self.acked) / secs, 1) if secs > 0 else None,
            "retries": self.retries,
            "errors": self.errors[:20],
        }


async def submit(client: ClusterClient, namespace: str, jobs: list[Obj], concurrency: int,
                 sub: Submission | None = None) -> Submission:
    """Create every Job (and JobSet: an object whose ``kind`` is JobSet) with at most ``concurrency``
    requests in flight; transient errors are retried."""
    sub = sub or Submission()
    sem = asyncio.Semaphore(concurrency)
    sub.started = time.time()

    async def one(job: Obj) -> None:
        name = job["metadata"]["name"]
        async with sem:
            for attempt in range(8):
                sub.sent.setdefault(name, time.time())
                try:
                    await client.create(JOBSETS if job.get("kind") == "JobSet" else JOBS, namespace, job)
                except ApiError as exc:
                    if exc.already_exists:
                        break
                    if exc.transient and attempt < 7:
                        sub.retries += 1
                        await asyncio.sleep(0.05 * 2 ** attempt)
                        continue
                    sub.errors.append(f"{name}: {exc}")
                    return
                break
            sub.acked[name] = time.time()

    await asyncio.gather(*(one(j) for j in jobs))
    sub.finished = time.time()
    return sub
