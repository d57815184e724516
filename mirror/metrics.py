"""Prometheus metrics of the mirror controller (prefix ``jobmirror_``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from kruntime.metrics import event_loop_lag

LEADER = Gauge("jobmirror_leader", "1 while this process reconciles (holds the leader Lease, or runs without "
               "election); 0 for a standby")
DISPATCHES = Counter("jobmirror_dispatches_total", "Remote copies created", ["worker"])
STATUS_WRITES = Counter("jobmirror_status_writes_total", "Manager Job status writes by result",
                        ["result"])  # ok | conflict | rejected | error
SYNC_LATENCY = Histogram(
    "jobmirror_sync_duration_seconds", "Time to reconcile one manager Job",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
STATUS_PROPAGATION = Histogram(
    "jobmirror_status_propagation_seconds", "From a copy's status change arriving in the worker watch to the manager "
    "status write mirroring it (mirror/status_lag.py)", ["worker"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
RECONCILE_ERRORS = Counter("jobmirror_reconcile_errors_total", "Reconciles that failed and were retried", ["reason"])
WORKER_UP = Gauge("jobmirror_worker_up", "1 when the worker is reachable and its watch is healthy", ["worker"])
REDISPATCHES = Counter("jobmirror_redispatches_total", "Jobs moved off a lost worker", ["from_worker", "to_worker"])
GC_ROUNDS = Counter("jobmirror_gc_rounds_total", "GC rounds completed (every kind, every healthy worker): "
                    "flat while copies exist means orphans are not being collected")
GC_DELETIONS = Counter("jobmirror_gc_deletions_total", "Orphaned or stale remote copies deleted", ["worker", "reason"])
REMOTE_DELETES = Counter("jobmirror_remote_deletes_total", "Remote copies deleted", ["worker", "reason"])
HEALTH_PROBE_FAILURES = Counter("jobmirror_worker_probe_failures_total", "Failed worker health probes", ["worker"])
WORKER_SLOW = Gauge("jobmirror_worker_slow", "1 while a worker answers slowly (new Jobs go elsewhere, its calls share "
                    "the slow workers' reconcile slots)", ["worker"])
WORKER_SLOW_CALLS = Counter("jobmirror_worker_slow_calls_total", "Calls to a worker slower than slowCallSeconds",
                            ["worker"])
WORKER_CALLS_DETACHED = Counter("jobmirror_worker_calls_detached_total", "Worker calls left to finish on their own "
                                "because they outlasted slowCallSeconds (their reconcile slot went to other Jobs)",
                                ["worker"])
WORKER_BUSY = Counter("jobmirror_worker_busy_total", "Passes that ended without their worker call, to come back later, "
                      "by why: rate_limited (the worker client's next token is far off: parked until its turn), "
                      "in_flight (the worker's share of calls is taken), slow_slots (slow, and the slow workers' "
                      "shared slots are taken), detached (a call outlasted slowCallSeconds), call_pending (a detached "
                      "call of an earlier pass has not ended)", ["worker", "reason"])
WORKER_PARKED = Gauge("jobmirror_worker_parked_jobs", "Jobs parked until their turn for a token of the worker's "
                      "rate-limited client (qps/burst), not re-polled meanwhile", ["worker"])
WORKER_IDENTITY_FAILURES = Counter("jobmirror_worker_identity_failures_total", "Failed reads of a held worker's "
                                   "cluster identity (it stays unused until one succeeds)", ["worker"])
GC_UNPROVEN = Gauge("jobmirror_gc_unproven_copies", "Copies with our origin label kept by the last GC round because "
                    "nothing proves this manager made them", ["worker"])
NAME_COLLISIONS = Counter("jobmirror_name_collisions_total", "Placed workers holding a same-named object that is "
                          "not our copy", ["worker"])
COPIES_LEFT_FOR_GC = Counter("jobmirror_copies_left_for_gc_total", "Deleted manager Jobs whose finalizer was "
                             "released after workerLostTimeout with their copy on an unreachable worker left for GC",
                             ["worker"])
UNCLAIMED_RELEASES = Counter("jobmirror_unclaimed_releases_total", "Finalizers released from Jobs this installation "
                             "no longer claims (namespaces narrowed, controllerName changed)")
WORKER_REFUSALS = Counter("jobmirror_worker_refusals_total", "Creates, spec patches and deletes of a copy that a "
                          "worker refused with a 4xx (quota, admission, terminating namespace, invalid)",
                          ["worker", "verb"])
GC_MANAGER_READS = Counter("jobmirror_gc_manager_reads_total", "Live manager reads GC made to confirm a copy the "
                           "cache says to delete (copies the cache keeps cost none)")
GC_DEFERRED = Counter("jobmirror_gc_deferred_total", "Copies whose GC confirmation waited a round: the round's "
                      "manager read budget was spent", ["worker"])
GC_ERRORS = Counter("jobmirror_gc_errors_total", "Copies GC could not judge or collect because of an unexpected "
                    "error (logged; the round goes on, the copy is retried when it changes)", ["worker"])
WORKER_WARNINGS = Counter("jobmirror_worker_warnings_mirrored_total", "Warning events of copies and their pods on "
                          "a worker re-emitted on the manager Job (before the spam filter)", ["worker"])
COPIES_UNSCHEDULABLE = Counter("jobmirror_copies_unschedulable_total", "Copies whose pod stayed unschedulable longer "
                               "than unschedulableTimeout (one CopyUnschedulable event each)", ["worker"])
INSPECT_REQUESTS = Counter("jobmirror_inspect_requests_total", "Inspect API requests by verb and answer",
                           ["verb", "code"])
INSPECT_STREAMS = Gauge("jobmirror_inspect_log_streams", "Inspect API log streams open now")
INSPECT_STREAMS_REFUSED = Counter("jobmirror_inspect_log_streams_refused_total",
                                  "Log streams refused at the total or per-user cap (answered 429)")
INSPECT_STREAMS_CUT = Counter("jobmirror_inspect_log_streams_cut_total",
                              "Log streams cut because the reader stopped accepting data (inspectWriteTimeout)")
WORKER_ALLOCATABLE = Gauge("jobmirror_worker_allocatable", "Allocatable of a worker's Ready, uncordoned nodes, in the "
                           "scheduler's units (cpu in millicores), from its room view (placement RoomAware)",
                           ["worker", "resource"])
WORKER_REQUESTED = Gauge("jobmirror_worker_requested", "What the non-terminal pods bound to those nodes request, same "
                         "units (placement RoomAware)", ["worker", "resource"])
WORKER_PODS_PENDING = Gauge("jobmirror_worker_pods_pending", "Non-terminal pods of a worker not bound to a node yet "
                            "(placement RoomAware)", ["worker"])
NO_WORKER_FITS = Counter("jobmirror_no_worker_fits_total", "Placements refused because no worker could ever run the "
                         "Job's pod (NoWorkerFits events, before their once-per-Job filter)")
JOBS_WAITING_FOR_ROOM = Gauge("jobmirror_jobs_waiting_for_room", "Jobs kept in the manager because no worker that "
                              "could run them has room now, or an older waiting Job holds it (placement RoomAware)")
BACKFILLS = Counter("jobmirror_backfills_total", "Jobs placed on a worker that a Job ahead of them in line waited "
                    "for, because they end before that Job could start there (scheduling.backfill)", ["worker"])
TENANT_RUNNING = Gauge("jobmirror_tenant_running_jobs", "Placed, unfinished Jobs of a tenant across the fleet "
                       "(scheduling.tenants; a namespace no tenant lists is its own)", ["tenant"])
TENANT_WAITING = Gauge("jobmirror_tenant_waiting_jobs", "Jobs of a tenant waiting in the manager for room or for "
                       "its quota", ["tenant"])
TENANT_SHARE = Gauge("jobmirror_tenant_dominant_share", "A tenant's weighted dominant share: the largest fraction "
                     "of the fleet's allocatable cpu, memory or extended resource its running Jobs request, over its "
                     "weight (fair share orders the waiting line by it, smallest first)", ["tenant"])
TENANT_QUOTA_USED = Gauge("jobmirror_tenant_quota_used_ratio", "What a tenant's running Jobs use of its quota, per "
                          "resource (jobs: the Job count), 1 = at the quota", ["tenant", "resource"])
REPLACEMENTS = Counter("jobmirror_replacements_total", "Copies stuck on a worker (no progress past a phase's "
                       "deadline, none of their containers ever started) deleted there and placed again elsewhere",
                       ["worker"])
STUCK_NOT_MOVED = Counter("jobmirror_stuck_not_moved_total", "Stuck copies left where they are by the move limits "
                          "(progress.maxMoves reached, or every worker the Job may use failed it the same way)",
                          ["worker"])
WORKER_STALLED = Gauge("jobmirror_worker_stalled", "1 while a worker answers but runs nothing: stalledCopies of our "
                       "copies there have had no pod and no word from its Job controller past podsCreatedTimeout "
                       "(cleared once a copy there shows it at work)", ["worker"])
COPIES_STUCK = Counter("jobmirror_copies_stuck_total", "Copies found stuck in a phase past its deadline (one CopyStuck "
                       "event each), by phase: created, pods created, pods bound", ["worker", "phase"])
EVENT_LOOP_LAG = event_loop_lag("jobmirror")
