"""The controller's configuration: a YAML file, overridden by ``JOBMIRROR_*`` environment variables.

YAML keys are camelCase (``workerLostTimeout``), environment variables the snake_case
field name (``JOBMIRROR_WORKER_LOST_TIMEOUT``; nested: ``JOBMIRROR_LEADER_ELECTION__ENABLED``).
:func:`load_config` is the one way a file becomes a :class:`Config` (``jobmirror run``,
``check-config``, the plugin, the tests). It refuses what it cannot mean, one line per problem
naming the source (the file, or the environment variable), the key as a path
(``workers[0].qps``) and the fix.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping
from enum import StrEnum
from math import ceil, inf
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from mirror.claim import ClaimRule
from mirror.naming import BUILTIN_CONTROLLER_NAME, DEFAULT_CONTROLLER_NAME, default_origin
from mirror.progress import ProgressConfig
from mirror.room.quantity import parse as parse_quantity

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAMESPACE_PATTERN = re.compile(r"^[-a-z0-9*?\[\]!]+$")
ENV_PREFIX = "JOBMIRROR_"
REFERENCE = "docs/reference/configuration.md"
#: How a rate (qps) says "no client-side limit": explicit, because a negative or zero number is
#: far more often a slip than a wish (kruntime/ratelimit.py reads any rate <= 0 as no limit).
UNLIMITED = "unlimited"


class ConfigError(ValueError):
    """The configuration is unusable; ``str()`` is one line per problem: source, key path, what to do."""


def _camel(name: str) -> str:
    """The YAML spelling of a field: camelCase with TLS kept whole (``inspectTLS``, as Kubernetes writes it)."""
    return re.sub(r"Tls(?=[A-Z]|$)", "TLS", to_camel(name))


def _rate(value: Any, handler: ValidatorFunctionWrapHandler) -> float:
    """A rate above 0, or ``unlimited`` (held as 0.0, which the token bucket reads as no limit)."""
    if value == UNLIMITED:
        return 0.0
    try:
        rate = float(handler(value))
    except ValidationError:
        rate = None
    if rate is None or not 0 < rate < inf:  # inf and nan too: the token bucket would compute nan
        shown = f"{rate:g}" if rate is not None else repr(value)
        raise ValueError(f"{shown} is not a rate; write requests per second above 0, or '{UNLIMITED}' to "
                         "turn client throttling off")
    return rate


def _dump_rate(rate: float) -> float | str:
    return UNLIMITED if rate <= 0 else rate


#: Requests per second of a client: a number above 0, or ``unlimited``.
Rate = Annotated[float, WrapValidator(_rate), PlainSerializer(_dump_rate),
                 WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"const": UNLIMITED}]})]
#: Requests a client may send at once above its rate: at least 1.
Burst = Annotated[int, Field(ge=1)]

_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)?:([0-9]{1,5})$")


def _address(value: str) -> str:
    """host:port or :port, or empty = off: refused here rather than when the server binds, after the
    clusters were contacted."""
    match = _ADDRESS.match(value)
    if value and not (match and int(match[3]) <= 65535):
        raise ValueError(f"{value!r} is not host:port; write e.g. ':8080' or '127.0.0.1:8080', or '' to turn "
                         "it off")
    return value


#: A listen address: ``host:port``, ``:port`` (every interface), or empty for off; the schema's
#: pattern lets an editor (or the chart's values schema) refuse what the loader would.
Address = Annotated[str, AfterValidator(_address),
                    WithJsonSchema({"type": "string", "pattern": f"^(|{_ADDRESS.pattern[1:-1]})$"})]


def dns_label(v: str) -> str:
    """``v`` if it is a DNS label (a name in events, metrics labels and annotations), else a ValueError."""
    if not _DNS_LABEL.match(v) or len(v) > 63:
        raise ValueError(f"{v!r} is not a DNS label (lowercase letters, digits, '-', ≤ 63 chars)")
    return v


def unique_names(what: str, names: list[str]) -> None:
    """A ValueError naming every name given twice (``what``: 'worker', 'tenant')."""
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate {what} names: {', '.join(dupes)}")


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=_camel, populate_by_name=True, extra="forbid")


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class LabelSelectorRequirement(_Model):
    key: str = Field(description="The namespace label key.")
    operator: SelectorOperator = Field(description="How the key's value is matched, as in a Kubernetes label "
                                       "selector.")
    values: list[str] = Field(default_factory=list, description="Non-empty for In and NotIn; empty for Exists and "
                              "DoesNotExist.")

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        wants = self.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
        if wants and not self.values:
            raise ValueError(f"operator {self.operator.value} needs at least one value (key {self.key!r})")
        if not wants and self.values:
            raise ValueError(f"operator {self.operator.value} takes no values (key {self.key!r})")
        return self


class LabelSelector(_Model):
    """A Kubernetes label selector (matchLabels and matchExpressions, ANDed), on manager namespaces."""

    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels the namespace must carry with "
                                         "these values.")
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, description=(
        "Requirements on the namespace's labels, all of which must hold."))


class WorkerAccess(_Model):
    """Which manager namespaces may place Jobs on one worker (unset on a worker: every namespace)."""

    namespaces: list[str] = Field(default_factory=list, description=(
        "Manager namespaces (names or shell patterns, `team-*`) whose Jobs may use this worker."))
    namespace_selector: LabelSelector | None = Field(None, description=(
        "A label selector on manager namespaces whose Jobs may use this worker (`{}` selects every one); a "
        "namespace may use the worker when it is listed in `namespaces` or selected here."))

    @field_validator("namespaces")
    @classmethod
    def _names_or_patterns(cls, v: list[str]) -> list[str]:
        bad = [n for n in v if not _NAMESPACE_PATTERN.match(n) or len(n) > 63]
        if bad:
            raise ValueError(f"{', '.join(repr(b) for b in bad)}: not a namespace name or shell pattern "
                             "(lowercase letters, digits, '-', and * ? [ ])")
        return v

    @model_validator(mode="after")
    def _says_who(self) -> WorkerAccess:
        if not self.namespaces and self.namespace_selector is None:
            raise ValueError("lists no namespaces and no namespaceSelector, so no namespace could use the worker; "
                             "to let every namespace use it, leave access unset")
        return self


class Worker(_Model):
    name: str = Field(description="The worker's name (a DNS label): in events, the `worker` label of metrics and "
                      "the placement annotation `jobmirror.dev/cluster`.")
    kubeconfig: Path = Field(description="Kubeconfig of the worker cluster (a relative path is relative to the "
                             "config file).")
    context: str | None = Field(None, description="Context in that kubeconfig; unset = its current-context.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels a Job's "
                                   "`jobmirror.dev/worker-selector` annotation is matched against.")
    access: WorkerAccess | None = Field(None, description=(
        "Which manager namespaces may use this worker, pins and worker-selectors included (see "
        "[Tenancy](../security.md#per-tenant-worker-access)); unset = every namespace."))
    # High defaults: MultiKueue's 5/10 made 1000 Jobs take minutes.
    qps: Rate = Field(200.0, description=f"Requests per second of the client to this worker (above 0, or "
                      f"`{UNLIMITED}` for no client-side limit).")
    burst: Burst = Field(400, description="Burst of the client to this worker (at least 1).")

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        return dns_label(v)


class SchedulingOrder(StrEnum):
    #: priority first, then the tenant furthest below its weighted fair share, aging, arrival; backfill on
    FAIR_SHARE = "FairShare"
    #: creation order only, no backfill (jobmirror before the scheduler; kept for comparison)
    ARRIVAL = "Arrival"


#: The quota key that counts Jobs (the others are resources: cpu, memory, nvidia.com/gpu, ...).
QUOTA_JOBS = "jobs"


def _quota(v: dict[str, str | int]) -> dict[str, str | int]:
    bad = []
    for key, value in v.items():
        if key == QUOTA_JOBS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                bad.append(f"{key}: must be a whole number of Jobs, got {value!r}")
            continue
        try:
            if parse_quantity(value if isinstance(value, int) else str(value)) < 0:
                bad.append(f"{key}: must not be negative, got {value!r}")
        except ValueError:
            bad.append(f"{key}: not a Kubernetes quantity, got {value!r} (write e.g. 64, 500m, 256Gi)")
    if bad:
        raise ValueError("; ".join(bad))
    return v


Quota = Annotated[dict[str, str | int], AfterValidator(_quota)]


class Tenant(_Model):
    """A group of manager namespaces that share one fair share and one quota across the fleet."""

    name: str = Field(description="The tenant's name (a DNS label): in `kubectl jobmirror queue` and the "
                      "`tenant` label of metrics.")
    namespaces: list[str] = Field(default_factory=list, description=(
        "Manager namespaces (names or shell patterns, `team-a-*`) that belong to this tenant."))
    namespace_selector: LabelSelector | None = Field(None, description=(
        "A label selector on manager namespaces that belong to this tenant; a namespace belongs to the first "
        "tenant (in list order) that lists or selects it."))
    weight: float = Field(default=1.0, gt=0, description=(
        "The tenant's weight in fair sharing: a tenant of weight 2 is entitled to twice the dominant share of "
        "a tenant of weight 1 before it counts as above its share."))
    quota: Quota = Field(default_factory=dict, description=(
        "The most the tenant may run at once over all workers: resources as quantities (`cpu: 64`, "
        f"`memory: 256Gi`, `nvidia.com/gpu: 8`) and `{QUOTA_JOBS}:` a number of Jobs; unset keys are unlimited. "
        "A Job that would exceed it waits in the manager (WaitingForQuota)."))

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        return dns_label(v)

    @field_validator("namespaces")
    @classmethod
    def _names_or_patterns(cls, v: list[str]) -> list[str]:
        return WorkerAccess._names_or_patterns(v)

    @model_validator(mode="after")
    def _says_who(self) -> Tenant:
        if not self.namespaces and self.namespace_selector is None:
            raise ValueError(f"tenant {self.name!r} lists no namespaces and no namespaceSelector, so no Job "
                             "would belong to it")
        return self


class Scheduling(_Model):
    """Who leaves the manager's waiting line first (see docs/concepts.md, "Who goes first")."""

    order: SchedulingOrder = Field(default=SchedulingOrder.FAIR_SHARE, description=(
        "`FairShare`: the Job's priority (its PriorityClass) first, then the tenant furthest below its weighted "
        "dominant share of what runs across the fleet, then Jobs that waited past `starvationAge`, then "
        "creation order; later Jobs may backfill. `Arrival`: creation order only, no backfill."))
    tenants: list[Tenant] = Field(default_factory=list, description=(
        "Tenants by namespace; a namespace no tenant lists is a tenant of its own (weight 1, no quota)."))
    starvation_age: float = Field(default=600.0, gt=0, description=(
        "Seconds a Job may wait before it moves ahead of fair-share order within its priority (oldest first "
        "among such Jobs): no tenant's Job waits on fair share for longer than this."))
    backfill: bool = Field(default=True, description=(
        "FairShare: a Job further back may take room the Job first in line for a worker cannot use before its "
        "estimated start, when the later Job's length is known (`activeDeadlineSeconds`, or the annotation "
        "`jobmirror.dev/expected-duration`) and it ends before then."))
    backfill_margin: float = Field(default=5.0, ge=0, description=(
        "Seconds added to a backfilled Job's known length (its pods' start-up): it must end this much before "
        "the estimated start of the Job it backfills past."))

    @field_validator("tenants")
    @classmethod
    def _unique_tenants(cls, v: list[Tenant]) -> list[Tenant]:
        unique_names("tenant", [t.name for t in v])
        return v


class PlacementPolicy(StrEnum):
    #: the default: LeastLoaded among the workers where the Job's pod could ever run and has room
    #: now (mirror/room/); watches each worker's Nodes and non-terminal Pods
    ROOM_AWARE = "RoomAware"
    #: fewest unfinished copies, room unseen (no node/pod watches on the workers)
    LEAST_LOADED = "LeastLoaded"
    ROUND_ROBIN = "RoundRobin"


class MissingNamespace(StrEnum):
    CREATE = "Create"
    REPORT = "Report"


class InspectTLS(_Model):
    """A mounted serving certificate for the inspect API (unset: one is generated at start)."""

    cert_file: Path = Field(description="PEM certificate (chain) the inspect API serves.")
    key_file: Path = Field(description="Its PEM private key.")


class LeaderElection(_Model):
    enabled: bool = Field(default=False, description="Elect a leader through a Lease (run 2 replicas with it); "
                          "only the leader reconciles.")
    namespace: str = Field(default="jobmirror-system", description="Namespace of the Lease in the manager cluster.")
    lease_name: str = Field(default="jobmirror-controller", description="Name of the Lease.")
    # Whole seconds of at least 1: leaseDurationSeconds is an integer on the Lease.
    lease_duration: Annotated[int, Field(ge=1)] = Field(default=20, description=(
        "Seconds a standby waits after it last saw the Lease change before it takes it; at least "
        "renewDeadline + requestTimeout, so a write sent just before a lost renewal has landed before a "
        "standby leads."))
    renew_deadline: Annotated[int, Field(ge=1)] = Field(default=10, description=(
        "Seconds a leader may go without a successful renewal; then it stops leading and exits."))
    retry_period: Annotated[int, Field(ge=1)] = Field(default=2, description=(
        "Seconds between Lease renewals and attempts."))

    @model_validator(mode="after")
    def _timings(self) -> LeaderElection:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError("renewDeadline must be greater than 1.2 x retryPeriod")
        return self


class Config(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="JOBMIRROR_",
        env_nested_delimiter="__",
        alias_generator=_camel,
        populate_by_name=True,
        extra="forbid",
    )

    workers: list[Worker] = Field(description="The worker clusters Jobs are mirrored to: at least one, names unique.")
    manager_kubeconfig: Path | None = Field(None, description="Kubeconfig of the manager cluster; unset = the "
                                            "in-cluster ServiceAccount.")
    manager_context: str | None = Field(None, description="Context in the manager kubeconfig; unset = its "
                                        "current-context.")
    controller_name: str = Field(DEFAULT_CONTROLLER_NAME, description="The `spec.managedBy` value whose Jobs this "
                                 "installation claims (a domain-prefixed path; never the built-in Job controller's).")
    origin: str | None = Field(None, description=(
        "Identifies this installation on the copies it makes, so several managers can share a worker; unset = "
        "`jobmirror-<kube-system namespace UID of the manager>`. Several installations on one manager cluster "
        "need distinct origins."))
    namespaces: list[str] = Field(default_factory=list, description="Allow-list of manager namespaces whose Jobs "
                                  "are claimed; empty = all namespaces.")
    resync_period: float = Field(30.0, gt=0, description=(
        "Seconds between two looks at a claimed Job that waits on something no event announces (held, "
        "pinned to a worker it cannot use, on a lost worker, backing off a refusal). A running Job whose "
        "status is mirrored has no timer: its copy's and its own watch events bring it back, and its "
        "worker turning unhealthy (checked every 2 s)."))
    status_batch_period: float = Field(1.0, ge=0, le=30, description=(
        "Seconds a copy's running counters (active, ready, succeeded …) may wait before they are mirrored, so "
        "the changes of that while go to the manager in one write; a condition (Complete, Failed, "
        "SuccessCriteriaMet, Suspended …) is mirrored at once. 0 = every change at once. The built-in Job "
        "controller batches its pods' updates the same way (1 s)."))
    worker_lost_timeout: float = Field(900.0, gt=0, description=(
        "Seconds a worker may be unreachable (or unconfigured) before its Jobs are re-dispatched (or, if already "
        "decided, finished) and deleted Jobs waiting on it release their finalizer."))
    gc_interval: float = Field(60.0, gt=0, description="Seconds between GC rounds, which delete copies of this "
                               "origin whose manager Job is gone or placed elsewhere.")
    placement: PlacementPolicy = Field(PlacementPolicy.ROOM_AWARE, description=(
        "How a worker is chosen: RoomAware (where the Job's pods fit now, watching each worker's Nodes and "
        "Pods; then the least loaded), LeastLoaded (fewest unfinished copies, room unseen) or RoundRobin."))
    keep_finished_remote: bool = Field(False, description="Keep a finished Job's copy on its worker instead of "
                                       "deleting it (and its pods).")
    missing_namespace: MissingNamespace = Field(MissingNamespace.CREATE, description=(
        "The Job's namespace is missing on the worker: Create it (with the manager namespace's Pod Security "
        "labels), or Report it as a NamespaceMissing event."))
    worker_namespaces: list[str] = Field(default_factory=list, description=(
        "Namespaces (names or shell patterns, `team-*`) the controller may create or use on workers; a claimed "
        "Job elsewhere gets no copy (event NamespaceNotAllowed). Empty = any, except the clusters' own `default` "
        "and `kube-*`, used only when an entry names them (`default`, `kube-system`, `kube-*`; `*` does not). An "
        "existing worker namespace gets a copy only if it enforces at least the manager namespace's Pod Security "
        "level (event NamespaceWeaker)."))
    namespace_labels: list[str] = Field(default_factory=list, description=(
        "Label keys (or patterns) copied from the manager namespace to a worker namespace the controller "
        "creates, beside Pod Security's, which always are."))
    created_namespace_labels: dict[str, str] = Field(
        default_factory=lambda: {"pod-security.kubernetes.io/enforce": "baseline"}, description=(
            "Labels of a created worker namespace where the manager namespace has none of that key: no "
            "unlabelled (privileged) namespace by default. `{}` restores the bare namespace."))
    qps: Rate = Field(200.0, description=f"Requests per second of the client to the manager cluster (above 0, "
                      f"or `{UNLIMITED}` for no client-side limit).")
    burst: Burst = Field(400, description="Burst of the client to the manager cluster (at least 1).")
    request_timeout: float = Field(10.0, gt=0, description="Seconds any one API request may take.")
    health_probe_interval: float = Field(5.0, gt=0, description="Seconds between two `/readyz` probes of each "
                                         "worker.")
    slow_call_seconds: float = Field(3.0, gt=0, description=(
        "A worker call (or probe) slower than this makes the worker slow for a minute: new Jobs go elsewhere "
        "when they can, and its calls share a quarter of the reconcile slots with the other slow workers'. "
        "Timed without the wait for the client's own QPS token and without the time the controller's own "
        "event loop was stalled meanwhile (jobmirror_event_loop_lag_seconds): those are not the worker's."))
    workers_concurrency: int = Field(32, ge=1, description="Reconcile slots: manager Jobs reconciled at once.")
    metrics_address: Address = Field(":8080", description="host:port serving `/healthz`, `/readyz` and "
                                     "`/metrics`; empty = off.")
    worker_events: bool = Field(True, description=(
        "Mirror the Warning events of copies and their pods onto the manager Jobs (needs events list/watch and "
        "pods get in the workers, see deploy/worker/)."))
    kinds: list[Literal["Job", "JobSet"]] = Field(["Job"], min_length=1, description=(
        "The kinds mirrored: `Job` (batch/v1) and `JobSet` (jobset.x-k8s.io/v1alpha2: the manager must serve "
        "its CRD and every worker run JobSet; RBAC: deploy/jobset/, or the chart when config.kinds names "
        "JobSet). See docs/jobsets.md."))
    unschedulable_timeout: float = Field(300.0, gt=0, description=(
        "Seconds a copy's pod may stay unschedulable before a CopyUnschedulable event (and, with RoomAware, "
        "an unpinned copy that never started is moved)."))
    head_of_line_hold: float = Field(120.0, ge=0, description=(
        "RoomAware: seconds a Job waiting for room may hold the workers it waits for against Jobs created "
        "after it (first come, first placed), counted from when the first of the two began waiting; then "
        "it stops holding (a HeadOfLineHoldEnded event) and keeps waiting. 0: no Job holds a worker."))
    progress: ProgressConfig = Field(default_factory=ProgressConfig, description=(
        "Deadlines of a copy's phases on its worker (pods created, a container started): past one, the copy "
        "is reported stuck with the worker's own cause and moved while nothing of it ran; see "
        "[Stuck copies](../concepts.md#stuck-copies)."))
    scheduling: Scheduling = Field(default_factory=Scheduling, description=(
        "The order in which Jobs waiting in the manager are placed: priority, fair share between tenants, "
        "per-tenant quotas across the fleet, backfill."))
    inspect_address: Address = Field("", description=(
        "host:port of the read-only HTTPS inspect API behind `kubectl jobmirror describe/logs` for users "
        "without worker credentials (TokenReview, then a SubjectAccessReview on the Job); empty = off."))
    inspect_tls: InspectTLS | None = Field(None, description=(
        "A mounted serving certificate for the inspect API; unset = a self-signed one is made at start (the "
        "service proxy does not verify it: encryption is what the hop needs)."))
    inspect_max_streams: int = Field(32, ge=1, description=(
        "Open `logs` streams at once in total; past it a user gets 429, so no user can take the connections "
        "the controller's own reads need."))
    inspect_max_streams_per_user: int = Field(4, ge=1, description="Open `logs` streams at once per user.")
    inspect_write_timeout: float = Field(30.0, gt=0, description=(
        "Seconds a log stream's reader may take to accept a chunk before the stream is cut."))
    leader_election: LeaderElection = Field(default_factory=LeaderElection, description=(
        "Lease-based leader election (enable it with 2 replicas)."))

    @field_validator("controller_name")
    @classmethod
    def _not_builtin(cls, v: str) -> str:
        if v == BUILTIN_CONTROLLER_NAME:
            raise ValueError(f"{v!r} is reserved for the built-in Job controller")
        if "/" not in v:
            raise ValueError("must be a domain-prefixed path, e.g. jobmirror.dev/controller")
        return v

    @field_validator("origin")
    @classmethod
    def _origin_label(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a valid label value; write at most 63 letters, digits, '-', '_' or '.', "
                             "beginning and ending with a letter or digit, or leave origin unset")
        return v

    @field_validator("leader_election")
    @classmethod
    def _lease_outlasts_writes(cls, v: LeaderElection, info: ValidationInfo) -> LeaderElection:
        timeout = info.data.get("request_timeout")
        if v.enabled and timeout is not None and v.lease_duration - v.renew_deadline < timeout:
            raise ValueError(
                f"leaseDuration ({v.lease_duration}s) - renewDeadline ({v.renew_deadline}s) must be at least "
                f"requestTimeout ({timeout:g}s): a write sent just before a failed renewal may land that much "
                f"later, after a standby took over; raise leaseDuration to {v.renew_deadline + ceil(timeout)} "
                "or lower requestTimeout")
        return v

    @field_validator("workers")
    @classmethod
    def _unique_workers(cls, v: list[Worker]) -> list[Worker]:
        # A field validator, so the error is reported at ``workers``, not at the top level.
        if not v:
            raise ValueError("at least one worker is required")
        unique_names("worker", [w.name for w in v])
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The values given, nothing else: load_config() adds the file and the environment itself,
        # so that each error can name the one it came from.
        return (init_settings,)

    def origin_for(self, manager_cluster: str) -> str:
        """The origin label value: the configured one, else derived from the manager's identity."""
        return self.origin or default_origin(manager_cluster)

    @property
    def claim_rule(self) -> ClaimRule:
        return ClaimRule(self.controller_name, frozenset(self.namespaces))

    def worker(self, name: str) -> Worker | None:
        return next((w for w in self.workers if w.name == name), None)


# -- loading ----------------------------------------------------------------------------------
#
# Not pydantic-settings' YamlConfigSettingsSource: it reads a missing file as an empty one (a
# mistyped path then reads as "workers: required"), fails on a non-mapping top level with an
# AttributeError, matches top-level keys case-insensitively but nested ones exactly (so
# `InspectTLS:` passed at the top and failed one level down), and once its values are merged with
# the environment's no error can say which of the two a bad value came from. So the file is read
# here, the environment through pydantic-settings' own EnvSettingsSource, each checked key by key
# in the YAML spelling, merged (the environment wins) and validated by Config.model_validate.

Loc = tuple[str | int, ...]

# What a value of the wrong type must be, by pydantic error type.
_MUST_BE = {
    "greater_than": "greater than {gt}", "greater_than_equal": "at least {ge}", "less_than": "less than {lt}",
    "less_than_equal": "at most {le}", "float_parsing": "a number", "float_type": "a number",
    "int_parsing": "a whole number", "int_type": "a whole number", "int_from_float": "a whole number",
    "bool_parsing": "true or false", "bool_type": "true or false", "string_type": "a string",
    "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping", "literal_error": "one of {expected}", "enum": "one of {expected}",
    "path_type": "a path",
}


def key_path(loc: Loc) -> str:
    """A location as it reads in the YAML: ``workers[0].qps``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _sub_model(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model a field holds (``X``, ``X | None``, ``list[X]``) and whether it is a list of them."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (types.UnionType, typing.Union) and len(args) == 1:
        annotation, args = args[0], list(typing.get_args(args[0]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is list and args and isinstance(args[0], type) \
            and issubclass(args[0], BaseModel):
        return args[0], True
    return None


def _unknown(key: str, known: list[str]) -> str:
    """The unknown-key message, with the closest spelling at that level when there is one."""
    close = [_camel(key)] if _camel(key) in known else difflib.get_close_matches(key, known, n=1)
    return f"unknown key; did you mean {close[0]!r}?" if close else f"unknown key; the keys are listed in {REFERENCE}"


def check_keys(model: type[BaseModel], data: dict[Any, Any], loc: Loc = ()) -> tuple[dict[str, Any], list[
        tuple[Loc, str]]]:
    """``data`` without the keys ``model`` lacks, and a problem for each of them.

    Only the YAML spelling (camelCase) is a key: the model also takes field names for the code's
    sake (``populate_by_name``), but a file must not have two spellings of one key.
    """
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    clean: dict[str, Any] = {}
    problems: list[tuple[Loc, str]] = []
    for key, value in data.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            problems.append(((*loc, str(key)), _unknown(str(key), list(fields))))
            continue
        sub = _sub_model(field.annotation)
        if sub is not None and sub[1] and isinstance(value, list):
            items: list[Any] = []
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    item, more = check_keys(sub[0], item, (*loc, key, i))
                    problems += more
                items.append(item)
            value = items
        elif sub is not None and not sub[1] and isinstance(value, dict):
            value, more = check_keys(sub[0], value, (*loc, key))
            problems += more
        clean[key] = value
    return clean, problems


def _by_alias(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """Field-name keys (the environment's) renamed to their YAML spelling, nested models too."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            out[key] = value
            continue
        sub = _sub_model(field.annotation)
        if sub is not None and not sub[1] and isinstance(value, dict):
            value = _by_alias(sub[0], value)
        out[field.alias or key] = value
    return out


def _environment() -> dict[str, Any]:
    """The ``JOBMIRROR_*`` variables as a mapping keyed like the file (lists and maps are JSON)."""
    try:
        values = EnvSettingsSource(Config)()
    except SettingsError as exc:
        field = re.search(r'field "(\w+)"', str(exc))
        var = ENV_PREFIX + (field[1].upper() if field else "*")
        raise ConfigError(f"environment variable {var}: not valid JSON; a list or map is given as JSON, e.g. "
                          f"{ENV_PREFIX}WORKERS='[{{\"name\": \"w1\", \"kubeconfig\": \"/k\"}}]'") from exc
    return _by_alias(Config, values)


def _merged(file: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """``env`` over ``file``, mapping by mapping (one nested variable keeps the file's siblings)."""
    out = dict(file)
    for key, value in env.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


def _source(loc: Loc, env: dict[str, Any], file: Path) -> str:
    """Where the value at ``loc`` came from: the environment variable that set it, else the file."""
    node: Any = env
    model: type[BaseModel] | None = Config
    names: list[str] = []
    for part in loc:
        if model is None or not isinstance(node, dict) or part not in node:
            return str(file)
        names.append(next((n for n, f in model.model_fields.items() if f.alias == part), str(part)))
        node = node[part]
        if not isinstance(node, dict):  # a value, or a list given as JSON: one variable set it
            return f"environment variable {ENV_PREFIX}{'__'.join(names).upper()}"
        sub = _sub_model(model.model_fields[names[-1]].annotation) if names[-1] in model.model_fields else None
        model = sub[0] if sub is not None and not sub[1] else None
    if not names:
        return str(file)
    return f"{file} with environment variables {ENV_PREFIX}{'__'.join(names).upper()}__*"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problem(err: ErrorDetails) -> str:
    """What is wrong with a value and what to write instead, in the file's terms."""
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return f"required but missing; add it (see {REFERENCE})"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error") or err["msg"])
    must = _MUST_BE.get(kind)
    if must is not None:
        bounds = {k: f"{v:g}" if isinstance(v, float) else v for k, v in ctx.items()}
        return f"must be {must.format(**bounds)}, got {_shown(err['input'])}"
    return f"{err['msg'][:1].lower()}{err['msg'][1:]}, got {_shown(err['input'])}"


def read_config_file(path: Path) -> dict[Any, Any]:
    """The file's top-level mapping; a :class:`ConfigError` naming the file (and line) if there is none."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"{path}: {where}not valid YAML: {exc.problem or exc.context}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys, got {type(raw).__name__}")
    return raw


def load_config(path: str | Path) -> Config:
    """Read, check and validate a config file with the environment over it; relative kubeconfig
    paths are resolved against the file. Raises :class:`ConfigError` listing every problem."""
    p = Path(path)
    env = _environment()
    file_values, file_problems = check_keys(Config, read_config_file(p))
    env_values, env_problems = check_keys(Config, env)
    lines = [f"{p}: {key_path(loc)}: {msg}" for loc, msg in file_problems]
    lines += [f"{_source(loc, env, p)}: {key_path(loc)}: {msg}" for loc, msg in env_problems]
    cfg: Config | None = None
    try:
        cfg = Config.model_validate(_merged(file_values, env_values))
    except ValidationError as exc:
        lines += [f"{_source(e['loc'], env, p)}: {key_path(e['loc'])}: {problem(e)}" for e in exc.errors()]
    if lines or cfg is None:
        raise ConfigError("\n".join(lines))
    base = p.resolve().parent
    for w in cfg.workers:
        if not w.kubeconfig.is_absolute():
            w.kubeconfig = base / w.kubeconfig
    if cfg.manager_kubeconfig is not None and not cfg.manager_kubeconfig.is_absolute():
        cfg.manager_kubeconfig = base / cfg.manager_kubeconfig
    return cfg


def cluster_conflicts(manager: str, workers: Mapping[str, str | None], *, origin: str | None) -> list[str]:
    """Problems in the worker list that only the clusters' identities reveal; empty when fine.

    ``workers`` maps each entry to its cluster identity (kube-system namespace UID; None when
    it could not be read). Two entries for one cluster would count, place and garbage-collect
    the same copies twice (each sees the other's copy as stray), so they are an error naming
    both. So is a configured ``origin`` that is another cluster's default origin: the copies
    of a jobmirror managing from that cluster would be indistinguishable from ours. A worker
    that is the manager cluster itself is fine (role sharing: copies get derived names).
    """
    problems: list[str] = []
    by_cluster: dict[str, list[str]] = {}
    for name, ident in workers.items():
        if ident:
            by_cluster.setdefault(ident, []).append(name)
    for ident, names in by_cluster.items():
        if len(names) > 1:
            also = " (the manager cluster itself)" if ident == manager else ""
            problems.append(f"workers: entries {' and '.join(repr(n) for n in names)} are the same cluster{also} "
                            f"(kube-system namespace UID {ident}); list each cluster once")
    if origin:
        for name, ident in workers.items():
            if ident and ident != manager and origin == default_origin(ident):
                problems.append(f"origin: {origin!r} is the default origin of worker {name!r}'s cluster, i.e. of "
                                "a jobmirror managing from there; its copies and ours would be indistinguishable")
    return problems
