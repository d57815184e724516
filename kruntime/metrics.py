"""Runtime metrics shared by both controllers (client, informer, work queue, retries)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

API_REQUESTS = Counter(
    "jobmirror_runtime_api_requests_total", "API requests sent, by cluster, verb and HTTP code",
    ["cluster", "verb", "code"],
)
WATCH_RESTARTS = Counter(
    "jobmirror_runtime_watch_restarts_total", "Informer watch restarts, by cluster, resource and reason",
    ["cluster", "resource", "reason"],
)
RELISTS = Counter("jobmirror_runtime_relists_total", "Informer full relists", ["cluster", "resource"])
QUEUE_DEPTH = Gauge("jobmirror_runtime_queue_depth", "Keys waiting in a work queue", ["queue"])
QUEUE_RETRIES = Counter("jobmirror_runtime_queue_retries_total", "Keys re-queued with backoff", ["queue"])
EVENTS_DROPPED = Counter(
    "jobmirror_runtime_events_dropped_total", "Events dropped because the event queue was full", ["cluster"],
)
CREDENTIAL_RENEWALS = Counter(
    "jobmirror_runtime_credential_renewals_total", "Exec-plugin tokens renewed after the API server refused one (401)",
    ["cluster", "result"],
)
