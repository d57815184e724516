"""Runtime metrics shared by both controllers (client, informer, work queue, retries)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

API_REQUESTS = Counter(
    "jobmirror_runtime_api_requests_total", "API requests sent, by cluster, verb and HTTP code",
    ["cluster", "verb", "code"],
)
RATE_LIMIT_WAIT = Histogram(
    "jobmirror_runtime_rate_limiter_wait_seconds", "How long a request waited for its client's QPS/burst token "
    "before it was sent, by cluster and client purpose (kept apart from a worker's slowness: issue 38)",
    ["cluster", "purpose"], buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
WATCH_RESTARTS = Counter(
    "jobmirror_runtime_watch_restarts_total", "Informer watch restarts, by cluster, resource and reason",
    ["cluster", "resource", "reason"],
)
RELISTS = Counter("jobmirror_runtime_relists_total", "Informer full relists", ["cluster", "resource"])
QUEUE_DEPTH = Gauge("jobmirror_runtime_queue_depth", "Keys waiting in a work queue", ["queue"])
QUEUE_RETRIES = Counter("jobmirror_runtime_queue_retries_total", "Keys re-queued with backoff", ["queue"])
QUEUE_PASSES = Counter("jobmirror_runtime_queue_passes_total", "Keys handed to the queue's handler, by what queued "
                       "each first since its last pass (an event's source and type, a timer a pass left: after, "
                       "a retry with backoff)", ["queue", "why"])
QUEUE_WAIT = Histogram(
    "jobmirror_runtime_queue_wait_seconds", "From a key being queued (its first reason since its last pass) to its "
    "pass starting, by queue and whether it was urgent (an urgent key's from when it was made urgent; client-go's "
    "workqueue queue_duration)", ["queue", "urgent"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
EVENTS_DROPPED = Counter(
    "jobmirror_runtime_events_dropped_total", "Events dropped because the event queue was full", ["cluster"],
)
CREDENTIAL_RENEWALS = Counter(
    "jobmirror_runtime_credential_renewals_total", "Exec-plugin tokens renewed after the API server refused one (401)",
    ["cluster", "result"],
)


#: Loop lag buckets: a healthy loop wakes within a millisecond or two; 100 ms is a tenant's object
#: costing too much (issue 32), seconds is the loop starved (the Lease and /healthz share it).
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def event_loop_lag(prefix: str) -> Histogram:
    """The event-loop lag histogram of one controller, named with its metrics' prefix (each process
    registers only its own; the measurement is kruntime.lifecycle.watch_loop_lag)."""
    return Histogram(f"{prefix}_event_loop_lag_seconds", "How late the event loop ran a timer that was due: a "
                     "sleep of a fixed interval, the time past it when it woke (kruntime/lifecycle.py); every "
                     "watch event, reconcile, Lease renewal and probe waits that long", buckets=LOOP_LAG_BUCKETS)
