"""A worker client at client-go's default limit (5 QPS, burst 10) is rate-limited, not slow (issue 38
item 1), on real API servers: 60 one-pod Jobs all complete, copied at the rate the worker's tokens
allow for the calls each Job needs, with no worker judged slow, no copy looked up before it was
created, and no more reconcile passes per Job than the same Jobs take on an unlimited worker plus
the parks the limit costs (about one per worker write a Job needs, its create and its cleanup, plus
a worker event bringing a parked Job back before its turn).

Passes per Job are compared with the unlimited worker's, measured in the same test, rather than
held to issue 38's absolute 3: on this bed a one-pod Job takes 7 to 8 passes with no limit at all (the
echoes and status passes issue 38 item 2 removes), which no rate-limiter fix can bring to 3.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clusterbed.cluster import ClusterSpec, LocalCluster
from kruntime import metrics as runtime_metrics
from kruntime.client import ClusterClient
from kruntime.resources import JOBS
from mirror import metrics
from mirror.config import Worker
from mirror.naming import ANNOTATION_PIN
from tests.conftest import WORKER_1, WORKER_2, wait_for
from tests.integration.mirror_env import MirrorEnv, make_job, mirror_env, syncs

pytestmark = pytest.mark.integration

ClientFor = Callable[[ClusterSpec], Awaitable[ClusterClient]]
ClusterFn = Callable[[ClusterSpec], LocalCluster]
log = logging.getLogger(__name__)

N = 60
#: Jobs on the unlimited worker, for the reference figure of passes per Job
REFERENCE = 20
QPS, BURST = 5.0, 10
#: a histogram bound of kube-apiserver's request durations, below our slowCallSeconds (3 s): the
#: call we time also crosses our loop and the network
SERVER_SLOW = 2.0


def value(metric: object, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())  # type: ignore[attr-defined]


async def run_jobs(env: MirrorEnv, worker: str, prefix: str, n: int) -> tuple[float, float]:
    """Create ``n`` one-pod Jobs pinned to ``worker``; wait until every copy exists (the seconds that
    took, from the first create), every Job is Complete and every copy is cleaned up. Returns the
    seconds to copy them all and the reconcile passes run in all."""
    passes0, dispatched0 = syncs(), value(metrics.DISPATCHES, worker)
    started = time.monotonic()
    for i in range(n):
        await env.create(make_job(f"{prefix}-{i}", annotations={ANNOTATION_PIN: worker}))

    async def all_copied() -> bool:
        return value(metrics.DISPATCHES, worker) - dispatched0 >= n

    await wait_for(all_copied, timeout=90, what=f"{n} copies on {worker}", interval=0.05)
    copied_in = time.monotonic() - started
    for i in range(n):
        await env.wait_condition(f"{prefix}-{i}", "Complete", timeout=60)

    async def copies_gone() -> bool:
        items, _ = await env.workers[worker].list_all(JOBS, env.ns)
        return not items

    await wait_for(copies_gone, timeout=60, what=f"every copy on {worker} cleaned up")
    await asyncio.sleep(1.0)  # the passes the last cleanups bring have run
    return copied_in, syncs() - passes0


async def test_a_rate_limited_worker_takes_jobs_at_its_token_rate(
        client_for: ClientFor, cluster: ClusterFn, ns: str) -> None:
    """20 Jobs on an unlimited worker (the reference), then 60 on a worker whose client runs at 5 QPS /
    burst 10: copies made at >= 0.8 x (worker QPS / the worker calls each Job took, counted by the
    client); passes per Job <= the reference's + the parks; parks <= 2.5 per Job; nothing judged slow
    that the worker's API server did not itself take over 2 s for; no GET of a copy answered 404"""
    async with mirror_env(client_for, cluster, ns, workers=(WORKER_1, WORKER_2)) as env:
        limited = Worker(name=WORKER_1.name, kubeconfig=env.clusters[WORKER_1.name].kubeconfig, qps=QPS, burst=BURST)
        free = Worker(name=WORKER_2.name, kubeconfig=env.clusters[WORKER_2.name].kubeconfig)
        # The product's resync and probe intervals: the env's quicker ones would add passes and calls
        # that a deployment does not make.
        ctrl = await env.start(env.config_with(workers=[limited, free], resync_period=30.0,
                                               health_probe_interval=5.0))
        await wait_for(lambda: asyncio.sleep(0, len(ctrl.workers) == 2), timeout=30, what="the controller")
        worker = ctrl.workers[WORKER_1.name]
        await wait_for(lambda: asyncio.sleep(0, all(w.healthy for w in ctrl.workers.values())), timeout=30,
                       what="both workers healthy")
        _, reference_passes = await run_jobs(env, WORKER_2.name, "free", REFERENCE)
        reference = reference_passes / REFERENCE

        client = worker.client
        sent0, wait0 = client.requests_sent, client.token_wait_seconds
        slow0 = value(metrics.WORKER_SLOW_CALLS, WORKER_1.name)
        admin = await client_for(WORKER_1)
        server_slow0 = await requests_served_slower_than(admin, SERVER_SLOW)
        missing0 = value(runtime_metrics.API_REQUESTS, WORKER_1.name, "GET", "404")
        busy0 = busy_by_reason(WORKER_1.name)
        copied_in, passes = await run_jobs(env, WORKER_1.name, "rl", N)
        calls_per_job = (client.requests_sent - sent0) / N
        passes_per_job = passes / N
        rate = N / copied_in
        target = 0.8 * QPS / calls_per_job
        busy = {r: n - busy0.get(r, 0.0) for r, n in busy_by_reason(WORKER_1.name).items()}
        parks_per_job = sum(busy.values()) / N
        log.warning("worker at %g QPS / burst %d: %.2f passes/Job (%.2f on an unlimited worker), %.2f copies/s "
                    "(target %.2f), %.2f worker calls/Job, passes ended busy %s, token wait %.1fs in all",
                    QPS, BURST, passes_per_job, reference, rate, target, calls_per_job, busy,
                    client.token_wait_seconds - wait0)
        # On a machine shared with other CI lanes the API server itself may take seconds (17 calls once):
        # that is a slow worker, rightly judged. A token wait counted as slowness has no such request.
        judged_slow = value(metrics.WORKER_SLOW_CALLS, WORKER_1.name) - slow0
        server_slow = await requests_served_slower_than(admin, SERVER_SLOW) - server_slow0
        log.warning("calls judged slow: %d; requests worker-1's API server took over %gs: %d", judged_slow,
                    SERVER_SLOW, server_slow)
        assert judged_slow <= server_slow, worker.describe()
        assert worker.slow() is None or server_slow > 0
        assert value(runtime_metrics.API_REQUESTS, WORKER_1.name, "GET", "404") == missing0
        assert rate >= target, (rate, target, calls_per_job)
        assert parks_per_job <= 2.5, busy
        assert passes_per_job <= reference + parks_per_job + 0.5, (passes_per_job, reference, busy)


async def requests_served_slower_than(admin: ClusterClient, seconds: float) -> int:
    """Requests (watches aside) the API server behind ``admin`` took longer than ``seconds`` to serve,
    by its own ``apiserver_request_duration_seconds``."""
    resp = await admin._send("GET", "/metrics")
    text = (await resp.read()).decode()
    resp.release()
    total = within = 0.0
    bounds: set[float] = set()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request_duration_seconds":
            continue
        for sample in family.samples:
            if sample.labels.get("verb") in ("WATCH", "CONNECT"):
                continue
            if sample.name.endswith("_count"):
                total += sample.value
            elif sample.name.endswith("_bucket"):
                bounds.add(float(sample.labels["le"]))
                within += sample.value if float(sample.labels["le"]) == seconds else 0.0
    assert seconds in bounds, f"no {seconds}s bucket in apiserver_request_duration_seconds: {sorted(bounds)}"
    return int(total - within)


def busy_by_reason(worker: str) -> dict[str, float]:
    """``jobmirror_worker_busy_total`` of ``worker`` by reason, as this process counts them now."""
    return {s.labels["reason"]: s.value for m in metrics.WORKER_BUSY.collect() for s in m.samples
            if s.name.endswith("_total") and s.labels["worker"] == worker}
